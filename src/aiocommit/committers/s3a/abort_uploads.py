"""Abort uploads: of a failed task attempt, an earlier attempt replaced, an aborted job
(only the uploads the job's own records name: pending sets, ``.pending`` files, the
records attempts save as their uploads start), and, asked for explicitly, outstanding
uploads under a destination older than an age limit (of any job).

pre:  none (idempotent: an upload already aborted or completed is skipped).
post: every named upload is aborted; with ``revert``, a destination an earlier commit
      already completed from one is deleted, so nothing of the job stays visible.
fail: a store error naming the upload; a re-run aborts what is left.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable

from aiocommit.committers.common.context import StageContext, parallel
from aiocommit.committers.s3a.completed import holds
from aiocommit.committers.s3a.walk import walk_files
from aiocommit.errors import ManifestError, NotFound
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from aiocommit.protocol.pending import (
    PENDINGSET_SUFFIX,
    UPLOAD_RECORD_SUFFIX,
    SinglePendingCommit,
    UploadRecord,
    attempt_uploads_dir,
    decode_pendingset,
    decode_upload_record,
    upload_digest,
    upload_record_name,
    uploads_dir,
)
from aiocommit.stores.multipart import Upload


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


async def recorded_uploads(
    context: StageContext,
    task_attempt_id: str | None = None,
    *,
    settled: Collection[str] = (),
) -> list[UploadRecord]:
    """The uploads the job's task attempts (or one attempt) recorded as they started,
    but those whose ID is in ``settled`` (their records are skipped unread); unreadable
    records are logged and skipped."""
    layout = context.layout
    if task_attempt_id is None:
        root = uploads_dir(layout)
    else:
        root = attempt_uploads_dir(layout, task_attempt_id)
    known = {upload_record_name(upload_id) for upload_id in settled}
    paths = [
        p
        for p in await walk_files(context, root, lambda p: False)
        if p.endswith(UPLOAD_RECORD_SUFFIX) and p.rsplit("/", 1)[-1] not in known
    ]
    records: list[UploadRecord] = []

    async def load(path: str) -> None:
        try:
            data = await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING)
            records.append(decode_upload_record(data, path=path))
        except (ManifestError, NotFound) as error:
            context.log.warning("skipping unreadable upload record %s: %s", path, error)

    await parallel(paths, load, workers=context.ops.workers)
    return records


async def abort_recorded_stage(
    context: StageContext,
    mops: MultipartOperations,
    records: Iterable[UploadRecord],
    *,
    settled: Collection[str] = (),
) -> int:
    """Abort every recorded upload whose ID is not in ``settled`` (already aborted or
    completed by the caller), and the uploads a retried create's unanswered sends
    started (``abort_lost_creates``); returns how many were outstanding."""
    records = list(records)
    todo = {r.upload_id: r for r in records if r.upload_id not in settled}
    aborted = 0

    async def abort(record: UploadRecord) -> None:
        nonlocal aborted
        if await mops.abort_upload(record.path, record.upload_id):
            aborted += 1

    await parallel(list(todo.values()), abort, workers=context.ops.workers)
    known = {r.upload_id for r in records} | set(settled)
    retried = [r for r in records if r.retried_create is not None]
    if retried:
        aborted += await abort_lost_creates(context, mops, retried, known)
    context.stats.increment(S3.COMMITTER_PENDING_UPLOADS_ABORTED, aborted)
    return aborted


#: how far the store's clock (an upload's start) may be from this client's (ms)
CLOCK_MARGIN_MS = 2000


async def abort_lost_creates(
    context: StageContext,
    mops: MultipartOperations,
    records: Iterable[UploadRecord],
    known: Collection[str],
) -> int:
    """For each record of a retried create: abort the outstanding uploads of exactly its
    key that started while its create was sent (within ``CLOCK_MARGIN_MS``) and that no
    record names: not this job's (``known``), nor any other job's (its upload records and
    pending sets under the shared ``_temporary``); one whose start the store does not
    report is kept. Returns how many were aborted.

    pre:  every upload this job started is in ``known`` or recorded by another record.
    post: an upload of such a key that another job's record names is untouched."""
    candidates: list[Upload] = []
    for record in records:
        assert record.retried_create is not None
        first, last = record.retried_create
        async for page in mops.list_uploads(record.path):
            candidates.extend(
                u
                for u in page
                if u.path == record.path
                and u.upload_id not in known
                and first - CLOCK_MARGIN_MS <= u.initiated <= last + CLOCK_MARGIN_MS
            )
    if not candidates:
        return 0
    theirs = await other_jobs_uploads(context)
    lost = [u for u in candidates if upload_digest(u.upload_id) not in theirs]
    aborted = 0

    async def abort(upload: Upload) -> None:
        nonlocal aborted
        if await mops.abort_upload(upload.path, upload.upload_id):
            aborted += 1
            context.log.info(
                "aborted upload %s of %s: its create's answer was lost",
                upload.upload_id,
                upload.path,
            )

    await parallel(lost, abort, workers=context.ops.workers)
    return aborted


async def other_jobs_uploads(context: StageContext) -> set[str]:
    """The digests (``upload_digest``) of every upload another job's upload records or
    pending sets name, under the destination's shared ``_temporary``."""
    layout = context.layout
    own = layout.job_dir
    paths = await walk_files(context, layout.temporary_dir, lambda p: p == own)
    digests = set()
    pendingsets = []
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        if name.endswith(UPLOAD_RECORD_SUFFIX):
            digests.add(name.split(".", 1)[0])
        elif name.endswith(PENDINGSET_SUFFIX):
            pendingsets.append(path)

    async def load(path: str) -> None:
        try:
            data = await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING)
            digests.update(upload_digest(c.upload_id) for c in decode_pendingset(data).commits)
        except (ManifestError, NotFound):  # being written, or its job ended: not named
            pass

    await parallel(pendingsets, load, workers=context.ops.workers)
    return digests


async def forget_recorded_uploads(context: StageContext, task_attempt_id: str) -> None:
    """Delete the attempt's upload records: its pending set names its uploads now, or
    they are aborted."""
    await context.ops.delete(attempt_uploads_dir(context.layout, task_attempt_id), recursive=True)


async def abort_outstanding_uploads(
    context: StageContext,
    mops: MultipartOperations,
    prefix: str,
    *,
    older_than: float,
    dry_run: bool = False,
) -> list[Upload]:
    """Abort every outstanding upload whose key starts with ``prefix`` and that started
    at least ``older_than`` seconds ago, of any job (an upload of unknown age is kept);
    ``dry_run``: abort none. Returns those aborted (or that would be)."""
    cutoff = (time.time() - older_than) * 1000
    uploads = [
        u
        async for page in mops.list_uploads(prefix)
        for u in page
        if u.initiated and u.initiated <= cutoff
    ]
    if dry_run:
        return uploads
    aborted: list[Upload] = []

    async def abort(upload: Upload) -> None:
        if await mops.abort_upload(upload.path, upload.upload_id):
            aborted.append(upload)

    await parallel(uploads, abort, workers=context.ops.workers)
    context.stats.increment(S3.COMMITTER_PENDING_UPLOADS_ABORTED, len(aborted))
    return sorted(aborted, key=lambda u: (u.path, u.upload_id))
