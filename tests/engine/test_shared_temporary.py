"""Per-job staging: a job's cleanup never fails or removes data because another job
uses the shared ``_temporary`` (issue 33, behaviour 4)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import anyio
import pytest

from aiocommit import abort_job, commit_job, commit_task, setup_job
from aiocommit.stores.base import Store, join
from aiocommit.stores.local import LocalStore
from tests.helpers import MANIFEST, exists, output, write_task

ROUNDS = 12


async def _one_job(store: Store, dest: str, tag: str) -> str:
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    attempt = await write_task(store, dest, job_id, 0, 0, {f"{tag}/f.dat": tag.encode()})
    await commit_task(attempt, store=store)
    return job_id


async def _set_up_and_abort(store: Store, dest: str) -> None:
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    await abort_job(dest, job_id, store=store)


async def test_cleanups_racing_setups_never_fail(store_root: tuple[Store, str]) -> None:
    """Two jobs commit (and clean up) while a third sets up and aborts, round after
    round: every call succeeds, each commit's output is there, nothing is left."""
    store, root = store_root
    for round_number in range(ROUNDS):
        dest = join(root, f"out{round_number}")
        first = await _one_job(store, dest, "a")
        second = await _one_job(store, dest, "b")

        async with anyio.create_task_group() as group:
            for job_id in (first, second):
                group.start_soon(functools.partial(commit_job, dest, job_id, store=store))
            group.start_soon(_set_up_and_abort, store, dest)
        assert await output(store, dest) == {"a/f.dat": b"a", "b/f.dat": b"b"}
        assert not await exists(store, join(dest, "_temporary"))


async def test_a_neighbour_removing_temporary_mid_cleanup_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race behind behaviour 4, made certain: another job's cleanup removes the empty
    shared ``_temporary`` between this cleanup's look and its own removal of it. The
    commit succeeds and its output is in place (it failed with ``job_stage_cleanup
    failed: No such file or directory … _temporary``)."""
    store, dest = LocalStore(), str(tmp_path / "dest")
    job_id = await _one_job(store, dest, "a")
    real_rmdir = os.rmdir

    def neighbour_first(path: str, *args: object, **kwargs: object) -> None:
        if path.endswith("/_temporary") and os.path.isdir(path) and not os.listdir(path):
            real_rmdir(path)  # the neighbour's cleanup won the race
        real_rmdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rmdir", neighbour_first)
    summary = await commit_job(dest, job_id, store=store)
    assert summary.success
    assert await output(store, dest) == {"a/f.dat": b"a"}
    assert not await exists(store, join(dest, "_temporary"))


async def test_a_local_delete_of_a_directory_removed_meanwhile_answers_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``LocalStore.delete`` of an empty directory another process removes between its
    ``lstat`` and its ``rmdir``: False (nothing was there to delete), not ``NotFound``."""
    target = tmp_path / "shared"
    target.mkdir()
    real_rmdir = os.rmdir

    def removed_meanwhile(path: str, *args: object, **kwargs: object) -> None:
        if path == str(target) and target.exists():
            real_rmdir(path)
        real_rmdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rmdir", removed_meanwhile)
    assert await LocalStore().delete(str(target)) is False
    assert not target.exists()
