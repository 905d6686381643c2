"""The task side, on every store: ``setup_task``, ``commit_task``, ``abort_task``
(``setup_task``: a shortcut over a ``Client`` made for one call, ``Job.setup_task``).

A task attempt writes its output through ``TaskAttempt.write_bytes`` or
``TaskAttempt.open``, wherever its job's committer needs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from aiocommit.client.client import Client
from aiocommit.committers.common.committer import (
    Committer,
    TaskAttempt,
    WrittenFile,
    name_attempt,
    open_attempt,
)
from aiocommit.committers.factory import RecordedCommitter
from aiocommit.errors import InvalidInput
from aiocommit.options import CommitOptions
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import PendingSet
from aiocommit.stores.base import Store

__all__ = ["TaskAttempt", "abort_task", "commit_task", "setup_task", "task_attempt"]


def task_attempt(
    dest: str,
    dest_path: str,
    job_id: str,
    task: str | int,
    attempt: int | str = 0,
    *,
    job_attempt: int = 0,
    committer: Committer | None = None,
) -> TaskAttempt:
    """Name a task attempt. ``task`` is a task ID or a partition number (giving a Hadoop
    style ID); ``attempt`` an attempt number or a full attempt ID. ``committer``: the
    job's; by default the one the job recorded, read when the attempt is first used
    (``setup_task`` names the attempt with it)."""
    return name_attempt(
        dest,
        dest_path,
        job_id,
        task,
        attempt,
        job_attempt=job_attempt,
        committer=committer or RecordedCommitter(),
    )


async def setup_task(
    dest: str,
    job_id: str,
    task: str | int,
    attempt: int | str = 0,
    *,
    job_attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> TaskAttempt:
    """Set a task attempt up for its job's committer (the job must have been set up):
    its working directory (manifest), local directory (staging), or nothing (magic)."""
    async with Client(dest, store=store, options=options) as client:
        ready = await client.job(job_id, attempt=job_attempt).setup_task(task, attempt)
    return dataclasses.replace(ready, session=None)  # its client is closed


async def commit_task(
    attempt: TaskAttempt,
    *,
    store: Store | None = None,
    options: CommitOptions | None = None,
    per_attempt: bool = False,
    written: Sequence[WrittenFile] | None = None,
) -> TaskManifest | PendingSet:
    """Commit the attempt: save its record (the manifest committer: a manifest listing
    its files; the S3A committers: a pending set of its uploads), replacing an earlier
    attempt's: the last to commit wins. ``per_attempt``: under the attempt's own name
    (``committed_name``) instead, for a caller that picks the winning attempts itself
    and commits exactly those. ``written``: every file the attempt wrote below its
    ``work_dir`` (``WrittenFile``), when the caller knows them: the manifest
    committer then lists nothing. Without ``store``, an attempt set up by a ``Client``
    commits through that client; any other opens its store from ``attempt.dest``."""
    async with open_attempt(attempt, store, options) as context:
        return await attempt.committer.commit_task(
            context, attempt, per_attempt=per_attempt, written=written
        )


async def abort_task(
    attempt: TaskAttempt,
    *,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> None:
    """Discard the attempt's output and its unsaved record. Idempotent."""
    async with open_attempt(attempt, store, options) as context:
        await attempt.committer.abort_task(context, attempt)


def committed_name(attempt: TaskAttempt, *, per_attempt: bool = False) -> str:
    """The name of the record ``commit_task`` saves, as ``commit_job(task_records=...)``
    takes it."""
    if not isinstance(attempt, TaskAttempt):
        raise InvalidInput(f"not a task attempt: {attempt!r}")
    return attempt.committer.committed_name(attempt, per_attempt=per_attempt)
