"""What the S3A committers left under a destination: a job's pending data and the
outstanding multipart uploads (for ``aiocommit jobs``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiocommit.committers.common.context import stage
from aiocommit.committers.common.session import open_context
from aiocommit.committers.s3a.abort_uploads import abort_outstanding_uploads, recorded_uploads
from aiocommit.committers.s3a.job import readable_pending
from aiocommit.committers.s3a.load_pendingsets import list_pendingset_names
from aiocommit.errors import InvalidInput
from aiocommit.io.multipart import MultipartOperations
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.pending import PENDING_SUFFIX
from aiocommit.stores.base import Store
from aiocommit.stores.multipart import Upload, supports_multipart


@dataclass(frozen=True)
class S3JobFacts:
    """What the S3A committers left of one job (for ``aiocommit jobs``)."""

    pendingsets: int
    pending_files: int
    files: int
    size: int
    upload_ids: frozenset[str]


async def describe_s3_job(dest: str, job_id: str, *, store: Store, attempt: int = 0) -> S3JobFacts:
    """Count a job's pending sets and magic ``.pending`` files and the uploads they name
    (with those its attempts recorded as they started and no pending data names yet: a
    dead attempt's); unreadable files are skipped (and logged)."""
    async with open_context(dest, job_id, attempt=attempt, store=store) as context:
        pendingsets = await list_pendingset_names(context)
        commits = await readable_pending(context)
        named = {c.upload_id for c in commits}
        recorded = await recorded_uploads(context, settled=named)
    return S3JobFacts(
        pendingsets=len(pendingsets),
        pending_files=sum(1 for c in commits if str(c.filename or "").endswith(PENDING_SUFFIX)),
        files=len(commits),
        size=sum(c.length for c in commits),
        upload_ids=frozenset(named | {r.upload_id for r in recorded}),
    )


@dataclass(frozen=True)
class S3Uploads:
    """The outstanding uploads under a destination and which jobs' pending data names
    them (for ``aiocommit jobs``)."""

    outstanding: frozenset[str]
    by_job: dict[str, S3JobFacts]

    @property
    def stray(self) -> int:
        """Outstanding uploads no job's pending data names (a task died mid-upload)."""
        named: set[str] = set()
        for facts in self.by_job.values():
            named |= facts.upload_ids
        return len(self.outstanding - named)


async def s3_uploads(dest: str, store: Store, job_ids: Sequence[str]) -> S3Uploads:
    outstanding = frozenset(u.upload_id for u in await list_outstanding_uploads(dest, store=store))
    by_job = {job: await describe_s3_job(dest, job, store=store) for job in job_ids}
    return S3Uploads(outstanding, by_job)


async def list_outstanding_uploads(
    dest: str, *, store: Store | None = None, options: CommitOptions | None = None
) -> list[Upload]:
    """Outstanding multipart uploads under ``dest`` (of any job)."""
    async with open_context(dest, "job_list", store=store, options=options) as context:
        mops = MultipartOperations(context.ops)
        prefix = context.layout.dest.rstrip("/") + "/"
        return [u async for page in mops.list_uploads(prefix) for u in page]


async def abort_old_uploads(
    dest: str,
    *,
    older_than: float,
    dry_run: bool = False,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> list[Upload]:
    """Abort every outstanding multipart upload under ``dest`` that started at least
    ``older_than`` seconds ago, whatever job started it (an upload whose start the store
    does not report is kept): the destination-wide sweep a job's own abort and cleanup
    never do, for uploads no job will finish (a task or driver that died). Uploads of a
    live job younger than ``older_than`` are kept, so give an age longer than any job
    runs. ``dry_run``: abort none. Returns the uploads aborted (or that would be).

    Raises ``InvalidInput`` for a negative age, or a store without multipart uploads.
    """
    if older_than < 0:
        raise InvalidInput(f"older_than must be >= 0 seconds, not {older_than!r}")
    async with open_context(dest, "job_list", store=store, options=options) as context:
        if not supports_multipart(context.ops.store):
            where = context.qualify(context.layout.dest)
            raise InvalidInput(f"{where}: this store has no multipart uploads to abort")
        mops = MultipartOperations(context.ops)
        prefix = context.layout.dest.rstrip("/") + "/"
        async with stage(context, S.JOB_STAGE_CLEANUP):
            return await abort_outstanding_uploads(
                context, mops, prefix, older_than=older_than, dry_run=dry_run
            )
