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
    owned = store is None
    if store is None:
        store, path = open_store(dest)
        # a store that knows how says so; any other is opened from its URL again
        reopen = (
            opener_of(store) if hasattr(store, "opener") else functools.partial(reopen_url, dest)
        )
    else:
        path = dest if dest.startswith("/") else store.unqualify(dest)
        reopen = opener_of(store)
    try:
        options = options or CommitOptions()
        stats = new_statistics()
        yield StageContext(
            layout=JobLayout(path.rstrip("/") or "/", job_id, attempt),
            options=options,
            ops=StoreOperations(store, options, stats),
            stats=stats,
            job_id_source=job_id_source,
            task_attempt_id=task_attempt_id,
            progress=progress,
            reopen=reopen,
        )
    finally:
        if owned:
            with anyio.CancelScope(shield=True):
                await store.aclose()
