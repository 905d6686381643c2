"""Task stage: save the task attempt's pending set.

pre:  the job is active (its pending sets directory exists); every upload of the attempt
      is uploaded and not completed.
post: ``pendingsets/TASK.pendingset`` names exactly this attempt's uploads (or
      ``ATTEMPT.pendingset`` with ``per_attempt``); an earlier attempt's set is replaced
      and its uploads aborted: the last attempt to commit wins.
fail: no pending set of this attempt is saved (the caller aborts its uploads).
"""

from __future__ import annotations

from aiocommit.committers.common.context import StageContext, stage
from aiocommit.committers.s3a.abort_uploads import abort_pending_stage
from aiocommit.errors import AlreadyExists, CommitError, ManifestError
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from aiocommit.protocol.pending import (
    PendingSet,
    SinglePendingCommit,
    decode_pendingset,
    encode_pendingset,
    pendingset_path,
    pendingsets_dir,
)


async def check_job_active(context: StageContext, stage_name: str) -> None:
    """``CommitError`` unless the job's pending sets directory exists."""
    directory = pendingsets_dir(context.layout)
    if await context.ops.stat_or_none(directory) is None:
        raise CommitError(
            "job is not set up (or was committed or aborted): no pending sets directory",
            stage=stage_name,
            path=context.qualify(directory),
        )


async def save_pendingset_stage(
    context: StageContext,
    mops: MultipartOperations,
    task_id: str,
    task_attempt_id: str,
    commits: list[SinglePendingCommit],
    *,
    per_attempt: bool = False,
) -> PendingSet:
    """Save the task's pending set as ``TASK.pendingset`` (the last attempt to commit
    wins), or with ``per_attempt`` as ``ATTEMPT.pendingset``, for a caller that picks the
    winning attempts itself and commits exactly those (Spark)."""
    async with stage(context, S3.TASK_STAGE_SAVE_PENDINGSET):
        await check_job_active(context, S3.TASK_STAGE_SAVE_PENDINGSET)
        pending = PendingSet(
            job_id=context.layout.job_id,
            commits=commits,
            extra_data={"task.attempt.id": task_attempt_id},
            iostatistics=context.stats.snapshot(),
        )
        path = pendingset_path(context.layout, task_attempt_id if per_attempt else task_id)
        data = encode_pendingset(pending)
        try:
            await context.ops.write_bytes(path, data, overwrite=False)
        except AlreadyExists:
            try:
                earlier = decode_pendingset(
                    await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING_SET), path=path
                )
            except ManifestError:
                earlier = PendingSet()
            if [c.upload_id for c in earlier.commits] != [c.upload_id for c in commits]:
                # an earlier attempt of this task committed: the last attempt wins
                await abort_pending_stage(context, mops, earlier.commits, revert=False)
                await context.ops.write_bytes(path, data, overwrite=True)
        context.stats.increment(S.COMMITTER_TASKS_COMPLETED)
        return pending
