"""Abort uploads: of a failed task attempt, an earlier attempt replaced, an aborted job,
and (cleanup) every outstanding upload under the destination.

pre:  none (idempotent: an upload already aborted or completed is skipped).
post: every named upload is aborted; with ``revert``, a destination an earlier commit
      already completed from one is deleted, so nothing of the job stays visible.
fail: a store error naming the upload; a re-run aborts what is left.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiocommit.committers.common.context import StageContext, parallel
from aiocommit.committers.s3a.completed import holds
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol.pending import SinglePendingCommit


async def abort_pending_stage(
    context: StageContext,
    mops: MultipartOperations,
    commits: Iterable[SinglePendingCommit],
    *,
    revert: bool,
) -> None:
    """Abort every named upload; with ``revert``, delete a destination an earlier commit
    already completed from one (recognised by its etag)."""

    async def abort(commit: SinglePendingCommit) -> None:
        path = "/" + commit.destination_key
        if await mops.abort_upload(path, commit.upload_id):
            context.stats.increment(S3.COMMITTER_COMMITS_ABORTED)
        elif revert and await holds(context, path, commit):
            await context.ops.delete(path)
            context.stats.increment(S3.COMMITTER_COMMITS_REVERTED)

    await parallel(list(commits), abort, workers=context.ops.workers)


async def abort_outstanding_uploads(
    context: StageContext, mops: MultipartOperations, prefix: str
) -> int:
    """Abort every outstanding upload whose key starts with ``prefix``; returns how many."""
    uploads = [u async for page in mops.list_uploads(prefix) for u in page]
    aborted = 0

    async def abort(path_and_id: tuple[str, str]) -> None:
        nonlocal aborted
        if await mops.abort_upload(*path_and_id):
            aborted += 1

    await parallel([(u.path, u.upload_id) for u in uploads], abort, workers=context.ops.workers)
    context.stats.increment(S3.COMMITTER_PENDING_UPLOADS_ABORTED, aborted)
    return aborted
