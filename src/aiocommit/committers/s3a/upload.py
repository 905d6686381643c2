"""Task stage: upload one file as a multipart upload of its final key, not completed.

pre:  the job is active; ``chunks`` are the file's parts, each but the last at least
      5 MiB (``MIN_PART_SIZE``).
post: the upload holds every byte; nothing is visible at the destination; the returned
      ``SinglePendingCommit`` names the upload, its part etags and length; the upload is
      recorded as the attempt's (``_temporary/JOB/NN/uploads/ATTEMPT/``) from the moment
      it started, so the job's abort and cleanup find it even if the task dies before
      its commit names it in a pending set; a create sent more than once (an answer
      lost) is recorded so, and the job's abort and cleanup abort the uploads of that key
      the unanswered sends started.
fail: the upload is aborted (best effort: the job's abort and cleanup abort what its
      record names).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from aiocommit.committers.common.context import StageContext
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol.pending import (
    SinglePendingCommit,
    UploadRecord,
    encode_upload_record,
    upload_record_path,
)

#: S3's smallest part but the last
MIN_PART_SIZE = 5 * 1024 * 1024


async def upload_pending(
    context: StageContext,
    mops: MultipartOperations,
    dest_path: str,
    chunks: AsyncIterator[bytes],
    *,
    task_id: str,
    task_attempt_id: str | None = None,
) -> SinglePendingCommit:
    """Upload ``chunks`` (each a part, all but the last at least 5 MiB) as an uncompleted
    multipart upload of ``dest_path``, recorded as ``task_attempt_id``'s (by default the
    context's attempt, else the task); abort it if anything fails."""
    created = await mops.create_upload_tracked(dest_path)
    upload_id = created.upload_id
    etags: list[str] = []
    length = 0
    try:
        attempt = recording_name(context, task_id, task_attempt_id)
        retried = (created.first_sent, created.last_sent) if created.attempts > 1 else None
        await record_upload(context, dest_path, upload_id, attempt, retried_create=retried)
        async for chunk in chunks:
            etags.append(await mops.upload_part(dest_path, upload_id, len(etags) + 1, chunk))
            length += len(chunk)
        if not etags:  # an empty file is one empty part
            etags.append(await mops.upload_part(dest_path, upload_id, 1, b""))
    except BaseException:
        await abort_quietly(context, mops, dest_path, upload_id)
        raise
    context.stats.increment(S3.COMMITTER_COMMITS_CREATED)
    context.stats.increment(S3.COMMITTER_BYTES_UPLOADED, length)
    bucket = getattr(context.ops.store, "bucket", "")
    commit = SinglePendingCommit(
        uri=context.qualify(dest_path),
        upload_id=upload_id,
        bucket=str(bucket) or context.qualify("/").split("/")[2],
        destination_key=dest_path[1:],
        job_id=context.layout.job_id,
        task_id=task_id,
        etags=etags,
        length=length,
    )
    commit.touch()
    return commit


def recording_name(context: StageContext, task_id: str, task_attempt_id: str | None) -> str:
    """The attempt an upload is recorded under (``uploads/NAME/``)."""
    return task_attempt_id or context.task_attempt_id or task_id


async def record_upload(
    context: StageContext,
    dest_path: str,
    upload_id: str,
    task_attempt_id: str,
    *,
    retried_create: tuple[int, int] | None = None,
) -> None:
    """Record the upload as the task attempt's: its key is a final key that other jobs
    may write too, so this is what makes it the job's own for the job's abort and
    cleanup (until the attempt's task commit names it in a pending set).
    ``retried_create``: the create was sent more than once, between these times (ms):
    the record says so, and the uploads an unanswered send started are found from it."""
    path = upload_record_path(
        context.layout, task_attempt_id, upload_id, retried_create=retried_create is not None
    )
    record = UploadRecord(dest_path, upload_id, retried_create)
    await context.ops.write_bytes(path, encode_upload_record(record))


async def abort_quietly(
    context: StageContext, mops: MultipartOperations, path: str, upload_id: str
) -> None:
    """Abort one upload, shielded from cancellation; a failure is logged, not raised."""
    with anyio.CancelScope(shield=True):
        try:
            if await mops.abort_upload(path, upload_id):
                context.stats.increment(S3.COMMITTER_COMMITS_ABORTED)
        except Exception as error:  # job abort / cleanup lists and aborts what is left
            context.log.warning("could not abort upload %s of %s: %s", upload_id, path, error)
