"""What every stage gets: the job's layout, options, store operations and statistics,
plus the stage runner and the bounded parallel map the stages share."""

from __future__ import annotations

import logging
import time
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from aiocommit.errors import CommitError, InvalidInput, StoreError, first_error
from aiocommit.io.operations import StoreOperations
from aiocommit.observability import (
    ContextAdapter,
    annotate_span,
    job_figures,
    record_stage,
    stage_span,
)
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.uris import manifest_path, manifest_uri
from aiocommit.runtime.turns import take_turn, yield_due
from aiocommit.stores.base import StoreOpener

T = TypeVar("T")

logger = logging.getLogger("aiocommit")


@dataclass(frozen=True)
class Progress:
    """A progress report of a stage: ``done`` of ``total`` items of ``unit``, and the bytes
    those items hold.

    ``unit`` says what ``done``/``total`` count: ``"files"`` (renaming, aborting),
    ``"manifests"`` (loading them) or ``"directories"`` (cleanup). ``total`` is 0 while
    unknown. ``bytes_done``/``bytes_total`` are bytes of the files renamed or aborted:
    both 0 in a stage that moves no file data, and never ``bytes_done`` without
    ``bytes_total`` (``ValueError``). ``fraction`` is the share done, None without a
    total. ``files_done``/``files_total`` are ``done``/``total`` when the unit is files,
    else 0 (they counted any unit before 0.x: read ``done``)."""

    stage: str
    done: int = 0
    total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    unit: str = "files"

    def __post_init__(self) -> None:
        if self.bytes_done and not self.bytes_total:
            raise InvalidInput(f"progress of {self.stage}: bytes_done without bytes_total")

    @property
    def fraction(self) -> float | None:
        """``done / total`` (at most 1), None while the total is unknown."""
        return min(1.0, self.done / self.total) if self.total else None

    @property
    def files_done(self) -> int:
        return self.done if self.unit == "files" else 0

    @property
    def files_total(self) -> int:
        return self.total if self.unit == "files" else 0


#: the least time between two progress reports of a stage
PROGRESS_SECONDS = 0.2

#: tasks a stage runs at once on the caller's loop when its items are manifests or
#: directories, or while worker processes do the renames (``StageContext.loop_workers``).
#: Each task in flight keeps tens of tracked objects alive (its coroutine, its request's),
#: and each middle-generation collection promotes what is alive to the oldest generation.
#: ADLS, 20,000 files (load 6): 256 at once (its pool) promoted ~8,000 objects per such
#: collection while the sources were checked and set off a full collection of the host's
#: heap (42-62 ms of the loop); 64, one; 32, none, in as little time (the answers, not the
#: width, are the limit there).
LOOP_WORKERS = 32


ProgressCallback = Callable[[Progress], None]


class GuardedProgress:
    """A caller's progress callback that can never break a commit: an exception it
    raises is logged once (with the callback's name) and ignored, the first time and
    every time after; cancellation and interrupts pass (they are not ``Exception``)."""

    def __init__(self, callback: ProgressCallback) -> None:
        self.callback = callback
        self.failures = 0

    @property
    def name(self) -> str:
        callback = self.callback
        return str(getattr(callback, "__qualname__", None) or type(callback).__qualname__)

    def __call__(self, event: Progress) -> None:
        try:
            self.callback(event)
        except Exception as error:
            self.failures += 1
            if self.failures == 1:
                logger.warning(
                    "progress callback %s raised %s: %s; ignored (the commit goes on; "
                    "further errors of it are not logged)",
                    self.name,
                    type(error).__name__,
                    error,
                )


