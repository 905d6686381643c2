"""Issue 23 on S3 with the zero-rename committers: each state file (``.pending``, pending
set, commit plan, ``_SUCCESS``) is one PUT, whole or absent; its write failing for good
leaves a job that a re-run finishes, or an abort undoes, with nothing half-written."""

from __future__ import annotations

import pytest

from aiocommit import (
    CommitError,
    CommitOptions,
    abort_job,
    commit_job,
    commit_task,
    setup_job,
    setup_task,
)
from aiocommit.errors import AiocommitError
from aiocommit.stores.base import Store
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.s3 import S3Store
from tests.helpers import walk
from tests.s3.helpers import outstanding

FAST = CommitOptions(max_attempts=3, retry_base_delay=0.001, retry_max_delay=0.01)
FILES = {f"part={n % 2}/f-{n}.dat": f"data {n}".encode() for n in range(4)}


async def destination(store: Store, dest: str) -> tuple[dict[str, bytes], bool, list[str]]:
    """What ``dest`` holds: every file but ``_SUCCESS`` (path -> bytes), whether
    ``_SUCCESS`` is there, and the outstanding multipart uploads."""
    found = await walk(store, dest)
    success = found.pop("_SUCCESS", None) is not None
    return found, success, await outstanding(store, dest)


@pytest.mark.parametrize(
    ("what", "finish"),
    [
        (".pending", "re-run"),
        (".pending", "abort"),
        (".pendingset", "re-run"),
        (".pendingset", "abort"),
        ("commit-plan.json", "re-run"),
        ("commit-plan.json", "abort"),
        ("_SUCCESS", "re-run"),
    ],
)
async def test_state_file_write_failing_on_s3(
    s3_root: tuple[S3Store, str], what: str, finish: str
) -> None:
    store, root = s3_root
    dest = f"{root}/out"
    faulty = FaultyStore(
        store, Faults(fail_paths=lambda op, path: op == "write_bytes" and what in path)
    )
    job_id = await setup_job(dest, store=store, options=CommitOptions(committer="magic"))
    failed = False
    for attempt in range(2):
        used = store if failed else faulty
        try:
            named = await setup_task(dest, job_id, 0, attempt, store=used)
            for relative, data in FILES.items():
                await named.write_bytes(relative, data, store=used, options=FAST)
            await commit_task(named, store=used, options=FAST)
            break
        except AiocommitError:
            failed = True
    if finish == "abort" and what in (".pending", ".pendingset"):
        assert failed
        await abort_job(dest, job_id, store=store)
        assert await destination(store, dest) == ({}, False, [])
        return
    try:
        await commit_job(dest, job_id, store=faulty, options=FAST)
    except CommitError:
        failed = True
    assert failed, f"no write of {what} went through the fault"
    if finish == "abort" and what == "commit-plan.json":
        await abort_job(dest, job_id, store=store)
        assert await destination(store, dest) == ({}, False, [])
        return
    await commit_job(dest, job_id, store=store)
    assert await destination(store, dest) == (FILES, True, [])
