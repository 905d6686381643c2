"""The job commit's frame, the same for every committer::

    recognise an earlier success (then only clean up)
    -> load the committed tasks' records and fix them in the commit plan
    -> take the destination's lease (``lease``: one job at a time from here; a job
       that took over this job's dead lease may have finished its commit: then only
       clean up)
    -> resolve conflicts with existing output (nothing changes; a refusal is recorded)
    -> set an older job's _SUCCESS aside (the destination changes from here on)
    -> publish the output (clear the way, rename or complete uploads) up to the
       commit point
    -> save _SUCCESS -> release the lease -> cleanup
    -> (summary report, always; the failure recorded in it)

A committer supplies the steps (``JobCommitSteps``); the frame owns the summary, the
statistics and the report.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

import anyio
import anyio.to_thread

from aiocommit.committers.common.context import StageContext, run_to_end, stage
from aiocommit.committers.common.lease import (
    HeldLease,
    destination_lease,
    release_stale_lease,
)
from aiocommit.committers.common.save_success import (
    read_finished,
    read_success,
    save_report,
    save_success_stage,
    set_aside_success_stage,
)
from aiocommit.committers.common.summary import (
    combined_statistics,
    committer_diagnostics,
    record_failure,
)
from aiocommit.errors import ManifestError, OutputConflict, first_error
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.success import SuccessData
from aiocommit.runtime.blocking import shared_thread_limiter


class JobCommitSteps(Protocol):
    """One committer's steps of one job commit, in the order the frame runs them."""

    @property
    def task_stats(self) -> IOStatistics:
        """The tasks' statistics (from their manifests or pending sets), once loaded."""
        ...

    def running(self, context: StageContext) -> AbstractAsyncContextManager[object]:
        """Resources held for the whole commit (worker processes ...)."""
        ...

    @property
    def committing(self) -> bool:
        """After ``load``: the commit has not reached its commit point (the destination
        is about to change, or changed part-way in an earlier run)."""
        ...

    async def load(self, context: StageContext, summary: SuccessData) -> None:
        """Load the committed tasks' records and fix them in the commit plan; nothing
        in the destination changes (the summary may be given the committer's name)."""
        ...

    async def resolve_conflicts(self, context: StageContext) -> None:
        """Check the conflict mode against output already in the destination and record
        the decision; nothing in the destination changes (``OutputConflict`` after the
        plan records the refusal)."""
        ...

    async def publish(self, context: StageContext, summary: SuccessData) -> None:
        """Put the output in place (first clearing the way: a replace's old files that
        the job's files land on) and record the commit point in the plan; sets the
        summary's file names."""
        ...

    async def cleanup(self, context: StageContext) -> None:
        """Remove the job's temporary data (also after an earlier success)."""
        ...

    async def after_failure(self, context: StageContext, error: BaseException) -> None:
        """Best-effort tidying after a failed step (shielded from cancellation)."""
        ...

    def close(self) -> None:
        """Release what ``load`` holds; called once, whatever happened (in a worker
        thread)."""
        ...


async def run_job_commit(context: StageContext, steps: JobCommitSteps) -> SuccessData:
    """Commit the job with ``steps``; returns the summary written to ``_SUCCESS`` (or
    found there, when the job had committed). The summary report is saved either way."""
    layout = context.layout
    options = context.options
    summary = SuccessData.now(layout.job_id, context.job_id_source)
    summary.diagnostics.update(committer_diagnostics(options))
    existing: SuccessData | None = None
    tidied = False
    try:
        async with stage(context, S.COMMITTER_COMMIT_JOB), steps.running(context):
            existing = await read_success(context)
            if existing is not None:
                context.log.info("job %s already committed; nothing to do", layout.job_id)
                summary = existing
                await release_stale_lease(context)
                if not options.cleanup_skip:
                    await steps.cleanup(context)
                return existing
            await steps.load(context, summary)
            # one job at a time changes the destination: concurrent commits land as if
            # one after another (loading and checking above run in parallel)
            async with destination_lease(context) as lease:
                # a job that took this job's lease over (this run waited, or an earlier
                # one died) may have finished its commit (``recover_unfinished_commit``)
                existing = await read_finished(context)
                if existing is None:
                    try:
                        await _publish(context, steps, summary, lease)
                    except BaseException as raw:
                        tidied = True  # while no other job changes the destination
                        await _after_failure(context, steps, raw)
                        raise
            if existing is not None:
                context.log.info("job %s's commit was finished by another job", layout.job_id)
                summary = existing
            if not options.cleanup_skip:
                await steps.cleanup(context)
        return summary
    except BaseException as raw:
        if not tidied:
            await _after_failure(context, steps, raw)
        record_failure(summary, first_error(raw))
        raise
    finally:
        if summary is not existing:
            summary.iostatistics = combined_statistics(context, steps.task_stats)

        async def tidy() -> None:
            # in a worker thread: closing a large spill file frees its pages (6 ms of
            # CPU for 100,000 files' entries), which the caller's loop need not wait on
            await anyio.to_thread.run_sync(steps.close, limiter=shared_thread_limiter())
            await save_report(context, summary)

        await run_to_end(tidy)


async def _publish(
    context: StageContext, steps: JobCommitSteps, summary: SuccessData, lease: HeldLease | None
) -> None:
    """Resolve conflicts, then change the destination: ``_SUCCESS`` aside, the output in
    place, the job's ``_SUCCESS`` (the lease held)."""
    try:
        # every conflict known; nothing changed
        await steps.resolve_conflicts(context)
    except (OutputConflict, ManifestError):
        if lease is not None:
            lease.refused()  # refused before anything changed
        raise
    if steps.committing:
        # the destination changes from here on: an older job's _SUCCESS goes aside (an
        # abort puts it back)
        await set_aside_success_stage(context)
    await steps.publish(context, summary)
    summary.iostatistics = combined_statistics(context, steps.task_stats)
    if context.options.write_success:
        await save_success_stage(context, summary)


async def _after_failure(context: StageContext, steps: JobCommitSteps, raw: BaseException) -> None:
    error = first_error(raw)
    if isinstance(error, Exception):
        await run_to_end(lambda: steps.after_failure(context, error))
