"""What the S3A committers left under a destination: a job's pending data and the
outstanding multipart uploads (for ``aiocommit jobs``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiocommit.committers.common.session import open_context
from aiocommit.committers.s3a.job import readable_pending
from aiocommit.committers.s3a.load_pendingsets import list_pendingset_names
from aiocommit.io.multipart import MultipartOperations
from aiocommit.options import CommitOptions
from aiocommit.protocol.pending import PENDING_SUFFIX
from aiocommit.stores.base import Store
from aiocommit.stores.multipart import Upload


@dataclass(frozen=True)
class S3JobFacts:
    """What the zero-rename committers left of one job (for ``aiocommit jobs``)."""

    pendingsets: int
    pending_files: int
    files: int
    size: int
    upload_ids: frozenset[str]


async def describe_s3_job(dest: str, job_id: str, *, store: Store, attempt: int = 0) -> S3JobFacts:
    """Count a job's pending sets and magic ``.pending`` files and the uploads they name;
    unreadable files are skipped (and logged)."""
    async with open_context(dest, job_id, attempt=attempt, store=store) as context:
        pendingsets = await list_pendingset_names(context)
        commits = await readable_pending(context)
    return S3JobFacts(
        pendingsets=len(pendingsets),
        pending_files=sum(1 for c in commits if str(c.filename or "").endswith(PENDING_SUFFIX)),
        files=len(commits),
        size=sum(c.length for c in commits),
        upload_ids=frozenset(c.upload_id for c in commits),
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
