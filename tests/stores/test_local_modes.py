"""Committed output is as readable as the umask says: files and directories get the mode a
plain ``open()``/``mkdir()`` would give them, ``_SUCCESS`` included."""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from aiocommit import commit_job
from aiocommit.cli import main
from aiocommit.stores.local import LocalStore
from tests.helpers import run_tasks


@pytest.fixture(params=[0o022, 0o027, 0o002])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


@pytest.fixture
def run_cli() -> Iterator[Callable[..., Result]]:
    """``aiocommit ARGS`` in this process; the ``aiocommit`` logger is restored after."""
    logger = logging.getLogger("aiocommit")
    level, handlers = logger.level, list(logger.handlers)
    yield lambda *args: CliRunner().invoke(main, list(args))
    logger.setLevel(level)
    for handler in list(logger.handlers):
        if handler not in handlers:
            logger.removeHandler(handler)


def modes(root: Path) -> dict[str, int]:
    """Every file's and directory's permission bits below ``root``."""
    found = {}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return found


def test_committed_files_and_directories_follow_the_umask(tmp_path: Path, umask: int) -> None:
    dest = tmp_path / "dest"
    store = LocalStore()

    async def job() -> None:
        job_id, _ = await run_tasks(store, str(dest), tasks=2, files_per_task=3)
        await commit_job(str(dest), job_id, store=store)

    anyio.run(job)
    found = modes(dest)
    assert "_SUCCESS" in found and "part=0" in found and "part=0/part-00000-0000.dat" in found
    for name, mode in found.items():
        want = (0o777 if (dest / name).is_dir() else 0o666) & ~umask
        assert mode == want, f"{name}: {mode:o}, expected {want:o} under umask {umask:03o}"


def test_store_writes_follow_the_umask(tmp_path: Path, umask: int) -> None:
    store = LocalStore()
    source = tmp_path / "source.bin"
    source.write_bytes(b"x")

    async def write() -> None:
        await store.write_bytes(str(tmp_path / "a" / "b.bin"), b"data")
        await store.upload_file(str(source), str(tmp_path / "c" / "d.bin"))
        await store.mkdirs(str(tmp_path / "e" / "f"))

    anyio.run(write)
    assert stat.S_IMODE((tmp_path / "a" / "b.bin").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "c" / "d.bin").stat().st_mode) == 0o666 & ~umask
    for directory in ("a", "c", "e", "e/f"):
        assert stat.S_IMODE((tmp_path / directory).stat().st_mode) == 0o777 & ~umask


def test_demo_output_is_readable_by_others(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    old = os.umask(0o022)
    try:
        result = run_cli("demo", str(tmp_path / "out"), "--tasks", "2")
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    found = modes(tmp_path / "out")
    assert found["_SUCCESS"] == 0o644 and found["part=0"] == 0o755
    assert all(mode & 0o044 == 0o044 for mode in found.values())


def test_demo_without_a_directory_makes_a_readable_one(run_cli: Callable[..., Result]) -> None:
    old = os.umask(0o022)
    try:
        result = run_cli("demo", "--tasks", "1", "--files-per-task", "2")
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    dest = Path(result.output.split(" into ", 1)[1].split(" in ", 1)[0])
    try:
        assert stat.S_IMODE(dest.stat().st_mode) == 0o755
        assert stat.S_IMODE((dest / "_SUCCESS").stat().st_mode) == 0o644
    finally:
        shutil.rmtree(dest)
