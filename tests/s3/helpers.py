"""Helpers for the zero-rename committer tests: tasks with local files or magic output."""

from __future__ import annotations

from pathlib import Path

from aiocommit.committers.s3a import (
    S3CommitterOptions,
    commit_magic_task,
    commit_staging_task,
    s3_task_attempt,
    setup_magic_task,
    write_magic_file,
)
from aiocommit.stores.base import Store, join
from aiocommit.stores.multipart import as_multipart
from tests.helpers import task_files


def write_local(root: Path, files: dict[str, bytes]) -> str:
    for relative, data in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return str(root)


async def staging_task(
    store: Store,
    dest: str,
    job_id: str,
    task: int,
    attempt: int,
    files: dict[str, bytes],
    tmp: Path,
    *,
    commit: bool = True,
    s3_options: S3CommitterOptions | None = None,
) -> None:
    local = write_local(tmp / f"local-{job_id}-{task}-{attempt}", files)
    named = s3_task_attempt(dest, job_id, task, attempt, local_dir=local, store=store)
    if commit:
        await commit_staging_task(named, store=store, s3_options=s3_options)


async def magic_task(
    store: Store,
    dest: str,
    job_id: str,
    task: int,
    attempt: int,
    files: dict[str, bytes],
    *,
    commit: bool = True,
) -> None:
    named = await setup_magic_task(dest, job_id, task, attempt, store=store)
    for relative, data in files.items():
        await write_magic_file(named, relative, data, store=store)
    if commit:
        await commit_magic_task(named, store=store)


async def run_s3_tasks(
    store: Store,
    dest: str,
    job_id: str,
    tasks: int,
    files_per_task: int,
    tmp: Path,
    *,
    committer: str = "staging",
) -> dict[str, bytes]:
    expected: dict[str, bytes] = {}
    for task in range(tasks):
        files = task_files(task, files_per_task)
        if committer == "magic":
            await magic_task(store, dest, job_id, task, 0, files)
        else:
            await staging_task(store, dest, job_id, task, 0, files, tmp)
        expected.update(files)
    return expected


async def outstanding(store: Store, root: str) -> list[str]:
    """Paths of outstanding multipart uploads under ``root``."""
    multipart = as_multipart(store)
    return [u.path async for page in multipart.list_uploads(join(root, "")) for u in page]
