"""Is an upload completed into its destination? A completed upload's object has the
etag its parts complete into (``multipart_etag``) and its length, so a lost response, a
re-run or an abort recognises it without the upload (which S3 forgets once completed)."""

from __future__ import annotations

from aiocommit.committers.common.context import StageContext
from aiocommit.protocol.pending import SinglePendingCommit
from aiocommit.stores.base import FileStatus
from aiocommit.stores.multipart import multipart_etag


async def holds(context: StageContext, path: str, commit: SinglePendingCommit) -> bool:
    """Does ``path`` hold what ``commit``'s upload completes into?"""
    status: FileStatus | None = await context.ops.stat_or_none(path)
    return (
        status is not None
        and not status.is_dir
        and status.etag == multipart_etag(commit.etags)
        and status.size == commit.length
    )
