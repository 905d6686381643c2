"""A job is only what was set up: a job ID that was never set up at a destination is
refused by every job-side call, on every store and committer, before anything changes;
a live neighbour job on the same destination keeps its state and uploads."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiocommit import (
    CommitOptions,
    abort_job,
    cleanup_job,
    commit_job,
    commit_task,
    job_info,
    setup_job,
    setup_task,
)
from aiocommit.errors import JobNotFound, NotFound
from aiocommit.stores.base import Store, join
from aiocommit.stores.multipart import as_multipart, supports_multipart
from tests.helpers import exists, output, walk

#: a well-formed job ID that no test sets up
UNKNOWN = "job_20260101000000abcdefabcdef_0008"


def committers(store: Store) -> list[str]:
    return ["manifest", "staging", "magic"] if supports_multipart(store) else ["manifest"]


async def uploads(store: Store, root: str) -> set[tuple[str, str]]:
    """(path, upload ID) of every outstanding upload under ``root``; none without
    multipart uploads."""
    if not supports_multipart(store):
        return set()
    multipart = as_multipart(store)
    return {
        (u.path, u.upload_id) async for page in multipart.list_uploads(join(root, "")) for u in page
    }


async def snapshot(store: Store, root: str) -> tuple[dict[str, bytes], set[tuple[str, str]]]:
    return await walk(store, root), await uploads(store, root)


async def one_task_job(store: Store, dest: str, committer: str, files: dict[str, bytes]) -> str:
    options = CommitOptions(committer=committer)
    job_id = await setup_job(dest, store=store, options=options)
    attempt = await setup_task(dest, job_id, 0, store=store)
    for relative, data in files.items():
        await attempt.write_bytes(relative, data, store=store)
    await commit_task(attempt, store=store)
    return job_id


JobCall = Callable[[str, str, Store], Awaitable[Any]]

CALLS: dict[str, JobCall] = {
    "commit_job": lambda dest, job, store: commit_job(dest, job, store=store),
    "abort_job": lambda dest, job, store: abort_job(dest, job, store=store),
    "cleanup_job": lambda dest, job, store: cleanup_job(dest, job, store=store),
    "job_info": lambda dest, job, store: job_info(dest, job, store=store),
}


async def test_an_unknown_job_is_refused_and_changes_nothing(
    any_store_root: tuple[Store, str],
) -> None:
    """A committed job's ``_SUCCESS`` and a live neighbour (its manifests, pending sets,
    uploads) stay exactly as they were; the neighbour then commits."""
    store, root = any_store_root
    for committer in committers(store):
        dest = join(root, f"out-{committer}")
        await commit_job(
            dest, await one_task_job(store, dest, committer, {"old.csv": b"old"}), store=store
        )
        live = await one_task_job(store, dest, committer, {"new.csv": b"new"})
        before = await snapshot(store, dest)
        for name, call in CALLS.items():
            with pytest.raises(JobNotFound) as refused:
                await call(dest, UNKNOWN, store)
            message = str(refused.value)
            assert UNKNOWN in message and store.qualify(dest) in message, (committer, name)
            assert "\n" not in message and "aiocommit jobs" in message
            # the one way a job that did commit gets here is named too
            assert "committed and cleaned up before another job's _SUCCESS" in message
            assert isinstance(refused.value, NotFound)
            assert await snapshot(store, dest) == before, (committer, name)
        summary = await commit_job(dest, live, store=store)
        assert summary.success and summary.job_id == live
        assert await output(store, dest) == {"old.csv": b"old", "new.csv": b"new"}
        assert await uploads(store, dest) == set()


async def test_a_destination_that_never_existed_has_no_jobs(
    any_store_root: tuple[Store, str],
) -> None:
    store, root = any_store_root
    dest = join(root, "never")
    for call in CALLS.values():
        with pytest.raises(JobNotFound):
            await call(dest, UNKNOWN, store)
    assert not await exists(store, dest)


async def test_a_committed_and_cleaned_job_is_still_recognised(
    store_root: tuple[Store, str],
) -> None:
    """The job ``_SUCCESS`` names: a second commit returns it, abort and cleanup have
    nothing to do; nothing changes."""
    store, root = store_root
    for committer in committers(store):
        dest = join(root, f"out-{committer}")
        job_id = await one_task_job(store, dest, committer, {"a.csv": b"a"})
        first = await commit_job(dest, job_id, store=store)
        before = await snapshot(store, dest)
        again = await commit_job(dest, job_id, store=store)
        assert again.job_id == first.job_id and again.success
        assert await abort_job(dest, job_id, store=store) == []
        await cleanup_job(dest, job_id, store=store)
        info = await job_info(dest, job_id, store=store)
        assert info.state == "committed"
        assert await snapshot(store, dest) == before, committer


async def test_a_committed_job_whose_success_a_later_job_replaced_is_not_rerun(
    store_root: tuple[Store, str],
) -> None:
    """Once a later job's ``_SUCCESS`` replaced its own, a committed and cleaned-up job
    is unknown: its commit is refused (never run a second time) and nothing changes."""
    store, root = store_root
    dest = join(root, "out")
    first = await one_task_job(store, dest, "manifest", {"a.csv": b"a"})
    await commit_job(dest, first, store=store)
    second = await one_task_job(store, dest, "manifest", {"b.csv": b"b"})
    await commit_job(dest, second, store=store, options=CommitOptions(conflict_mode="append"))
    before = await snapshot(store, dest)
    with pytest.raises(JobNotFound, match="committed and cleaned up before another job"):
        await commit_job(dest, first, store=store, options=CommitOptions(conflict_mode="append"))
    assert await snapshot(store, dest) == before
    assert await output(store, dest) == {"a.csv": b"a", "b.csv": b"b"}


async def test_a_job_with_its_committer_record_is_found_by_that_read_alone(
    store_root: tuple[Store, str],
) -> None:
    """The commit of a job this library set up finds the job and its committer in one
    stage reading one object (the committer record), no listing of ``_temporary/JOB``
    before it: one store call of latency ahead of the job's work."""
    store, root = store_root
    dest = join(root, "out")
    job_id = await one_task_job(store, dest, "manifest", {"a.csv": b"a"})
    summary = await commit_job(dest, job_id, store=store)
    counters = summary.iostatistics.counters
    assert counters["job_stage_find_committer"] == 1
    assert counters["op_load_committer_record"] == 1
    assert await output(store, dest) == {"a.csv": b"a"}
