"""Save ``_SUCCESS``, the summary report and the diagnostics copy of the manifests.

``_SUCCESS``
    pre:  renames done (and validated, if asked).
    post: ``DEST/_SUCCESS`` is the job's summary, written to ``NN/_SUCCESS.tmp`` and
          renamed over any older one, so readers see the old or the new file, whole;
          on an object store (no directories: S3, GCS), whose every write replaces an
          object whole, written in place (a rename there would be a copy).
Setting an older ``_SUCCESS`` aside (``set_aside_success_stage``)
    pre:  every conflict is known; the destination is about to change (the job's first
          change to it).
    post: the destination has no ``_SUCCESS``; an older job's is at ``NN/_SUCCESS.old``
          (copied, then deleted: the first one set aside is kept on a re-run), so an
          abort puts it back (``restore_success``); cleanup of a committed job deletes it.
A job's commit finished by another job (``save_finished``)
    post: ``_temporary/JOB/_SUCCESS.finished`` holds the job's summary, so the job
          reads as committed (``read_success``) after a later job replaced ``_SUCCESS``,
          until the job's re-run, abort or cleanup removes its directory.
The report (``REPORT_DIR/summary-JOB.json``) is written last, also when the commit
failed; its failure is logged, never raised over the commit's own outcome.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable

from aiocommit.committers.common.context import StageContext, stage
from aiocommit.errors import AiocommitError, NotFound
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.success import SuccessData, decode_success, encode_success
from aiocommit.stores.base import join
from aiocommit.stores.registry import open_store


async def read_success(context: StageContext) -> SuccessData | None:
    """This job's ``_SUCCESS`` if the destination holds it, or the one saved when
    another job finished this job's commit (``save_finished``), else None."""
    return await _own_success(context, context.layout.success_path) or await read_finished(context)


async def read_finished(context: StageContext) -> SuccessData | None:
    """The summary saved when another job finished this job's commit (``save_finished``),
    else None."""
    return await _own_success(context, context.layout.finished_path, S.OP_LOAD_FINISHED)


async def _own_success(
    context: StageContext, path: str, statistic: str = S.OP_LOAD_SUCCESS
) -> SuccessData | None:
    try:
        data = await context.ops.read_bytes(path, statistic=statistic)
    except NotFound:
        return None
    try:
        success = decode_success(data, path=path)
    except AiocommitError:
        return None
    if success.job_id != context.layout.job_id or not success.success:
        return None
    return success


async def save_finished(context: StageContext, summary: SuccessData) -> None:
    """Record that the job committed, with its summary, in the job's directory: what a
    job that finished this job's commit (taking over its lease) saves, as a later job's
    ``_SUCCESS`` replaces this one's. Idempotent."""
    await context.ops.write_bytes(context.layout.finished_path, encode_success(summary))


async def set_aside_success_stage(context: StageContext) -> None:
    """Move an older job's ``_SUCCESS`` out of the destination into the job attempt's
    directory (see the module docstring). Idempotent."""
    layout = context.layout
    ops = context.ops
    if await ops.stat_or_none(layout.success_path) is None:
        return  # none, or set aside by an earlier run
    try:
        data = await ops.read_bytes(layout.success_path, statistic=S.OP_LOAD_SUCCESS)
    except NotFound:
        return
    if await ops.stat_or_none(layout.old_success_path) is None:
        await ops.write_bytes(layout.old_success_path, data)
    await ops.delete(layout.success_path)


async def restore_success(context: StageContext) -> bool:
    """Abort of a commit that did not reach its commit point: put the ``_SUCCESS`` it set
    aside back, unless the destination holds one again; True when it did. Idempotent."""
    layout = context.layout
    ops = context.ops
    try:
        data = await ops.read_bytes(layout.old_success_path, statistic=S.OP_LOAD_SUCCESS)
    except NotFound:
        return False
    if await ops.stat_or_none(layout.success_path) is not None:
        return False
    if ops.capabilities.directories:
        await ops.publish_bytes(layout.success_temp_path, layout.success_path, data)
    else:
        await ops.write_bytes(layout.success_path, data)
    context.log.info("put back the _SUCCESS this job's commit had set aside")
    return True


async def restore_success_of_attempts(context: StageContext, attempts: list[int]) -> None:
    """``restore_success`` for each of the job's ``attempts`` (the first one set aside)."""
    layout = context.layout
    for attempt in attempts:
        attempt_layout = JobLayout(layout.dest, layout.job_id, attempt)
        if await restore_success(dataclasses.replace(context, layout=attempt_layout)):
            return


async def save_success_stage(context: StageContext, summary: SuccessData) -> None:
    layout = context.layout
    # the job commit's time so far: the file is written before cleanup, while the
    # commit's own duration statistic is still open
    summary.iostatistics.gauges[S.JOB_COMMIT_ELAPSED_MS] = int(
        (time.monotonic() - context.started) * 1000
    )
    data = encode_success(summary)
    async with stage(context, S.JOB_STAGE_SAVE_SUCCESS):
        if context.ops.capabilities.directories:
            await context.ops.publish_bytes(layout.success_temp_path, layout.success_path, data)
        else:
            await context.ops.write_bytes(layout.success_path, data)


async def save_report(context: StageContext, summary: SuccessData) -> None:
    """Write ``summary-JOB.json`` into the report directory (any store URL)."""
    report_dir = context.options.report_dir
    if not report_dir:
        return
    try:
        store, path = open_store(report_dir)
    except Exception as error:  # a report must never mask the commit's outcome
        context.log.warning("could not open the report directory %s: %s", report_dir, error)
        return
    try:
        await store.write_bytes(
            join(path, f"summary-{context.layout.job_id}.json"), encode_success(summary)
        )
    except Exception as error:  # a report must never mask the commit's outcome
        context.log.warning("could not write the summary report to %s: %s", report_dir, error)
    finally:
        await store.aclose()


async def copy_manifests_for_diagnostics(
    context: StageContext,
    names: list[str],
    *,
    read: Callable[[str], Awaitable[bytes]] | None = None,
) -> None:
    """Copy the loaded manifests to ``DIAGNOSTICS_DIR/JOB/`` (copied, not renamed, so a
    re-run of an interrupted commit still finds them), each read by ``read(name)``
    (by default from the job's ``manifests/``)."""
    target = context.options.diagnostics_dir
    if not target:
        return
    store, path = open_store(target)
    try:
        for name in names:
            data = await (
                read(name)
                if read is not None
                else context.ops.read_bytes(
                    join(context.layout.manifests_dir, name), statistic=S.OP_LOAD_MANIFEST
                )
            )
            await store.write_bytes(join(path, context.layout.job_id, name), data)
    finally:
        await store.aclose()
