"""Helpers for the S3A committer tests: task attempts through the one API, whatever
committer their job recorded (staging: local files; magic: uploads while writing)."""

from __future__ import annotations

from pathlib import Path

from aiocommit import CommitOptions, commit_task, setup_task
from aiocommit.stores.base import Store, join
from aiocommit.stores.multipart import as_multipart
from tests.helpers import task_files

#: the options that set a job up with the staging committer (the default on S3, not on
#: the memory store, which renames atomically) and the magic committer
STAGING = CommitOptions(committer="staging")
MAGIC = CommitOptions(committer="magic")


def write_local(root: Path, files: dict[str, bytes]) -> str:
    for relative, data in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return str(root)


async def s3_task(
    store: Store,
    dest: str,
    job_id: str,
    task: int,
    attempt: int,
    files: dict[str, bytes],
    *,
    commit: bool = True,
    options: CommitOptions | None = None,
) -> None:
    """One task attempt of the job's committer: set up, write ``files``, commit."""
    named = await setup_task(dest, job_id, task, attempt, store=store, options=options)
    for relative, data in files.items():
        await named.write_bytes(relative, data, store=store, options=options)
    if commit:
        await commit_task(named, store=store, options=options)


async def run_s3_tasks(
    store: Store, dest: str, job_id: str, tasks: int, files_per_task: int
) -> dict[str, bytes]:
    """``tasks`` committed task attempts of the job's committer; their files."""
    expected: dict[str, bytes] = {}
    for task in range(tasks):
        files = task_files(task, files_per_task)
        await s3_task(store, dest, job_id, task, 0, files)
        expected.update(files)
    return expected


async def outstanding(store: Store, root: str) -> list[str]:
    """Paths of outstanding multipart uploads under ``root``."""
    multipart = as_multipart(store)
    return [u.path async for page in multipart.list_uploads(join(root, "")) for u in page]
