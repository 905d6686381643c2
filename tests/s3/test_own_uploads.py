"""An S3A job's commit, abort and cleanup touch only its own uploads: those its pending
sets, ``.pending`` files and upload records name (an attempt that died mid-upload
included), never a live neighbour job's or another writer's under the destination. The
destination-wide sweep is ``abort_old_uploads``, with an age limit."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from aiocommit import (
    CommitError,
    CommitOptions,
    InvalidInput,
    PermissionDenied,
    abort_job,
    cleanup_job,
    commit_job,
    commit_task,
    setup_job,
    setup_task,
)
from aiocommit.committers.s3a import abort_old_uploads
from aiocommit.stores.base import Store, join
from aiocommit.stores.local import LocalStore
from aiocommit.stores.multipart import MultipartStore, as_multipart
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import output

T = TypeVar("T")


class DyingTask(StoreWrapper):
    """A task attempt whose process dies while it uploads: every part upload fails, and
    so does the abort it tries on its way out. Its upload is left outstanding."""

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        if operation in ("upload_part", "abort_upload"):
            raise PermissionDenied("the task's process died", path=path, operation=operation)
        return await call()


async def uploads(store: Store, dest: str) -> set[str]:
    """The IDs of the outstanding uploads under ``dest``."""
    multipart = as_multipart(store)
    return {u.upload_id async for page in multipart.list_uploads(join(dest, "")) for u in page}


async def job_with_a_dead_attempt(store: Store, dest: str, committer: str) -> str:
    """A job: task 0 committed (``mine.csv``); task 1's attempt died mid-upload of
    ``dead.csv`` (the magic committer while writing, staging in its task commit)."""
    job_id = await setup_job(dest, store=store, options=CommitOptions(committer=committer))
    done = await setup_task(dest, job_id, 0, store=store)
    await done.write_bytes("mine.csv", b"mine", store=store)
    await commit_task(done, store=store)
    dead = await setup_task(dest, job_id, 1, store=store)
    dying: Awaitable[object]
    if committer == "magic":
        dying = dead.write_bytes("dead.csv", b"dead", store=DyingTask(store))
    else:
        await dead.write_bytes("dead.csv", b"dead", store=store)
        dying = commit_task(dead, store=DyingTask(store))
    with pytest.raises((PermissionDenied, CommitError)):  # a task stage wraps it
        await dying
    return job_id


@pytest.mark.parametrize("committer", ["staging", "magic"])
@pytest.mark.parametrize("ending", ["commit", "abort", "cleanup"])
async def test_a_job_ends_only_its_own_uploads(
    s3_root: tuple[MultipartStore, str], committer: str, ending: str
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    before = await uploads(store, dest)
    mine = await job_with_a_dead_attempt(store, dest, committer)
    own = await uploads(store, dest) - before
    assert len(own) == 2  # task 0's upload and the dead attempt's
    options = CommitOptions(committer=committer)
    neighbour = await setup_job(dest, store=store, options=options)
    attempt = await setup_task(dest, neighbour, 0, store=store)
    await attempt.write_bytes("theirs.csv", b"theirs", store=store)
    await commit_task(attempt, store=store)
    stray = await as_multipart(store).create_upload(join(dest, "stray.csv"))
    others = await uploads(store, dest) - own
    assert len(others) == 2  # the neighbour's and the stray one
    if ending == "commit":
        await commit_job(dest, mine, store=store)
        assert await output(store, dest) == {"mine.csv": b"mine"}
    elif ending == "abort":
        await abort_job(dest, mine, store=store)
    else:
        await cleanup_job(dest, mine, store=store)
    assert await uploads(store, dest) == others, "the job ended another's uploads, or left its own"
    summary = await commit_job(dest, neighbour, store=store)
    assert summary.success
    assert (await output(store, dest))["theirs.csv"] == b"theirs"
    assert await uploads(store, dest) == {stray}


async def test_the_sweep_of_old_uploads_keeps_younger_ones(
    s3_root: tuple[MultipartStore, str],
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    await job_with_a_dead_attempt(store, dest, "staging")
    await as_multipart(store).create_upload(join(root, "elsewhere", "f.csv"))
    # younger than the newest upload
    listed = await as_multipart(store).list_uploads(join(dest, "")).__anext__()
    newest = max(u.initiated for u in listed) / 1000
    assert await abort_old_uploads(dest, older_than=time.time() - newest + 3600, store=store) == []
    dry = await abort_old_uploads(dest, older_than=0, dry_run=True, store=store)
    assert len(dry) == 2 and len(await uploads(store, dest)) == 2
    swept = await abort_old_uploads(dest, older_than=0, store=store)
    assert sorted(u.path for u in swept) == [join(dest, "dead.csv"), join(dest, "mine.csv")]
    assert await uploads(store, dest) == set()
    assert len(await uploads(store, join(root, "elsewhere"))) == 1  # outside the destination
    with pytest.raises(InvalidInput):
        await abort_old_uploads(dest, older_than=-1, store=store)


async def test_the_sweep_refuses_a_store_without_uploads(tmp_path: Path) -> None:
    store = LocalStore()
    with pytest.raises(InvalidInput, match="no multipart uploads"):
        await abort_old_uploads(str(tmp_path), older_than=0, store=store)
