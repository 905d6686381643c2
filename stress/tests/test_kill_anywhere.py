"""Kill anywhere (#12): SIGKILL ``aiocommit abort``, ``aiocommit cleanup`` and a
replacing ``aiocommit commit`` at random store calls (every tenth of their calls is hit,
cleanup included), re-run them (or abort the replace), and nothing of the aborted or
cleaned jobs is visible, nothing of other jobs is lost, and a replace ends exactly new
or exactly old."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aiocommit.stores.s3 import S3Store
from aiocommit_stress.kill_cli import OPERATIONS, kill_anywhere
from aiocommit_testing.s3_emulator import create_bucket


@pytest.mark.slow
@pytest.mark.parametrize("operation", [o for o in OPERATIONS if not o.startswith("replace")])
async def test_kill_anywhere(tmp_path: Path, operation: str) -> None:
    figures = await kill_anywhere(operation, runs=10, seed=12, workdir=str(tmp_path))
    assert figures["failures"] == []
    assert figures["kills"] == 10
    positions = figures["kill_positions"]
    assert min(positions) <= 0.1 and max(positions) > 0.9, positions  # setup to cleanup
    assert figures["ok"]


@pytest.mark.slow
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


@pytest.mark.timeout(600)
async def test_kill_anywhere_during_a_replace_on_s3(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on S3 (moto) with the staging committer: a re-run ends exactly new, with
    no upload left outstanding; an abort before the commit point leaves no new file and
    every old file but those it names as deleted (S3 cannot move them aside)."""
    bucket = f"kill-{os.getpid()}"
    await create_bucket(s3_endpoint, bucket)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)  # the CLI children inherit it
    store = S3Store(bucket, scheme="s3a", endpoint_url=s3_endpoint)
    try:
        figures = await kill_anywhere("replace-s3", runs=6, seed=19, workdir="/kill", store=store)
    finally:
        await store.aclose()
    assert figures["failures"] == []
    assert figures["kills"] == 6
    positions = figures["kill_positions"]
    assert min(positions) < 0.2 and max(positions) > 0.8, positions
    assert figures["ok"]
