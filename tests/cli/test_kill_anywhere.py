"""Kill anywhere (#12): SIGKILL ``aiocommit abort`` and ``aiocommit cleanup`` at random
store calls (every tenth of their calls is hit, cleanup included), re-run them, and
nothing of the aborted or cleaned jobs is visible and nothing of other jobs is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocommit.stress.kill_cli import OPERATIONS, kill_anywhere


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_kill_anywhere(tmp_path: Path, operation: str) -> None:
    figures = await kill_anywhere(operation, runs=10, seed=12, workdir=str(tmp_path))
    assert figures["failures"] == []
    assert figures["kills"] == 10
    positions = figures["kill_positions"]
    assert min(positions) <= 0.1 and max(positions) > 0.9, positions  # setup to cleanup
    assert figures["ok"]
