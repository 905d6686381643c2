"""The task side: ``setup_task``, ``commit_task``, ``abort_task``."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from aiocommit.engine.session import open_context
from aiocommit.errors import CommitError
from aiocommit.options import CommitOptions
from aiocommit.protocol.ids import attempt_ids
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.stages.context import StageContext
from aiocommit.stages.task import abort_task_stage, commit_task_stage, setup_task_stage
from aiocommit.stores.base import Store, join


@dataclass(frozen=True)
class TaskAttempt:
    """One attempt of one task: where it writes, and the IDs its manifest carries.

    ``dest`` is the destination's URL (so the attempt can be committed from another
    process); ``dest_path`` the same directory as a path of its store.
    """

    dest: str
    dest_path: str
    job_id: str
    task_id: str
    task_attempt_id: str
    job_attempt: int = 0

    @property
    def work_dir(self) -> str:
        """The attempt's working directory: a store path; write output below it with the
        layout it must have under the destination."""
        layout = JobLayout(self.dest_path, self.job_id, self.job_attempt)
        return layout.task_attempt_dir(self.task_attempt_id)

    def path(self, relative: str) -> str:
        """The store path for output that will land at ``DEST/relative``."""
        return join(self.work_dir, relative)


def task_attempt(
    dest: str,
    dest_path: str,
    job_id: str,
    task: str | int,
    attempt: int | str = 0,
    *,
    job_attempt: int = 0,
) -> TaskAttempt:
    """Name a task attempt. ``task`` is a task ID or a partition number (giving a Hadoop
    style ID); ``attempt`` an attempt number or a full attempt ID."""
    task_id, attempt_id = attempt_ids(job_id, task, attempt)
    return TaskAttempt(dest, dest_path, job_id, task_id, attempt_id, job_attempt)


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
    """Create the attempt's working directory; the job must have been set up."""
    async with open_context(
        dest, job_id, attempt=job_attempt, store=store, options=options
    ) as context:
        path = context.layout.dest
        named = task_attempt(
            context.qualify(path), path, job_id, task, attempt, job_attempt=job_attempt
        )
        if await context.ops.stat_or_none(context.layout.manifests_dir) is None:
            raise CommitError(
                "job is not set up (or was committed or aborted): no manifests directory",
                stage="task_stage_setup",
                path=context.layout.manifests_dir,
            )
        await setup_task_stage(context, named.work_dir)
        return named


async def commit_task(
    attempt: TaskAttempt,
    *,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> TaskManifest:
    """Scan the attempt's output in parallel and save its manifest as the task's
    committed manifest, replacing an earlier attempt's: the last to commit wins."""
    async with _attempt_context(attempt, store, options) as context:
        return await commit_task_stage(context, attempt.task_id, attempt.task_attempt_id)


async def abort_task(
    attempt: TaskAttempt,
    *,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> None:
    """Delete the attempt's working directory and temporary manifest. Idempotent."""
    async with _attempt_context(attempt, store, options) as context:
        await abort_task_stage(context, attempt.task_attempt_id)


def _attempt_context(
    attempt: TaskAttempt, store: Store | None, options: CommitOptions | None
) -> AbstractAsyncContextManager[StageContext]:
    return open_context(
        attempt.dest,
        attempt.job_id,
        attempt=attempt.job_attempt,
        store=store,
        options=options,
        task_attempt_id=attempt.task_attempt_id,
    )
