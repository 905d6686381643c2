"""The rename stage on every core: manifests handed out to worker processes.

pre:  as ``rename_files``; and the store can be opened again in another process
      (``StageContext.reopen``), its opener and the options pickle.
post: as ``rename_files``; every worker's statistics are merged into the job's, its
      progress summed into the job's one progress report.
fail: the first failure in any worker, a worker's death, or a cancellation of the caller
      kills every worker (SIGKILL: renames are re-runnable, so nothing is gained by waiting)
      and is raised once, as the worker raised it. Renamed files stay renamed: a re-run of
      the job commit finishes, ``abort_job`` moves them back. A worker whose parent dies
      exits within ``PARENT_POLL_SECONDS``.

Each worker is a process of ``io.processes`` (a fresh interpreter; that module knows
nothing of renames) with its own event loop, store client and ``StoreOperations``
holding its share of the concurrency and rate limits.
Workers are started while the manifests load (``RenameWorkers``) when the first ones
show the job will want them, else when the stage begins: one per process the stage
uses. The calling process renames only until the first worker is ready (from the first
moment, when none was started ahead): a worker renames inline on a loop of its own, at a
fraction of what the caller's loop pays per file (batched thread hops), and the caller's
loop stays free. Renamers
take whole manifests (the shard unit) from one queue, largest first, as they need them:
the parent sends a worker its manifests' spilled entries (already checked at load) in
batches over a pipe that blocks while the worker is busy, so memory stays bounded and
the work balances itself. A worker answers with progress and, at the end, its statistics.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
import anyio.lowlevel
import anyio.to_thread

from aiocommit.committers.common.context import Progress, StageContext, parallel
from aiocommit.committers.manifest.commit_file import (
    AttemptCountdown,
    Entry,
    batches_commits,
    commit_file,
    commit_files,
    delete_attempt_dir,
    deletes_attempt_dirs_early,
    file_done,
)
from aiocommit.committers.manifest.load_manifests import LoadedJob, spilled_entries
from aiocommit.errors import CommitError
from aiocommit.io.operations import StoreOperations
from aiocommit.io.processes import (
    PARENT_POLL_SECONDS,
    Channel,
    Finished,
    WorkerExited,
    WorkerFailed,
    WorkerProcess,
)
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics, IOStatisticsSnapshot
from aiocommit.protocol.layout import JobLayout
from aiocommit.runtime.blocking import dedicate_loop
from aiocommit.runtime.gc_freeze import fewer_collections
from aiocommit.stores.base import StoreOpener

#: below this many files per worker, starting a process costs more than it saves
MIN_FILES_PER_PROCESS = 10_000
#: bytes of spilled entries sent to a worker in one message (~500 entries). The feeding
#: thread pickles each message in memory from its pool thread's malloc arena, which keeps
#: what is freed back to it; at 256 KiB a long-lived caller's RSS grew ~7 MB over its
#: first 12 commits with workers (``bench loop``'s rss part, ``processes=0``), at 32 KiB
#: under 0.5 MB, with no measurable cost in W1
BATCH_BYTES = 1 << 15
#: the calling process renames until the first worker is ready (tests turn it off to aim
#: faults at the workers)
PARENT_RENAMES = True
#: how long the rename stage waits for a worker started ahead to be ready before this
#: process starts renaming itself (a ready worker is on its way: its answer is a thread hop)
READY_GRACE_SECONDS = 0.1
#: how often a worker reports progress
PROGRESS_SECONDS = 0.2
#: renames a worker makes as one store call where the store batches them
#: (``commit_files``): each still takes its slot of the in-flight limit
CHUNK_FILES = 64


def even_chunks(entries: list[Entry], size: int) -> Iterator[list[Entry]]:
    """``entries`` in the fewest chunks of at most ``size``, as even as they go (100
    entries in chunks of 64 go as 50 + 50, not 64 + 36); none for no entries."""
    if not entries:
        return
    pieces = -(-len(entries) // size)
    step = -(-len(entries) // pieces)
    for start in range(0, len(entries), step):
        yield entries[start : start + step]


Batch = list[tuple[str, bytes]]


@dataclasses.dataclass(frozen=True)
class WorkerSetup:
    """A worker's first message, when the rename stage begins: its share of the options
    (it opens its store client as it starts, from the opener it is started with)."""

    options: CommitOptions
    layout: JobLayout


def worker_count(context: StageContext, loaded: LoadedJob) -> int:
    """Processes the rename stage uses: ``options.processes`` (0: one per core), at most
    one per manifest and per ``MIN_FILES_PER_PROCESS`` files; 1 when the store cannot be
    opened in another process."""
    return _process_count(context, len(loaded.manifests), loaded.file_count)


def _process_count(context: StageContext, manifests: int, files: int) -> int:
    wanted = context.options.processes or os.cpu_count() or 1
    count = min(wanted, manifests, files // MIN_FILES_PER_PROCESS)
    if count <= 1:
        return 1
    if context.reopen is None:
        context.log.info(
            "renaming in this process: the store cannot be opened in a worker process "
            "(its data lives in this process, or a wrapper does not say how)"
        )
        return 1
    try:
        pickle.dumps((context.reopen, context.options))
    except Exception as error:  # any pickling failure: not shareable
        context.log.info("renaming in this process: the store opener does not pickle: %s", error)
        return 1
    return count


@contextmanager
def job_commit_collections(options: CommitOptions) -> Iterator[None]:
    """``fewer_collections`` for a whole job commit when the caller asks (``tune_gc``: a
    process that exists to commit); otherwise the host's garbage collector is left alone
    (freezing would keep the host's pending garbage until the next full collection)."""
    if not options.tune_gc:
        yield
        return
    with fewer_collections():
        yield


def worker_options(options: CommitOptions, workers: int) -> CommitOptions:
    """A worker's share of the job's in-flight and rate limits (its floor never above
    its share)."""
    concurrency = max(1, math.ceil(options.concurrency / workers))
    return options.with_values(
        processes=1,
        concurrency=concurrency,
        min_concurrency=min(concurrency, max(1, math.ceil(options.min_concurrency / workers))),
        rate_limit=options.rate_limit / workers if options.rate_limit else None,
    )


class _Worker(WorkerProcess):
    """The parent's handle on one rename worker process."""

    def __init__(self, index: int, reopen: StoreOpener) -> None:
        super().__init__(index, _renamer_main, reopen)
        self.files_done = 0
        self.bytes_done = 0
        #: set when the worker has opened its store (the feeding thread waits for it)
        self.ready = threading.Event()


class RenameWorkers:
    """Rename worker processes started ahead of the rename stage, while the manifests
    load, so that their start (a fresh interpreter, its imports, the store client) costs
    the rename stage nothing. After ``SAMPLE_MANIFESTS`` manifests have loaded (or all of
    them), ``manifests_loaded`` estimates the job's files from them and starts the workers
    ``worker_count`` would then ask for; the rename stage takes them. An async
    context manager: at exit every process it started is killed and reaped."""

    #: manifests loaded before the file count is estimated from them
    SAMPLE_MANIFESTS = 32

    def __init__(self, context: StageContext) -> None:
        self.context = context
        self.handles: list[_Worker] = []
        self._estimated = False

    def manifests_loaded(self, manifests: int, files: int, of_manifests: int) -> None:
        """A ``load_manifests_stage`` progress callback: starts the workers once."""
        if self._estimated or manifests < min(self.SAMPLE_MANIFESTS, of_manifests):
            return
        self._estimated = True
        reopen = self.context.reopen
        if reopen is None:
            return  # the rename stage says why it renames in this process
        estimate = files * of_manifests // max(manifests, 1)
        processes = _process_count(self.context, of_manifests, estimate)
        if processes <= 1:
            return
        for index in range(processes):
            self.handles.append(_Worker(index, reopen))

    def take(self, count: int, reopen: StoreOpener) -> list[_Worker]:
        """``count`` workers: those started ahead first, then new ones; the extras are
        killed. The caller kills and reaps what it takes."""
        taken, self.handles = self.handles[:count], self.handles[count:]
        for handle in self.handles:
            handle.kill()  # reaped at exit
        taken.extend(_Worker(index, reopen) for index in range(len(taken), count))
        return taken

    async def __aenter__(self) -> RenameWorkers:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        handles, self.handles = self.handles, []
        for handle in handles:
            handle.kill()
        with anyio.CancelScope(shield=True):
            for handle in handles:
                await anyio.to_thread.run_sync(handle.reap)


async def rename_in_workers(
    context: StageContext,
    loaded: LoadedJob,
    processes: int,
    started: RenameWorkers | None = None,
) -> tuple[int, int]:
    """Rename every entry of ``loaded`` in ``processes`` worker processes, using those
    ``started`` ahead first; (files, bytes) renamed.

    This process renames only until the first worker is ready (at once, when none was
    started ahead); every renamer takes the next manifest (largest first) from one queue
    when it needs more, so the workers get what is left when they are ready and nobody
    waits at the end for a big shard."""
    options = worker_options(context.options, processes)
    early = deletes_attempt_dirs_early(context)
    queue = deque(sorted(loaded.manifests, key=lambda m: -m.file_count))
    assert context.reopen is not None
    reopen = context.reopen
    workers = processes
    threads = anyio.CapacityLimiter(2 * workers)
    handles: list[_Worker] = []
    here = [0, 0]  # files, bytes renamed in this process
    last_report = 0.0
    dest_root = context.layout.dest
    any_ready = anyio.Event()

    def report(force: bool = False) -> None:
        nonlocal last_report
        now = time.monotonic()
        if force or now - last_report > PROGRESS_SECONDS:
            last_report = now
            context.report(
                Progress(
                    S.JOB_STAGE_RENAME_FILES,
                    here[0] + sum(h.files_done for h in handles),
                    loaded.file_count,
                    here[1] + sum(h.bytes_done for h in handles),
                    loaded.total_size,
                )
            )

    def entries_here() -> Iterator[tuple[Entry, AttemptCountdown]]:
        # only until the first worker is ready: a worker renames inline on a loop of its
        # own, at a fraction of this loop's cost per file (batched thread hops)
        while queue and not any_ready.is_set():
            manifest = queue.popleft()
            countdown = AttemptCountdown(manifest.attempt_dir, manifest.file_count)
            for entry in loaded.entries(manifest, dest_root):
                yield entry, countdown

    async def rename_here(item: tuple[Entry, AttemptCountdown]) -> None:
        entry = item[0]
        await commit_file(context, entry)
        if file_done(item[1]) and early:
            await delete_attempt_dir(context, item[1])
        here[0] += 1
        here[1] += entry[2]
        if here[0] & 63 == 0:
            report()

    def feed(handle: _Worker) -> None:
        # A thread of its own per worker, never the event loop: this loop is busy
        # renaming, and a batch that waited for its turn here would starve the worker.
        # Sends block while the worker is busy (a full pipe), so it takes manifests only
        # as it needs them; the kill that ends the stage ends a blocked send.
        try:
            handle.send(WorkerSetup(options, context.layout))
            while not handle.ready.wait(PARENT_POLL_SECONDS):
                if handle.process.poll() is not None:
                    return  # its watcher says why
            batch: Batch = []
            size = 0
            while True:
                try:
                    manifest = queue.popleft()  # shared with this loop's renamers
                except IndexError:
                    break
                data = loaded.spilled(manifest)
                batch.append((manifest.attempt_dir, data))
                size += len(data)
                if size >= BATCH_BYTES:
                    handle.send(batch)
                    batch, size = [], 0
            if batch:
                handle.send(batch)
            handle.send(None)
        except OSError:
            return  # the worker is gone; its watcher says why

    async def watch(handle: _Worker) -> None:
        while True:
            try:
                message = await anyio.to_thread.run_sync(
                    handle.receive, abandon_on_cancel=True, limiter=threads
                )
            except anyio.get_cancelled_exc_class():
                # at once, not when the stage has unwound: a worker renames inline and
                # would go on renaming while this loop's renamers unwind
                handle.kill()
                raise
            except WorkerExited as exited:
                raise CommitError(
                    f"rename worker {handle.index} (pid {exited.pid}) died with exit "
                    f"code {exited.code}; the renames it finished stay: commit the job again "
                    "to finish it, or abort it",
                    stage=S.JOB_STAGE_RENAME_FILES,
                ) from None
            except WorkerFailed as failed:
                raise CommitError(
                    f"rename worker {handle.index} failed: {failed}",
                    stage=S.JOB_STAGE_RENAME_FILES,
                ) from None
            if isinstance(message, Finished):
                snapshot: IOStatisticsSnapshot
                handle.files_done, handle.bytes_done, snapshot = message.result
                context.stats.aggregate(snapshot)
                return
            if message[0] == "ready":
                handle.ready.set()
                any_ready.set()
            else:  # progress
                handle.files_done, handle.bytes_done = message[1], message[2]
                report()

    try:
        ahead = 0
        if started is not None:
            ahead = len(started.handles)
            handles.extend(started.take(workers, reopen))
        else:
            handles.extend(_Worker(index, reopen) for index in range(workers))
        async with anyio.create_task_group() as group:
            for handle in handles:
                group.start_soon(_in_thread, feed, handle, threads)
                group.start_soon(watch, handle)
            if PARENT_RENAMES:
                if ahead:
                    with anyio.move_on_after(READY_GRACE_SECONDS):
                        await any_ready.wait()
                renamers = min(options.concurrency, context.loop_workers)
                await parallel(entries_here(), rename_here, workers=renamers)
    finally:
        for handle in handles:
            handle.kill()
        with anyio.CancelScope(shield=True):
            for handle in handles:
                await anyio.to_thread.run_sync(handle.reap)
    report(force=True)
    return (
        here[0] + sum(h.files_done for h in handles),
        here[1] + sum(h.bytes_done for h in handles),
    )


async def _in_thread(
    function: Callable[[_Worker], None], handle: _Worker, limiter: anyio.CapacityLimiter
) -> None:
    await anyio.to_thread.run_sync(function, handle, abandon_on_cancel=True, limiter=limiter)


# -- the worker process ----------------------------------------------------------------


class _Feed:
    """The worker's entries: batches read from the pipe into a queue the renamers pop
    without awaiting (a memory stream costs a suspension per entry), kept ``low`` to
    twice ``low`` entries ahead of them, in chunks of at most ``chunk`` entries of one
    manifest (with its countdown)."""

    def __init__(self, channel: Channel, dest_root: str, *, low: int, chunk: int) -> None:
        self.channel = channel
        self.dest_root = dest_root
        self.low = low
        self.chunk = chunk
        self.pending: deque[tuple[list[Entry], AttemptCountdown]] = deque()
        self.queued = 0  # entries in ``pending``
        self.done = False
        self.hungry = anyio.Event()
        self._ready = anyio.Event()

    async def wait(self) -> None:
        await self._ready.wait()

    def take(self) -> tuple[list[Entry], AttemptCountdown]:
        """The next chunk (``pending`` is not empty); wakes the reader when low."""
        chunk = self.pending.popleft()
        self.queued -= len(chunk[0])
        if self.queued <= self.low:
            self.hungry.set()
        return chunk

    async def read(self) -> None:
        while True:
            batch: Batch | None = await anyio.to_thread.run_sync(self.channel.receive)
            if batch is None:
                break
            for attempt_dir, data in batch:
                entries = list(spilled_entries(data, attempt_dir, self.dest_root))
                countdown = AttemptCountdown(attempt_dir, len(entries))
                for piece in even_chunks(entries, self.chunk):
                    self.pending.append((piece, countdown))
                self.queued += len(entries)
            self._wake()
            while self.queued > self.low:
                await self.hungry.wait()
                self.hungry = anyio.Event()
        self.done = True
        self._wake()

    def _wake(self) -> None:
        self._ready.set()
        self._ready = anyio.Event()


async def _renamer_main(
    reopen: StoreOpener, channel: Channel
) -> tuple[int, int, IOStatisticsSnapshot]:
    """A rename worker (``io.processes`` runs it): opens its store, says it is ready,
    renames the manifests' entries it is sent, and answers (files, bytes, statistics)."""
    stats = IOStatistics(durations=S.STORE_OPERATIONS, counters=S.COUNTERS)
    dedicate_loop()  # this process exists to rename: no one else waits for its loop
    store = reopen()
    channel.send(("ready",))
    try:
        setup: WorkerSetup = await anyio.to_thread.run_sync(channel.receive)
        context = StageContext(
            layout=setup.layout,
            options=setup.options,
            # a worker's loop is its own: no host's loop to spare
            ops=StoreOperations(store, setup.options, stats, host_loop=False),
            stats=stats,
        )
        dest_root = setup.layout.dest
        files = 0
        size = 0
        last = time.monotonic()

        early = deletes_attempt_dirs_early(context)
        batched = batches_commits(context)
        concurrency = setup.options.concurrency
        # batched: a renamer per chunk of renames in flight, else one per rename
        chunk = CHUNK_FILES if batched else 1
        renamers = max(1, concurrency // chunk) if batched else concurrency
        feed = _Feed(channel, dest_root, low=4 * concurrency, chunk=chunk)

        async def renamer() -> None:
            nonlocal files, size, last
            pending = feed.pending
            while True:
                if not pending:
                    if feed.done:
                        return
                    await feed.wait()
                    continue
                entries, countdown = feed.take()
                if batched:
                    await commit_files(context, entries)
                else:
                    await commit_file(context, entries[0])
                if file_done(countdown, len(entries)) and early:
                    # not waited for: a renamer goes on renaming while it is deleted
                    deletes.start_soon(delete_attempt_dir, context, countdown)
                before = files
                files += len(entries)
                size += sum(entry[2] for entry in entries)
                if files >> 5 != before >> 5:  # past another 32 files
                    # a store that answers without suspending would starve the reader
                    await anyio.lowlevel.checkpoint()
                    now = time.monotonic()
                    if now - last > PROGRESS_SECONDS:
                        last = now
                        channel.send(("progress", files, size))

        async with anyio.create_task_group() as deletes, anyio.create_task_group() as group:
            group.start_soon(feed.read)
            for _ in range(renamers):
                group.start_soon(renamer)
        limiter = context.ops.limiter
        stats.set_gauge("store_io_concurrency_peak", limiter.peak_in_flight)
        return files, size, stats.snapshot()
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()
