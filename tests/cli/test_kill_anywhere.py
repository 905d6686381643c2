"""Kill anywhere (#12): SIGKILL ``aiocommit abort``, ``aiocommit cleanup`` and a
replacing ``aiocommit commit`` at random store calls (every tenth of their calls is hit,
cleanup included), re-run them (or abort the replace), and nothing of the aborted or
cleaned jobs is visible, nothing of other jobs is lost, and a replace ends exactly new
or exactly old."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocommit.stress.kill_cli import OPERATIONS, kill_anywhere


@pytest.mark.parametrize("operation", [o for o in OPERATIONS if o != "replace"])
async def test_kill_anywhere(tmp_path: Path, operation: str) -> None:
    figures = await kill_anywhere(operation, runs=10, seed=12, workdir=str(tmp_path))
    assert figures["failures"] == []
    assert figures["kills"] == 10
    positions = figures["kill_positions"]
    assert min(positions) <= 0.1 and max(positions) > 0.9, positions  # setup to cleanup
    assert figures["ok"]


@pytest.mark.timeout(400)
async def test_kill_anywhere_during_a_replace(tmp_path: Path) -> None:
    """``aiocommit commit --conflict-mode replace`` killed at 8 stratified store calls;
    half finished by a re-run (exactly the new output), half by ``aiocommit abort``
    (exactly the old output, or the new one past the commit point)."""
    figures = await kill_anywhere("replace", runs=8, seed=19, workdir=str(tmp_path))
    assert figures["failures"] == []
    assert figures["kills"] == 8
    positions = figures["kill_positions"]
    assert min(positions) <= 0.125 and max(positions) > 0.875, positions
    assert figures["ok"]
