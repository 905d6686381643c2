"""``list_jobs``: every job with a directory under ``DEST/_temporary``, with the state
its durable record gives (see ``aiocommit.committers.common.job_state``) and what it holds;
shortcuts over a ``Client`` made for one call (``Client.list_jobs``, ``Job.info``)."""

from __future__ import annotations

from aiocommit.client.client import Client
from aiocommit.client.inventory import JobInfo, job_started
from aiocommit.options import CommitOptions
from aiocommit.stores.base import Store

__all__ = ["JobInfo", "job_info", "job_started", "list_jobs", "remove_empty_temporary"]


async def list_jobs(
    dest: str, *, store: Store | None = None, options: CommitOptions | None = None
) -> list[JobInfo]:
    """Every job under ``dest``'s ``_temporary``, oldest first (unknown ages last).

    Every store call goes through ``StoreOperations`` (limits, retries). Raises
    ``NotFound`` when ``dest`` is not a directory.
    """
    async with Client(dest, store=store, options=options) as client:
        return await client.list_jobs()


async def job_info(
    dest: str, job_id: str, *, store: Store | None = None, options: CommitOptions | None = None
) -> JobInfo:
    """One job's ``JobInfo``: from its directory; ``committed`` with nothing else known
    when only the destination's ``_SUCCESS`` names it (committed and cleaned up).

    Raises ``JobNotFound`` when no such job is at ``dest`` (never set up there)."""
    async with Client(dest, store=store, options=options) as client:
        return await client.job(job_id).info()


async def remove_empty_temporary(
    dest: str, *, store: Store | None = None, options: CommitOptions | None = None
) -> bool:
    """Remove ``DEST/_temporary`` if it holds nothing: what a cleanup killed after
    deleting the last job's directory leaves (on S3 a zero-byte ``_temporary/`` marker).
    Returns whether it was removed."""
    async with Client(dest, store=store, options=options) as client:
        return await client.remove_empty_temporary()
