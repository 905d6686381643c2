"""Opening a destination: the store, the layout, statistics and the stage context."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from aiocommit.committers.common.context import ProgressCallback, StageContext
from aiocommit.errors import InvalidInput, first_error
from aiocommit.io.limits import Limits
from aiocommit.io.operations import StoreOperations
from aiocommit.observability import job_done, watch_in_flight
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.base import Store, StoreOpener, opener_of
from aiocommit.stores.registry import open_store, reopen_url


def new_statistics() -> IOStatistics:
    return IOStatistics(
        durations=S.STORE_OPERATIONS + S.JOB_STAGES + S.TASK_STAGES, counters=S.COUNTERS
    )


@asynccontextmanager
async def open_operations(
    dest: str,
    *,
    store: Store | None = None,
    options: CommitOptions | None = None,
    limits: Limits | None = None,
) -> AsyncIterator[tuple[StoreOperations, str]]:
    """Store operations for ``dest`` and its path in the store; a store opened here is
    closed on exit. ``limits``: a client's, shared with its other jobs (by default the
    operations' own, from ``options``). ``InvalidInput`` for a ``dest`` or ``options`` of
    the wrong kind."""
    if not isinstance(dest, str):
        raise InvalidInput(f"dest must be a URL or store path (a str), not {dest!r}")
    if options is not None and not isinstance(options, CommitOptions):
        raise InvalidInput(
            f"options must be a CommitOptions (CommitOptions.from_mapping builds one from a "
            f"mapping), not {type(options).__name__}"
        )
    options = options or CommitOptions()
    owned = store is None
    if store is None:
        store, path = open_store(dest, options.store.as_s3a() or None)
    else:
        path = dest if dest.startswith("/") else store.unqualify(dest)
    try:
        ops = StoreOperations(store, options, new_statistics(), limits=limits)
        watch_in_flight(ops.limiter)
        yield ops, path.rstrip("/") or "/"
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
    limits: Limits | None = None,
    reopen: StoreOpener | None = None,
) -> AsyncIterator[StageContext]:
    """A stage context for ``dest`` (a URL, or a path of ``store`` when one is given).
    A store opened here is closed on exit; a store passed in is the caller's to close.
    ``limits``: shared with the caller's other jobs (``open_operations``); ``reopen``:
    how another process opens the store (by default the store says, or ``dest``).

    A job commit, abort or cleanup run in the context (its outer stage ran) is reported
    on exit: one log line with its figures, and the metrics (``observability.job_done``).
    """
    async with open_operations(dest, store=store, options=options, limits=limits) as (
        ops,
        path,
    ):
        # a store that knows how says so; one opened here from a URL is opened from it again
        opened = ops.store
        if reopen is None:
            reopen = (
                opener_of(opened)
                if store is not None or hasattr(opened, "opener")
                else functools.partial(reopen_url, dest)
            )
        context = StageContext(
            layout=JobLayout(path, job_id, attempt),
            options=ops.options,
            ops=ops,
            stats=ops.stats,
            job_id_source=job_id_source,
            task_attempt_id=task_attempt_id,
            progress=progress,
            reopen=reopen,
        )
        try:
            yield context
        except BaseException as error:
            _report(context, first_error(error))
            raise
        _report(context, None)


#: the outer stage of each job operation reported, first match wins (a commit cleans up)
_REPORTED = (
    ("commit", S.COMMITTER_COMMIT_JOB),
    ("abort", S.JOB_STAGE_ABORT),
    ("cleanup", S.JOB_STAGE_CLEANUP),
)


def _report(context: StageContext, error: BaseException | None) -> None:
    if context.task_attempt_id is not None:
        return  # a task's context: its job reports
    counters = context.stats.counters
    renaming = context.latest.get(S.JOB_STAGE_RENAME_FILES)
    if error is not None and renaming is not None and not counters.get(S.COMMITTER_FILES_COMMITTED):
        # a rename stage cut short counts at its end, which it never reached: its latest
        # report says how far it got
        counters = {
            **counters,
            S.COMMITTER_FILES_COMMITTED: renaming.done,
            S.COMMITTER_BYTES_COMMITTED: renaming.bytes_done,
        }
    for operation, name in _REPORTED:
        if counters.get(name) or counters.get(name + ".failures"):
            job_done(
                operation,
                context.layout.job_id,
                context.qualify(context.layout.dest),
                counters,
                context.stats.gauges,
                time.monotonic() - context.started,
                error,
                log=context.log,
            )
            return
