"""Job stage: complete every upload: the job's output becomes visible.

pre:  pending sets loaded and conflicts resolved.
post: every destination holds its upload's object; an upload already completed (a lost
      response, a re-run) counts as done when its destination holds the etag the parts
      complete into.
fail: a store error naming the upload's destination; uploads not yet completed stay
      outstanding, so a re-run finishes the job or an abort reverts it.
"""

from __future__ import annotations

from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.s3a.completed import holds
from aiocommit.committers.s3a.load_pendingsets import LoadedPending
from aiocommit.errors import NotFound
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from aiocommit.protocol.pending import SinglePendingCommit


async def complete_uploads_stage(
    context: StageContext, mops: MultipartOperations, loaded: LoadedPending
) -> None:
    """Complete every loaded upload, in parallel under the job's limits."""
    async with stage(context, S3.JOB_STAGE_COMPLETE_UPLOADS):

        async def complete(commit: SinglePendingCommit) -> None:
            path = "/" + commit.destination_key
            if path not in loaded.completed:
                try:
                    await mops.complete_upload(path, commit.upload_id, commit.etags)
                except NotFound:
                    # S3 documents NoSuchUpload for a completed upload: a retry after a
                    # lost response, or a re-run after a crash, finds it done
                    if not await holds(context, path, commit):
                        raise
                    context.stats.increment(S3.COMMITTER_COMMITS_RECOVERED)
            context.stats.increment(S3.COMMITTER_COMMITS_COMPLETED)
            context.stats.increment(S.COMMITTER_FILES_COMMITTED)
            context.stats.increment(S.COMMITTER_BYTES_COMMITTED, commit.length)

        await parallel(loaded.commits, complete, workers=context.ops.workers)