@dataclass
class StageContext:
    """Shared by the stages of one job or task commit. Built once, then read-only but for
    the statistics it collects."""

    layout: JobLayout
    options: CommitOptions
    ops: StoreOperations
    stats: IOStatistics
    job_id_source: str = "JobID"
    task_attempt_id: str | None = None
    progress: ProgressCallback | None = None
    #: opens this store again in a worker process; None where it cannot be (memory)
    reopen: StoreOpener | None = None
    #: ``time.monotonic()`` when the context was opened (the job operation's start)
    started: float = field(default_factory=time.monotonic)
    log: ContextAdapter = field(init=False)
    #: the latest progress report of each stage (what an interrupted stage had done)
    latest: dict[str, Progress] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.progress is not None and not isinstance(self.progress, GuardedProgress):
            self.progress = GuardedProgress(self.progress)
        extra = {"job_id": self.layout.job_id, "task_attempt_id": self.task_attempt_id or "-"}
        self.log = ContextAdapter(logger, extra)

    def qualify(self, path: str) -> str:
        """The store URL of a path, for messages and people (nothing escaped)."""
        return self.ops.store.qualify(path)

    def to_uri(self, path: str) -> str:
        """A store path as manifests and ``_SUCCESS`` hold it (Hadoop's URI form)."""
        return manifest_uri(self.ops.store.qualify(path))

    def from_uri(self, uri: str) -> str:
        """The store path of a path in a manifest; ``ValueError`` if it is not in Hadoop's
        URI form or names another store."""
        return self.ops.store.unqualify(manifest_path(uri))

    @property
    def loop_workers(self) -> int:
        """Tasks at once for a stage over manifests or directories (not files), and for
        this loop's renames while worker processes do the rest: ``ops.workers``, at most
        ``LOOP_WORKERS``."""
        return min(self.ops.workers, LOOP_WORKERS)

    def report(self, event: Progress) -> None:
        self.latest[event.stage] = event
        if self.progress is not None:
            self.progress(event)

    def counter(
        self, stage: str, total: int, *, unit: str = "files", bytes_total: int = 0
    ) -> StageProgress:
        """Progress of ``total`` items of a stage, reported at most every
        ``PROGRESS_SECONDS`` (and at ``finish``)."""
        return StageProgress(self, stage, total, unit, bytes_total)


class StageProgress:
    """Counts a stage's items done and reports them now and then (``StageContext.counter``)."""

    def __init__(
        self, context: StageContext, stage: str, total: int, unit: str, bytes_total: int
    ) -> None:
        self.context = context
        self.stage = stage
        self.total = total
        self.unit = unit
        self.bytes_total = bytes_total
        self.done = 0
        self.bytes_done = 0
        self._last = 0.0
        self._on = context.progress is not None
        if self._on:
            self._send()

    def add(self, items: int = 1, size: int = 0) -> None:
        self.done += items
        self.bytes_done += size
        if self._on:
            now = time.monotonic()
            if now - self._last > PROGRESS_SECONDS:
                self._last = now
                self._send()

    def finish(self) -> None:
        if self._on:
            self._send()

    def _send(self) -> None:
        self.context.report(
            Progress(
                self.stage, self.done, self.total, self.bytes_done, self.bytes_total, self.unit
            )
        )


#: the outer stages of a job commit, abort and cleanup: their spans carry the job's figures
_JOB_STAGES = frozenset({S.COMMITTER_COMMIT_JOB, S.JOB_STAGE_ABORT, S.JOB_STAGE_CLEANUP})


