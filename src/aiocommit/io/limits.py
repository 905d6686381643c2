"""Concurrency and rate limits shared by the stages of a job.

``AdaptiveLimiter`` is the job's one in-flight limit: a semaphore whose size follows AIMD
when enabled — cut by 30% when the store throttles, grown by one after a window of
successes. ``RateLimiter`` caps operations per second and is shared by every job
that uses the same store client in the process (``rate_limiter_for``).
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable

import anyio


class AdaptiveLimiter:
    """An in-flight limit that backs off when the store throttles.

    The limit is multiplied by ``decrease_factor`` (not below ``minimum``) when throttles
    make up at least ``throttle_threshold`` of the calls finished in the current window
    (at least two of them) — a store that sheds load — but not for a stray throttle, and
    only for calls that started after the previous decrease, so one burst of throttles
    that were in flight together counts once. Every ``limit`` successes grow it by one,
    up to ``maximum``.

    Taking a free slot does not yield to the event loop (the store call that follows
    will); waiters are served first come, first served, and a cancelled waiter never
    holds a slot.
    """

    def __init__(
        self,
        maximum: int,
        *,
        minimum: int = 1,
        adaptive: bool = True,
        decrease_factor: float = 0.7,
        throttle_threshold: float = 0.1,
    ):
        self.maximum = maximum
        self.decrease_factor = decrease_factor
        self.throttle_threshold = throttle_threshold
        self._window_ok = 0
        self._window_throttled = 0
        self.minimum = min(minimum, maximum)
        self.adaptive = adaptive
        self._limit = maximum
        self._in_flight = 0
        self._waiters: deque[anyio.Event] = deque()
        self._epoch = 0
        self._successes = 0
        self.peak_in_flight = 0

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def _set_limit(self, limit: int) -> None:
        self._limit = limit
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._in_flight < self._limit:
            self._in_flight += 1  # handed to the waiter
            self._waiters.popleft().set()

    def try_acquire(self) -> int | None:
        """Take a free slot without waiting: the epoch, or None when none is free."""
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
            if self._in_flight > self.peak_in_flight:
                self.peak_in_flight = self._in_flight
            return self._epoch
        return None

    async def acquire(self) -> int:
        """Take a slot; returns the epoch to pass back to ``on_throttle``."""
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
        else:
            granted = anyio.Event()
            self._waiters.append(granted)
            try:
                await granted.wait()
            except BaseException:
                if granted.is_set():
                    self.release()
                else:
                    self._waiters.remove(granted)
                raise
        if self._in_flight > self.peak_in_flight:
            self.peak_in_flight = self._in_flight
        return self._epoch

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def on_success(self) -> None:
        if not self.adaptive:
            return
        self._window_ok += 1
        if self._window_ok + self._window_throttled > max(64, 4 * self._limit):
            self._window_ok = self._window_throttled = 0  # a fresh window
        if self._limit >= self.maximum:
            return
        self._successes += 1
        if self._successes >= self._limit:
            self._successes = 0
            self._set_limit(min(self.maximum, self._limit + 1))

    def on_throttle(self, epoch: int) -> bool:
        """Record a throttle of a call that started in ``epoch``; True if the limit dropped."""
        if not self.adaptive or epoch != self._epoch:
            return False
        self._window_throttled += 1
        finished = self._window_ok + self._window_throttled
        if (
            self._window_throttled < 2
            or self._window_throttled < self.throttle_threshold * finished
        ):
            return False
        self._epoch += 1
        self._successes = 0
        self._window_ok = self._window_throttled = 0
        new_limit = max(self.minimum, int(self._limit * self.decrease_factor))
        if new_limit == self._limit:
            return False
        self._set_limit(new_limit)
        return True


class RateLimiter:
    """At most ``rate`` acquisitions per second, with bursts of up to ``burst``
    (generic cell rate algorithm). ``acquire`` returns the seconds it waited."""

    def __init__(
        self,
        rate: float,
        *,
        burst: int = 1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ):
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._next = clock()

    async def acquire(self) -> float:
        interval = 1.0 / self.rate
        now = self._clock()
        earliest = max(self._next, now - interval * (self.burst - 1))
        self._next = earliest + interval
        wait = earliest - now
        if wait > 0:
            await self._sleep(wait)
            return wait
        return 0.0


_shared: weakref.WeakKeyDictionary[object, dict[str, RateLimiter]] = weakref.WeakKeyDictionary()


def rate_limiter_for(store: object, kind: str, rate: float) -> RateLimiter:
    """The rate limiter of ``kind`` (``"io"`` or ``"delete_dir"``) shared by every job
    using this store client. A job asking for a different rate sets it for all."""
    limiters = _shared.setdefault(store, {})
    limiter = limiters.get(kind)
    if limiter is None:
        limiter = limiters[kind] = RateLimiter(rate)
    else:
        limiter.rate = rate
    return limiter
