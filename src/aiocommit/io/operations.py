"""Store operations as the stages see them: every call goes through the job's limiter,
the shared rate limiter, the retry policy and the statistics, in one place."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import TypeVar

import anyio
import msgspec.structs

from aiocommit.errors import AlreadyExists, NotFound, StoreError, Throttled, Transient
from aiocommit.io.limits import AdaptiveLimiter, AdaptiveRate, Limits, RateLimiter
from aiocommit.io.retry import RetryPolicy
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import (
    REQUEST_RETRY,
    FileStatus,
    RenameBatch,
    Store,
    StoreCapabilities,
    rename_batcher,
    tree_lister,
)

T = TypeVar("T")
P = TypeVar("P")


class StoreOperations:
    """The one door from stages to a store.

    Each call: waits on the rate limiter (if set) and on the adaptive rate (once the store
    has throttled a large share of calls), takes a slot of the job's in-flight limit, calls
    the store, records the duration under a Hadoop statistic name, and on a retryable error
    backs off and tries again per the retry policy, feeding throttles to the adaptive rate
    and, until that paces the calls, to adaptive concurrency. A throttled call that is
    paced waits its turn again (after the store's ``Retry-After``, for that call only)
    rather than backing off further: the rate spaces the calls. Nested work never holds a
    slot while waiting for another.
    """

    def __init__(
        self,
        store: Store,
        options: CommitOptions,
        stats: IOStatistics,
        *,
        retry: RetryPolicy | None = None,
        limiter: AdaptiveLimiter | None = None,
        limits: Limits | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ):
        self.store = store
        self.options = options
        self.stats = stats
        self.retry = retry or RetryPolicy(
            max_attempts=options.max_attempts,
            budget_seconds=options.retry_budget_seconds,
            base_delay=options.retry_base_delay,
            max_delay=options.retry_max_delay,
        )
        cap = store.capabilities.max_in_flight
        maximum = min(options.concurrency, cap) if cap else options.concurrency
        #: the in-flight limit and the configured rates: the client's, shared by its jobs
        #: (``limits``), else this door's own
        self.limits = limits or Limits.for_options(options, cap)
        self.limiter = limiter or self.limits.limiter
        #: tasks worth making calls through this door at once (what stages pass to
        #: ``parallel``): the in-flight limit at its widest. More would only wait for a
        #: slot, and each costs the caller's loop (scheduled, collected by the garbage
        #: collector, unwound on a cancel).
        self.workers = min(maximum, self.limiter.maximum)
        self._sleep = sleep
        #: paces calls at what the store admits once it throttles (adaptive only); on a
        #: store that limits each key prefix, one per prefix (``pace_for``)
        self.pace = AdaptiveRate(sleep=sleep)
        self._paces: dict[str, AdaptiveRate] | None = (
            {} if store.capabilities.rate_per_prefix else None
        )
        #: the rate the first prefix to be paced started at: every other prefix (and any
        #: later one) starts paced there, not in a storm of its own
        self._learned: float | None = None
        self._adaptive = options.adaptive_concurrency
        #: a rename that is not atomic is several requests (GCS: rewrite, then delete):
        #: each takes its turn at the rate and is retried on its own when throttled
        self._multi_request_rename = not store.capabilities.atomic_rename
        #: asked once: stages consult it per file
        self.capabilities: StoreCapabilities = store.capabilities
        self._rename_batch = None if self._multi_request_rename else rename_batcher(store)
        self._rate: RateLimiter | None = self.limits.rate
        self._delete_rate: RateLimiter | None = self.limits.delete_rate

    async def _attempt(
        self, statistic: str, function: Callable[[], Awaitable[T]], requests: _Requests
    ) -> T:
        """One try: rate limit, a slot of the in-flight limit, statistics, throttle feedback.
        ``function``'s requests run in ``REQUEST_RETRY`` (``requests``): the first rides on
        this try's turn, a throttled or transient one is retried on its own."""
        stats = self.stats
        if self._rate is not None:
            await self._wait_turn(self._rate)
        pace = self.pace
        if pace.rate is not None:
            await self._wait_turn(pace)
        limiter = self.limiter
        epoch = await limiter.acquire()
        begin = time.perf_counter()
        requests.epoch, requests.first = epoch, True
        token = REQUEST_RETRY.set(requests)
        try:
            result = await function()
        except StoreError as error:
            stats.record_duration(statistic, (time.perf_counter() - begin) * 1000, failed=True)
            self._heard(error, epoch, begin, pace)
            raise
        finally:
            REQUEST_RETRY.reset(token)
            limiter.release()
        stats.record_duration(statistic, (time.perf_counter() - begin) * 1000)
        limiter.on_success()
        if requests.first:  # else its requests were counted
            pace.admitted += 1
        return result

    async def _wait_turn(self, turn: AdaptiveRate | RateLimiter) -> float:
        """Wait for this call's turn at ``turn``'s rate; the seconds waited, recorded."""
        waited = await turn.acquire()
        if waited:
            self.stats.record_duration(S.STORE_IO_RATE_LIMITED, waited * 1000)
        return waited

    def pace_for(self, path: str) -> AdaptiveRate:
        """The adaptive rate for a call on ``path``: the job's, or its prefix's."""
        paces = self._paces
        if paces is None:
            return self.pace
        prefix = path.rpartition("/")[0]
        pace = paces.get(prefix)
        if pace is None:
            pace = paces[prefix] = AdaptiveRate(sleep=self._sleep)
            if self._learned is not None:
                pace.seed(self._learned)
        return pace

    def _throttled(self, epoch: int, begin: float, pace: AdaptiveRate) -> None:
        """A call that took its slot in ``epoch`` at ``begin`` was throttled: the adaptive
        rate hears it; adaptive concurrency too until the rate paces the calls (a store
        that limits requests per second is not helped by fewer in flight)."""
        stats = self.stats
        stats.increment(S.STORE_IO_THROTTLED)
        if not self._adaptive:
            return
        unpaced = pace.rate is None
        if pace.on_throttle(begin):
            stats.increment(S.STORE_IO_RATE_DECREASED)
            if unpaced and pace.rate is not None:
                if self._paces is not None and self._learned is None:
                    self._learned = pace.rate
                    for other in self._paces.values():
                        other.seed(pace.rate)
                self.limiter.reset()  # the rate paces the calls from now on
        elif pace.rate is None and self.limiter.on_throttle(epoch):
            stats.increment(S.STORE_IO_CONCURRENCY_DECREASED)

    async def _backoff(
        self, error: StoreError, attempt: int, delay: float, started: float
    ) -> float:
        """Sleep before the next attempt and return the delay, or re-raise ``error``."""
        next_delay = (
            None  # a request of the call was retried on its own and given up already
            if error.retried_seconds
            else self.retry.next_delay(error, attempt, delay, started)
        )
        if next_delay is None:
            if not error.retried_seconds:
                error.attempts = attempt
                error.retried_seconds = max(1e-9, self.retry.clock() - started)
            raise error
        self.stats.increment(S.STORE_IO_RETRY)
        self.stats.record_duration(S.STORE_IO_BACKOFF, next_delay * 1000)
        await self._sleep(next_delay)
        return next_delay

    async def _call(
        self,
        statistic: str,
        function: Callable[[], Awaitable[T]],
        *,
        rate: RateLimiter | None = None,
        probe: bool = False,
        path: str = "",
        requests: _Requests | None = None,
        attempt: int = 0,
        delay: float = 0.0,
        started: float | None = None,
    ) -> T:
        """Run ``function`` with limits, statistics and retries (continuing a call begun at
        ``started`` after ``attempt`` attempts, the last followed by a backoff of
        ``delay``). The error that ends the retries carries ``attempts``, so callers can
        tell a possibly-applied call.
        ``requests``: the store call may make several requests, each through
        ``REQUEST_RETRY`` (set to ``requests`` for the call): the call's turn at the rate
        covers its first request, every further one takes its own turn, and a throttled
        request is retried on its own (``_Requests``).

        The hot path of every store call: one frame (the try of ``_attempt`` inlined), a
        free limiter slot taken without a coroutine, no allocation but the result."""
        if started is None:
            started = self.retry.clock()
        stats = self.stats
        limiter = self.limiter
        pace = self.pace_for(path)
        if requests is not None:
            requests.pace = pace
        while True:
            attempt += 1
            # time waiting for a turn at a rate is not time spent retrying (the budget)
            paced = pace.rate is not None
            if paced:
                started += await self._wait_turn(pace)
            if rate is not None:
                started += await self._wait_turn(rate)
            if self._rate is not None:
                started += await self._wait_turn(self._rate)
            epoch = limiter.try_acquire()
            if epoch is None:
                epoch = await limiter.acquire()
                if not paced and pace.rate is not None:
                    # the rate engaged (and freed the slots) while this call waited for
                    # one: its turn at the rate first, or every call queued for a slot
                    # would reach the store at once
                    limiter.release()
                    started += await self._wait_turn(pace)
                    epoch = await limiter.acquire()
            begin = time.perf_counter()
            if requests is not None:
                requests.epoch, requests.first = epoch, True
                token = REQUEST_RETRY.set(requests)
            try:
                result = await function()
            except StoreError as error:
                limiter.release()
                millis = (time.perf_counter() - begin) * 1000
                delay = await self._failed(
                    statistic, error, millis, probe, epoch, begin, pace, attempt, delay, started
                )
                continue
            except BaseException:
                limiter.release()
                raise
            finally:
                if requests is not None:
                    REQUEST_RETRY.reset(token)
            limiter.release()
            stats.record_duration(statistic, (time.perf_counter() - begin) * 1000)
            limiter.on_success()
            if requests is None or requests.first:  # else its requests were counted
                pace.admitted += 1
            return result

    async def _failed(
        self,
        statistic: str,
        error: StoreError,
        millis: float,
        probe: bool,
        epoch: int,
        begin: float,
        pace: AdaptiveRate,
        attempt: int,
        delay: float,
        started: float,
    ) -> float:
        """After attempt ``attempt`` of a call (begun at ``begin``, its slot taken in
        ``epoch`` and released) failed with ``error`` after ``millis``: counted, then the
        backoff before the next attempt (its delay returned), or ``error`` re-raised."""
        # a probe (stat, read) that finds nothing got its answer: not a failure
        answered = probe and isinstance(error, NotFound)
        self.stats.record_duration(statistic, millis, failed=not answered)
        if answered:
            self.limiter.on_success()
            pace.admitted += 1
        else:
            self._heard(error, epoch, begin, pace)
            if isinstance(error, Throttled) and pace.rate is not None:
                # paced: the rate spaces the calls, the retry waits its turn again
                # (after the store's Retry-After) rather than backing off further each
                # time; the next unpaced backoff starts afresh
                await self._backoff(error, attempt, 0.0, started)
                return 0.0
        return await self._backoff(error, attempt, delay, started)

    def _heard(self, error: StoreError, epoch: int, begin: float, pace: AdaptiveRate) -> None:
        """A try (its slot taken in ``epoch``, begun at ``begin``) failed with ``error``:
        a throttle goes to the rates, a transient error is counted. A request given up on
        (``retried_seconds``) was counted where it was retried (``_request``)."""
        if error.retried_seconds:
            return
        if isinstance(error, Throttled):
            self._throttled(epoch, begin, pace)
        elif isinstance(error, Transient):
            self.stats.increment(S.STORE_IO_TRANSIENT)

    def rename_batcher(self) -> RenameBatch | None:
        """The store's batched renames when ``rename_batch`` may use them now: the store
        has them (``stores.base.rename_batcher``), each rename is one request, and no rate
        paces the calls (else each call takes its own turn: ``rename``)."""
        if (
            self._rename_batch is None
            or self._rate is not None
            or self.pace.rate is not None
            or self._paces is not None
        ):
            return None
        return self._rename_batch

    async def rename_batch(
        self, batch: RenameBatch, renames: list[tuple[str, str, str | None]]
    ) -> list[StoreError | None]:
        """Renames (as ``rename``'s source, destination, source etag; never replacing a
        file) made as one ``batch`` call (from ``rename_batcher``): the first ones, as
        many as there are free slots of the in-flight limit (at least one, waited for),
        one slot each; the outcome of each made, in order, as ``rename`` would end: None,
        or the error that ended its retries. Each is counted as a rename call; one that
        fails is retried on its own, as ``rename`` retries."""
        stats = self.stats
        limiter = self.limiter
        pace = self.pace
        started = self.retry.clock()
        epoch = await limiter.acquire()
        taken = 1
        wanted = len(renames)
        while taken < wanted and limiter.try_acquire() is not None:
            taken += 1
        if taken < wanted:
            renames = renames[:taken]
        begin = time.perf_counter()
        try:
            outcomes = await batch(renames)
        finally:
            for _ in range(taken):
                limiter.release()
        millis = (time.perf_counter() - begin) * 1000
        renamed = outcomes.count(None)
        stats.record_durations(S.OP_RENAME, millis, renamed)
        for _ in range(renamed):
            limiter.on_success()
        pace.admitted += renamed
        if renamed == taken:
            return outcomes
        for index, error in enumerate(outcomes):
            if error is None:
                continue
            source, dest, source_etag = renames[index]
            try:
                delay = await self._failed(
                    S.OP_RENAME, error, millis, False, epoch, begin, pace, 1, 0.0, started
                )
                await self._call(
                    S.OP_RENAME,
                    partial(self.store.rename, source, dest, source_etag=source_etag),
                    path=dest,
                    attempt=1,
                    delay=delay,
                    started=started,
                )
            except StoreError as final:
                outcomes[index] = final
            else:
                outcomes[index] = None
        return outcomes

    def call(
        self,
        statistic: str,
        function: Callable[[], Awaitable[T]],
        *,
        probe: bool = False,
        path: str = "",
    ) -> Awaitable[T]:
        """Any other store call through this door, timed under ``statistic``: limits,
        statistics and retries as for the calls above (for capabilities beyond ``Store``,
        such as multipart uploads). ``probe``: ``NotFound`` is an answer, not a failure;
        ``path``: what the call is about (where the store limits each prefix's rate)."""
        return self._call(statistic, function, probe=probe, path=path)

    async def pages(
        self, statistic: str, listing: Callable[[], AsyncIterator[list[P]]]
    ) -> AsyncIterator[list[P]]:
        """The pages of a listing (``listing()`` starts it), each page timed under
        ``statistic``. A page's request that is throttled or fails transiently is retried
        on its own where the store fetches each page in ``REQUEST_RETRY`` (at its
        continuation: a long listing is not fetched again from the start). Any other
        retryable failure restarts the listing after a backoff and skips what was already
        yielded (listings are consistent on every supported store); the retries' count and
        budget start again at each page that brings something new."""
        yielded = 0
        started = self.retry.clock()
        attempt = 0
        delay = 0.0
        requests = _Requests(self, transient=True)
        while True:
            attempt += 1
            iterator = listing().__aiter__()
            skip = yielded
            try:
                while True:
                    try:
                        page = await self._attempt(statistic, iterator.__anext__, requests)
                    except StopAsyncIteration:
                        return
                    if skip:
                        dropped = min(skip, len(page))
                        page = page[dropped:]
                        skip -= dropped
                    if page:
                        yielded += len(page)
                        # progress: the retries' count and budget start again
                        attempt, delay, started = 1, 0.0, self.retry.clock()
                        yield page
            except StoreError as error:
                delay = await self._backoff(error, attempt, delay, started)
            finally:
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()

    def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        """Pages of a directory's listing, restarted on a retryable failure (``pages``)."""
        store = self.store
        return self.pages(S.OP_LIST_STATUS, lambda: store.list_dir(path))

    def list_tree(self, path: str) -> AsyncIterator[list[FileStatus]] | None:
        """Pages of everything below a directory, restarted on a retryable failure, where
        the store lists a tree in one call (``tree_lister``); None where it does not."""
        lister = tree_lister(self.store)
        if lister is None:
            return None
        return self.pages(S.OP_LIST_STATUS, lambda: lister(path))

    def stat(self, path: str) -> Awaitable[FileStatus]:
        """A path's status; ``NotFound`` (not counted as a failure) when nothing is there."""
        store = self.store
        return self._call(S.OP_GET_FILE_STATUS, lambda: store.stat(path), probe=True, path=path)

    async def stat_or_none(self, path: str) -> FileStatus | None:
        try:
            return await self.stat(path)
        except NotFound:
            return None

    async def mkdirs(self, path: str) -> None:
        """Make a directory and its parents. A store whose ``mkdirs`` is several requests
        (a prefix store's walk) has each paced and retried on its own (``REQUEST_RETRY``)."""
        await self._call(
            S.OP_MKDIRS,
            lambda: self.store.mkdirs(path),
            path=path,
            requests=_Requests(self, transient=True),
        )

    async def _request(
        self, requests: _Requests, request: Callable[[], Awaitable[T]], ride: bool
    ) -> T:
        """One request of a call in progress (which holds the slot): its turn at the
        call's rate (unless it ``ride``s on the call's own turn, the call's first
        request), the store's answer counted there, and a throttle (and, for
        ``requests.transient``, a transient error) retried on its own per the retry
        policy; an error it gives up on is not retried again by the call."""
        pace = requests.pace
        started = self.retry.clock()
        attempt = 0
        delay = 0.0
        while True:
            attempt += 1
            if not ride and pace.rate is not None:
                # ahead of calls waiting to begin: a call begun finishes first
                waited = await pace.acquire(urgent=True)
                if waited:
                    self.stats.record_duration(S.STORE_IO_RATE_LIMITED, waited * 1000)
                    started += waited
            begin = time.perf_counter()
            try:
                result = await request()
            except StoreError as error:
                if isinstance(error, Throttled):
                    self._throttled(requests.epoch, begin, pace)
                    ride = False
                    if pace.rate is not None:  # paced: its turn again, as in ``_call``
                        await self._backoff(error, attempt, 0.0, started)
                        delay = 0.0
                        continue
                elif isinstance(error, Transient):
                    if not requests.transient:
                        raise  # the call's own retry decides (it may have been applied)
                    self.stats.increment(S.STORE_IO_TRANSIENT)
                    ride = False
                else:
                    pace.admitted += 1  # an answer (not found, a conflict)
                delay = await self._backoff(error, attempt, delay, started)
                continue
            pace.admitted += 1  # counted when answered: the rate measures the store
            return result

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        """Delete a file (or a directory, ``recursive``). A store whose directory delete is
        several requests (a listing and a delete per object) has each paced and retried on
        its own (``REQUEST_RETRY``)."""
        statistic = S.OP_DELETE_DIR if recursive else S.OP_DELETE
        rate = self._delete_rate if recursive else None
        return await self._call(
            statistic,
            lambda: self.store.delete(path, recursive=recursive),
            rate=rate,
            path=path,
            requests=_Requests(self, transient=True),
        )

    def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> Awaitable[None]:
        """Rename; an error after more than one attempt (``error.attempts``) may follow an
        earlier attempt that was applied although it reported failure. (A plain function
        returning the call's awaitable: one frame less per rename; a partial, not a
        closure: fewer objects per rename for the garbage collector.)"""
        return self._call(
            S.OP_RENAME,
            partial(self.store.rename, source, dest, overwrite=overwrite, source_etag=source_etag),
            path=dest,
            requests=_Requests(self, transient=False) if self._multi_request_rename else None,
        )

    async def publish_bytes(self, temporary: str, final: str, data: bytes) -> None:
        """Write ``data`` to ``temporary`` and rename it over ``final``, so readers see the
        old file or the new one, whole. A rename retried after a lost response that finds
        its source gone is done when ``final`` holds what was written."""
        written = await self._write(temporary, data, overwrite=True)
        await self._rename_written(temporary, final, written, overwrite=True)

    async def _rename_written(
        self, temporary: str, final: str, written: FileStatus, *, overwrite: bool
    ) -> None:
        """Rename a just-written ``temporary`` to ``final``. A retried rename that finds
        the source gone (or, without ``overwrite``, the destination there) after an
        earlier attempt whose answer was lost is done when ``final`` is what was written:
        the same etag where renames keep etags, else the same size."""
        try:
            await self.rename(temporary, final, overwrite=overwrite)
        except (NotFound, AlreadyExists) as error:
            if error.attempts < 2:
                raise
            landed = await self.stat_or_none(final)
            keeps_etags = self.capabilities.etags_preserved_in_rename
            if (
                landed is None
                or landed.size != written.size
                or (keeps_etags and written.etag and landed.etag and landed.etag != written.etag)
            ):
                raise
            if isinstance(error, AlreadyExists) and await self.stat_or_none(temporary):
                raise  # another writer's file is at ``final``; ours is still temporary

    async def read_bytes(self, path: str, *, statistic: str) -> bytes:
        """A small file's bytes, timed under ``statistic`` (what is read:
        ``OP_LOAD_MANIFEST``, ``OP_LOAD_SUCCESS``, ...); ``NotFound``, not counted as a
        failure, when it is not there."""
        return await self._call(
            statistic, lambda: self.store.read_bytes(path), probe=True, path=path
        )

    async def write_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> FileStatus:
        """Write a small file whole or not at all, on every store: a reader finds no file
        (or the one it replaces) or all of ``data``, never a part; every state file (the
        commit plan and its parts, manifests, pending sets, ``.pending`` records,
        ``_SUCCESS``) is written through here. Where one store write is several requests
        (``capabilities.atomic_write`` false: ADLS), ``data`` goes to a hidden temporary
        name beside ``path`` and is renamed into place (without ``overwrite``, by a rename
        that refuses an existing file); a write that fails removes its temporary file."""
        if self.capabilities.atomic_write:
            return await self._write(path, data, overwrite=overwrite)
        temporary = temporary_name(path)
        try:
            written = await self._write(temporary, data, overwrite=True)
            await self._rename_written(temporary, path, written, overwrite=overwrite)
        except BaseException:
            with anyio.move_on_after(TEMPORARY_DELETE_SECONDS, shield=True):
                with contextlib.suppress(StoreError):
                    await self.store.delete(temporary)
            raise
        return msgspec.structs.replace(written, path=path)

    async def _write(self, path: str, data: bytes, *, overwrite: bool) -> FileStatus:
        """One store write, retried (on ADLS several requests, not whole on failure)."""
        return await self._call(
            S.OP_WRITE, lambda: self.store.write_bytes(path, data, overwrite=overwrite), path=path
        )

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus:
        """Upload a local file (re-read whole on each attempt)."""
        return await self._call(
            S.OP_UPLOAD,
            lambda: self.store.upload_file(local_path, path, overwrite=overwrite),
            path=path,
        )


class _Requests:
    """``REQUEST_RETRY`` for one store call made of several requests (``_call``): the
    first request of each attempt rides on the call's turn at the rate; every other
    one takes its own turn, ahead of calls waiting to begin; each is counted as
    admitted when answered; each is retried on its own when
    throttled (a throttled request was not applied) or, with ``transient``, on a
    transient error (where repeating a request is safe: listings, deletes, markers)."""

    __slots__ = ("epoch", "first", "ops", "pace", "transient")

    def __init__(self, ops: StoreOperations, *, transient: bool) -> None:
        self.ops = ops
        self.transient = transient
        self.pace = ops.pace
        self.epoch = 0
        self.first = True

    def __call__(self, request: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        ride, self.first = self.first, False
        return self.ops._request(self, request, ride)


#: how long a failed whole write may spend removing its temporary file
TEMPORARY_DELETE_SECONDS = 10.0


def temporary_name(path: str) -> str:
    """A hidden name beside ``path``, unique to this write (two writers of one path never
    share one): ``/d/.f.json.<hex>.tmp``. Listings that look for a suffix never match it."""
    parent, _, name = path.rpartition("/")
    return f"{parent}/.{name}.{uuid.uuid4().hex[:16]}.tmp"