@asynccontextmanager
async def stage(context: StageContext, name: str) -> AsyncIterator[None]:
    """Run a block as stage ``name``: timed into the statistics, logged, and any failure
    surfaced as one ``CommitError`` naming the stage, operation and path."""
    context.log.debug("stage %s starting", name, extra={"stage": name})
    started = time.perf_counter()
    failed = True
    try:
        with stage_span(
            name,
            {"job_id": context.layout.job_id, "task_attempt_id": context.task_attempt_id or "-"},
        ):
            try:
                yield
                failed = False
            finally:
                # the stage's duration statistic (``IOStatistics.track``'s, inline)
                context.stats.record_duration(
                    name, (time.perf_counter() - started) * 1000, failed=failed
                )
                if name in _JOB_STAGES:
                    annotate_span(job_figures(context.stats.counters, context.stats.gauges))
        failed = False
    except BaseException as raw:
        error = first_error(raw)
        if isinstance(error, CommitError):
            if error.stage is None:
                error.stage = name
            if error is raw:
                raise
            raise error from error.__cause__  # the group only wrapped it
        if isinstance(error, StoreError):
            raise CommitError(
                f"{name} failed: {error.message}{error.retry_note()}",
                stage=name,
                operation=error.operation,
                path=error.path,
            ) from error
        if error is not raw and not isinstance(error, anyio.get_cancelled_exc_class()):
            raise error from error.__cause__
        raise
    finally:
        record_stage(name, time.perf_counter() - started, failed=failed)
    context.log.debug(
        "stage %s done in %.3f s", name, time.perf_counter() - started, extra={"stage": name}
    )


async def parallel(
    items: Iterable[T] | AsyncIterable[T],
    worker: Callable[[T], Awaitable[None]],
    *,
    workers: int,
) -> None:
    """Run ``worker`` over ``items`` with at most ``workers`` at once, in one task group:
    the first failure cancels the rest and is raised; nothing outlives the call. Items
    are pulled lazily, so an async iterable is never held in memory whole."""
    if isinstance(items, list | tuple):
        workers = min(workers, len(items))
        if workers == 0:
            return
    if not isinstance(items, AsyncIterable):
        # one shared iterator: next() never interleaves with another coroutine
        shared = iter(items)

        async def drain() -> None:
            for done, item in enumerate(shared, 1):
                await worker(item)
                # before the next item, the loop gets its turn once this slice is used:
                # a store that answers without suspending would never let the caller's
                # tasks in, and many answers arriving in one turn (hundreds of HTTP
                # responses) would each start their worker's next call in that turn.
                # Checked here, not in a coroutine: one comparison per item while the
                # slice lasts (no object per item for the garbage collector to count)
                if yield_due():
                    await take_turn()
                if not done & 31:  # and, whatever the slice, a cancellation gets in
                    await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as group:
            await _start(group, drain, workers)
        return
    send, receive = anyio.create_memory_object_stream[T](max_buffer_size=workers)

    async def produce() -> None:
        async with send:
            async for item in items:
                await send.send(item)

    async def consume(stream: anyio.abc.ObjectReceiveStream[T]) -> None:
        async with stream:
            async for item in stream:
                await worker(item)
                if yield_due():
                    await take_turn()

    async with anyio.create_task_group() as group:
        group.start_soon(produce)
        await _start(group, lambda: consume(receive.clone()), workers)
        receive.close()


async def run_to_end(work: Callable[[], Awaitable[None]]) -> None:
    """Run ``work`` (clean-up) to its end even if the caller is cancelled meanwhile. An
    anyio shield stops anyio's cancellations, not a native ``Task.cancel()``, which would
    cut the clean-up short at its first await (a spill file left open); so ``work`` runs
    shielded in a child task, which the caller waits for before any cancellation
    reaches it. An ``Exception`` of ``work`` is raised as itself."""
    failures: list[Exception] = []

    async def shielded() -> None:
        with anyio.CancelScope(shield=True):
            try:
                await work()
            except Exception as error:  # raised below, not wrapped in a group
                failures.append(error)

    async with anyio.create_task_group() as group:
        group.start_soon(shielded)
    if failures:
        raise failures[0]


#: workers started per loop turn: each runs its first item in the turn after its start
STARTS_PER_TURN = 32


async def _start(
    group: anyio.abc.TaskGroup, worker: Callable[[], Coroutine[Any, Any, None]], workers: int
) -> None:
    """Start ``workers`` tasks, ``STARTS_PER_TURN`` per loop turn, so the caller's loop
    never runs thousands of first items in one turn."""
    for started in range(1, max(1, workers) + 1):
        group.start_soon(worker)
        if started % STARTS_PER_TURN == 0:
            await anyio.lowlevel.checkpoint()
