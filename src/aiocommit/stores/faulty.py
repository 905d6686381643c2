"""``FaultyStore``: fault injection by wrapping any store, for tests and the stress harness.

Every decision is drawn from a hash of (seed, operation, path, how many times this
operation has been called on this path), so a run is reproducible whatever order the
event loop interleaves calls in.

Faults, each per operation kind (``list_dir``, ``stat``, ``mkdirs``, ``delete``,
``rename``, ``read_bytes``, ``write_bytes``, ``upload_file``):

* latency: fixed, plus a random part and rare tail spikes;
* throttling: a probability, bursts (the next calls on any path throttled too), a
  Retry-After, and a capacity in operations per second beyond which calls are throttled;
* transient errors raised before the call reaches the store;
* lost responses: rename or delete applied, then ``Transient(maybe_applied=True)``;
* permanent failure of chosen paths (a predicate), and failure after N calls.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import msgspec.structs

from aiocommit.errors import StoreError, Throttled, Transient
from aiocommit.stores.base import (
    RenameBatch,
    Store,
    StoreCapabilities,
    StoreOpener,
    opener_of,
    rename_batcher,
)
from aiocommit.stores.wrapper import StoreWrapper

T = TypeVar("T")

OPERATIONS = (
    "list_dir",
    "stat",
    "mkdirs",
    "delete",
    "rename",
    "read_bytes",
    "write_bytes",
    "upload_file",
    "create_upload",
    "upload_part",
    "complete_upload",
    "abort_upload",
    "list_uploads",
)


@dataclass
class Latency:
    """``fixed + uniform(0, jitter)`` seconds, and with probability ``spike_probability``
    an extra ``spike`` seconds (a tail spike)."""

    fixed: float = 0.0
    jitter: float = 0.0
    spike_probability: float = 0.0
    spike: float = 0.0

    def draw(self, chance: Callable[[str], float]) -> float:
        seconds = self.fixed
        if self.jitter:
            seconds += self.jitter * chance("jitter")
        if self.spike_probability and chance("spike") < self.spike_probability:
            seconds += self.spike
        return seconds


@dataclass
class Faults:
    """What to inject. Probabilities are per call, from 0 to 1."""

    seed: int = 0
    latency: Latency = field(default_factory=Latency)
    latency_by_operation: dict[str, Latency] = field(default_factory=dict)
    throttle_probability: float = 0.0
    throttle_burst: int = 0
    retry_after: float | None = None
    capacity_per_second: float | None = None
    transient_probability: float = 0.0
    lost_response_probability: float = 0.0
    lost_response_operations: tuple[str, ...] = ("rename", "delete")
    slow_list_seconds: float = 0.0
    fail_paths: Callable[[str, str], bool] | None = None
    fail_after_calls: int | None = None
    operations: tuple[str, ...] = OPERATIONS


@dataclass
class FaultCounts:
    calls: int = 0
    throttled: int = 0
    transient: int = 0
    lost_responses: int = 0
    failed: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)


class _SharedTimers:
    """Injected latency on asyncio without a timer per call: a call sleeping until ``t``
    waits on its own future in the bucket of ``t`` rounded *up* to the next ``TICK``, and
    one loop timer per bucket wakes the bucket. Every call still waits at least its
    latency (at most ``TICK`` more); what is saved is the timer handle and the heap
    insert per call (~3.5 us of ~6 us at 2,048 calls in flight). A cancelled waiter's
    future is its own, so cancelling one call never wakes or cancels another."""

    TICK = 0.00025

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.buckets: dict[int, list[asyncio.Future[None]]] = {}

    def sleep(self, seconds: float) -> asyncio.Future[None]:
        loop = self.loop
        future: asyncio.Future[None] = loop.create_future()
        slot = math.ceil((loop.time() + seconds) / self.TICK)
        bucket = self.buckets.get(slot)
        if bucket is None:
            bucket = self.buckets[slot] = []
            loop.call_at(slot * self.TICK, self._wake, slot)
        bucket.append(future)
        return future

    def _wake(self, slot: int) -> None:
        for future in self.buckets.pop(slot):
            if not future.done():
                future.set_result(None)


class InjectedFailure(StoreError):
    """A permanent failure injected by ``FaultyStore``; never retried."""


class FaultyStore(StoreWrapper):
    """Wraps ``inner`` and injects ``faults`` (read once, here); otherwise behaves
    exactly like it."""

    def __init__(self, inner: Store, faults: Faults | None = None):
        super().__init__(inner)
        self.faults = faults or Faults()
        self.counts = FaultCounts()
        self._seen: dict[tuple[str, str], int] = {}
        self._burst_left = 0
        self._window_start = time.monotonic()
        self._window_calls = 0
        self._timers: _SharedTimers | None = None
        self._latency_only = _latency_only(self.faults)
        # a store made slow serves as many calls at once as are made (a remote store's
        # shape), whatever the inner store's own limit
        self._capabilities = (
            msgspec.structs.replace(inner.capabilities, max_in_flight=None)
            if _injects_latency(self.faults)
            else inner.capabilities
        )

    @property
    def capabilities(self) -> StoreCapabilities:
        return self._capabilities

    def _sleep(self, seconds: float) -> Awaitable[None]:
        """A sleep of ``seconds``: on asyncio a future of the shared timers (no coroutine
        of its own), else ``anyio.sleep``."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another event loop (trio)
            return anyio.sleep(seconds)
        timers = self._timers
        if timers is None or timers.loop is not loop:
            timers = self._timers = _SharedTimers(loop)
        return timers.sleep(seconds)

    def opener(self) -> StoreOpener | None:
        """The same faults around the inner store opened again (fresh counters)."""
        inner = opener_of(self.inner)
        return None if inner is None else functools.partial(_reopen_faulty, inner, self.faults)

    def rename_batcher(self) -> RenameBatch | None:
        """The inner store's batched renames (``stores.base.RenameBatch``) behind one
        wait of the rename latency, each rename counted as a call: only where faults
        inject nothing but fixed latencies (else each call draws its own faults)."""
        inner = rename_batcher(self.inner)
        if inner is None or self._latency_only is None:
            return None
        return functools.partial(self._rename_batch, inner)

    async def _rename_batch(
        self, inner: RenameBatch, renames: list[tuple[str, str, str | None]]
    ) -> list[StoreError | None]:
        assert self._latency_only is not None
        seconds = self._latency_only.get("rename")
        if seconds is not None:  # a faulted operation: counted, and waited for
            seen = self._seen
            for source, _, _ in renames:
                key = ("rename", source)
                seen[key] = seen.get(key, 0) + 1
            counts = self.counts
            counts.calls += len(renames)
            counts.by_operation["rename"] = counts.by_operation.get("rename", 0) + len(renames)
            if seconds:
                await self._sleep(seconds)
        return await inner(renames)

    def _chance(self, operation: str, path: str, nth: int) -> Callable[[str], float]:
        seed = self.faults.seed

        def chance(what: str) -> float:
            digest = hashlib.blake2b(
                f"{seed}\x00{operation}\x00{path}\x00{nth}\x00{what}".encode(), digest_size=8
            ).digest()
            return int.from_bytes(digest, "big") / 2**64

        return chance

    def _over_capacity(self) -> bool:
        """True when this 100 ms window already accepted its share of the capacity;
        throttled calls do not use capacity."""
        capacity = self.faults.capacity_per_second
        if capacity is None:
            return False
        now = time.monotonic()
        if now - self._window_start >= 0.1:
            self._window_start = now
            self._window_calls = 0
        if self._window_calls >= capacity * 0.1:
            return True
        self._window_calls += 1
        return False

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        faults = self.faults
        if operation not in faults.operations:
            return await call()
        key = (operation, path)
        nth = self._seen.get(key, 0)
        self._seen[key] = nth + 1
        counts = self.counts
        counts.calls += 1
        counts.by_operation[operation] = counts.by_operation.get(operation, 0) + 1
        if self._latency_only is not None:  # the stress benchmarks' case: no draws
            seconds = self._latency_only[operation]
            if seconds:
                await self._sleep(seconds)
            return await call()
        chance = self._chance(operation, path, nth)
        latency = faults.latency_by_operation.get(operation, faults.latency).draw(chance)
        if operation == "list_dir":
            latency += faults.slow_list_seconds
        if latency > 0:
            await self._sleep(latency)
        if faults.fail_after_calls is not None and counts.calls > faults.fail_after_calls:
            counts.failed += 1
            raise InjectedFailure("injected failure after N calls", path=path, operation=operation)
        if faults.fail_paths is not None and faults.fail_paths(operation, path):
            counts.failed += 1
            raise InjectedFailure("injected permanent failure", path=path, operation=operation)
        throttle = self._over_capacity() or (
            faults.throttle_probability and chance("throttle") < faults.throttle_probability
        )
        if not throttle and self._burst_left > 0:
            self._burst_left -= 1
            throttle = True
        elif throttle:
            self._burst_left = faults.throttle_burst
        if throttle:
            counts.throttled += 1
            raise Throttled(
                "injected throttling (503 ServerBusy)",
                path=path,
                operation=operation,
                retry_after=faults.retry_after,
            )
        if faults.transient_probability and chance("transient") < faults.transient_probability:
            counts.transient += 1
            raise Transient(
                "injected transient error", path=path, operation=operation, maybe_applied=False
            )
        result = await call()
        if (
            operation in faults.lost_response_operations
            and faults.lost_response_probability
            and chance("lost") < faults.lost_response_probability
        ):
            counts.lost_responses += 1
            raise Transient("injected lost response (applied)", path=path, operation=operation)
        return result


def _injects_latency(faults: Faults) -> bool:
    latencies = [faults.latency, *faults.latency_by_operation.values()]
    return faults.slow_list_seconds > 0 or any(
        latency.fixed or latency.jitter or latency.spike for latency in latencies
    )


def _latency_only(faults: Faults) -> dict[str, float] | None:
    """Each operation's fixed latency when ``faults`` inject nothing else (no jitter,
    spikes, throttling, errors or failures), else None."""
    latencies = [faults.latency, *faults.latency_by_operation.values()]
    if (
        any(latency.jitter or latency.spike_probability for latency in latencies)
        or faults.throttle_probability
        or faults.capacity_per_second is not None
        or faults.transient_probability
        or faults.lost_response_probability
        or faults.fail_paths is not None
        or faults.fail_after_calls is not None
    ):
        return None
    fixed = {
        operation: faults.latency_by_operation.get(operation, faults.latency).fixed
        for operation in faults.operations
    }
    if "list_dir" in fixed:
        fixed["list_dir"] += faults.slow_list_seconds
    return fixed


def _reopen_faulty(inner: StoreOpener, faults: Faults) -> FaultyStore:
    return FaultyStore(inner(), faults)
