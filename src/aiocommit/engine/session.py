"""Opening a destination: the store, the layout, statistics and the stage context."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from aiocommit.io.operations import StoreOperations
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.layout import JobLayout
from aiocommit.stages.context import ProgressCallback, StageContext
from aiocommit.stores.base import Store, opener_of
from aiocommit.stores.registry import open_store, reopen_url


def new_statistics() -> IOStatistics:
    return IOStatistics(
        durations=S.STORE_OPERATIONS + S.JOB_STAGES + S.TASK_STAGES, counters=S.COUNTERS
    )


@asynccontextmanager
async def open_operations(
    dest: str, *, store: Store | None = None, options: CommitOptions | None = None
) -> AsyncIterator[tuple[StoreOperations, str]]:
    """Store operations for ``dest`` and its path in the store; a store opened here is
    closed on exit."""
    owned = store is None
    if store is None:
        store, path = open_store(dest)
    else:
        path = dest if dest.startswith("/") else store.unqualify(dest)
    try:
        options = options or CommitOptions()
        yield StoreOperations(store, options, new_statistics()), path.rstrip("/") or "/"
    finally:
        if owned:
            with anyio.CancelScope(shield=True):
                await store.aclose()


@asynccontextmanager
async def open_context(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    task_attempt_id: str | None = None,
    progress: ProgressCallback | None = None,
    job_id_source: str = "JobID",
) -> AsyncIterator[StageContext]:
    """A stage context for ``dest`` (a URL, or a path of ``store`` when one is given).
    A store opened here is closed on exit; a store passed in is the caller's to close."""
    async with open_operations(dest, store=store, options=options) as (ops, path):
        # a store that knows how says so; one opened here from a URL is opened from it again
        opened = ops.store
        reopen = (
            opener_of(opened)
            if store is not None or hasattr(opened, "opener")
            else functools.partial(reopen_url, dest)
        )
        yield StageContext(
            layout=JobLayout(path, job_id, attempt),
            options=ops.options,
            ops=ops,
            stats=ops.stats,
            job_id_source=job_id_source,
            task_attempt_id=task_attempt_id,
            progress=progress,
            reopen=reopen,
        )
