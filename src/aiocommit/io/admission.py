"""The admission layer of the store-call door: when a call may go (its turn at the
configured rates and at the adaptive pace, then a slot of the job's in-flight limit), and
what the store's answers teach the limit and the pace."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from aiocommit.errors import StoreError, Throttled, Transient
from aiocommit.io.limits import (
    AdaptiveLimiter,
    AdaptiveRate,
    Limits,
    RateLimiter,
    host_loop_in_flight,
    in_flight_ceiling,
)
from aiocommit.io.metering import CallMeter
from aiocommit.io.retry import InLine
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import Store


class Admission:
    """Limiter + rates + pace for one door.

    A call is admitted by ``try_enter`` (a free slot at once, when nothing paces it) or
    ``enter`` (its turns at the rates, then a slot); it then holds one slot of
    ``limiter`` until it reports back once: ``succeeded``, or ``release`` followed by
    ``answered`` (a probe's not-found) or ``heard`` (a failure). Throttles go to the
    adaptive pace and, until that paces the calls, to adaptive concurrency. Nested work
    never holds a slot while waiting for another.

    ``pace`` paces calls at what the store admits once it throttles (adaptive only); on a
    store that limits each key prefix there is one per prefix (``pace_for``).
    """

    def __init__(
        self,
        store: Store,
        options: CommitOptions,
        meter: CallMeter,
        *,
        limiter: AdaptiveLimiter | None = None,
        limits: Limits | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        host_loop: bool = True,
    ) -> None:
        self.meter = meter
        capabilities = store.capabilities
        cap = capabilities.max_in_flight
        loop_cap = host_loop_in_flight(options, capabilities, host_loop=host_loop)
        maximum = in_flight_ceiling(options, cap, loop_cap)
        #: the in-flight limit and the configured rates: shared (a client's, ``limits``),
        #: else this door's own
        self.limits = limits or Limits.for_options(options, cap, loop_in_flight=loop_cap)
        self.limiter = limiter or self.limits.limiter
        #: tasks worth making calls at once: the in-flight limit at its widest. More would
        #: only wait for a slot, and each costs the caller's loop (scheduled, collected by
        #: the garbage collector, unwound on a cancel).
        self.workers = min(maximum, self.limiter.maximum)
        self._sleep = sleep
        self.pace = AdaptiveRate(sleep=sleep)
        self._paces: dict[str, AdaptiveRate] | None = (
            {} if store.capabilities.rate_per_prefix else None
        )
        #: the rate the first prefix to be paced started at: every other prefix (and any
        #: later one) starts paced there, not in a storm of its own
        self._learned: float | None = None
        #: a prefix's pace judged the store's throttles random: every prefix takes it
        self._random = False
        self._adaptive = options.adaptive_concurrency
        #: the configured rate of every call, and of recursive deletes
        self.rate: RateLimiter | None = self.limits.rate
        self.delete_rate: RateLimiter | None = self.limits.delete_rate
        self._rated = self.rate is not None or self.delete_rate is not None

    def pace_for(self, path: str) -> AdaptiveRate:
        """The adaptive rate for a call on ``path``: the job's, or its prefix's."""
        paces = self._paces
        if paces is None:
            return self.pace
        prefix = path.rpartition("/")[0]
        pace = paces.get(prefix)
        if pace is None:
            pace = paces[prefix] = AdaptiveRate(sleep=self._sleep)
            if self._random:
                pace.unpace()
            elif self._learned is not None:
                pace.seed(self._learned)
        return pace

    @property
    def admits_batches(self) -> bool:
        """Whether calls may go several per turn: no rate paces them (else each call
        takes its own turn)."""
        return not self._rated and self.pace.rate is None and self._paces is None

    def try_enter(self, pace: AdaptiveRate) -> int | None:
        """A free slot taken without waiting (its epoch) when no rate paces the call;
        None when the call must ``enter``."""
        if pace.rate is None and not self._rated:
            epoch = self.limiter.try_acquire()
            if epoch is not None:
                pace.pending += 1
            return epoch
        return None

    async def enter(self, pace: AdaptiveRate, statistic: str) -> tuple[int, float]:
        """Wait for the call's turn at ``pace`` and the configured rates (recursive
        deletes, ``OP_DELETE_DIR``, at theirs too), then for a slot: its epoch, and the
        seconds waited for turns (recorded)."""
        waited = 0.0
        paced = pace.rate is not None
        if paced:
            waited += await self.wait_turn(pace)
        if statistic == S.OP_DELETE_DIR and self.delete_rate is not None:
            waited += await self.wait_turn(self.delete_rate)
        if self.rate is not None:
            waited += await self.wait_turn(self.rate)
        limiter = self.limiter
        epoch = limiter.try_acquire()
        if epoch is None:
            epoch = await limiter.acquire()
            if not paced and pace.rate is not None:
                # the rate engaged (and freed the slots) while this call waited for one:
                # its turn at the rate first, or every call queued for a slot would
                # reach the store at once
                limiter.release()
                waited += await self.wait_turn(pace)
                epoch = await limiter.acquire()
        pace.pending += 1
        return epoch, waited

    async def wait_turn(self, turn: AdaptiveRate | RateLimiter) -> float:
        """Wait for this call's turn at ``turn``'s rate; the seconds waited, recorded."""
        waited = await turn.acquire()
        self.meter.waited(waited)
        return waited

    async def enter_many(self, wanted: int) -> tuple[int, int]:
        """Slots for up to ``wanted`` calls made as one (a batch, where ``admits_batches``):
        one waited for, then as many more as are free; the epoch, and how many were
        taken (each to ``release``)."""
        limiter = self.limiter
        epoch = await limiter.acquire()
        taken = 1
        while taken < wanted and limiter.try_acquire() is not None:
            taken += 1
        self.pace.pending += taken
        return epoch, taken

    def release(self, pace: AdaptiveRate, slots: int = 1) -> None:
        """Give back the slots of calls on ``pace`` that ended (then ``answered`` or
        ``heard``)."""
        limiter = self.limiter
        for _ in range(slots):
            limiter.release()
        pace.pending -= slots

    def succeeded(self, pace: AdaptiveRate, counted: bool, begin: float) -> None:
        """A call begun at ``begin`` ended well: its slot back, the limit hears it, and
        ``pace`` counts it as admitted unless its requests were ``counted`` each already."""
        limiter = self.limiter
        limiter.release()
        pace.pending -= 1
        limiter.on_success()
        if counted:
            pace.on_success(begin)

    def succeeded_many(self, count: int) -> None:
        """``count`` calls of a batch (their slots released) ended well."""
        limiter = self.limiter
        for _ in range(count):
            limiter.on_success()
        self.pace.admitted += count

    def answered(self, pace: AdaptiveRate, begin: float) -> None:
        """A call begun at ``begin`` (its slot released) got an answer that is not a
        failure (a probe's not-found): counted as a success."""
        self.limiter.on_success()
        pace.on_success(begin)

    def heard(self, error: StoreError, epoch: int, begin: float, pace: AdaptiveRate) -> None:
        """A call (its slot taken in ``epoch``, begun at ``begin``) failed with ``error``:
        a throttle goes to the rates, a transient error is counted. A request given up
        on (``retried_seconds``) was counted where it was retried."""
        if error.retried_seconds:
            return
        if isinstance(error, Throttled):
            self.throttled(epoch, begin, pace)
        elif isinstance(error, Transient):
            self.meter.transient()

    def throttled(self, epoch: int, begin: float, pace: AdaptiveRate) -> None:
        """A call that took its slot in ``epoch`` at ``begin`` was throttled: the adaptive
        rate hears it; adaptive concurrency too until the rate paces the calls (a store
        that limits requests per second is not helped by fewer in flight)."""
        meter = self.meter
        meter.throttled()
        if not self._adaptive:
            return
        unpaced = pace.rate is None
        judged = pace.unpaced
        if pace.on_throttle(begin):
            meter.rate_decreased()
            if unpaced and pace.rate is not None:
                meter.rate_engaged()
                if self._paces is not None and self._learned is None and not self._random:
                    self._learned = pace.rate
                    for other in self._paces.values():
                        other.seed(pace.rate)
                self.limiter.reset()  # the rate paces the calls from now on
        elif pace.rate is None and self.limiter.on_throttle(epoch):
            meter.concurrency_decreased()
        paces = self._paces
        if pace.unpaced != judged and paces is not None:
            self._judged_random(pace, paces)

    def in_line(self, pace: AdaptiveRate) -> InLine:
        """How a call on ``pace`` that was throttled retries (``Retrying``): ``PACED``
        when ``pace`` spaces the calls; ``RANDOM`` when ``pace`` or the in-flight limit
        judged the throttles random (``AdaptiveRate.unpaced``,
        ``AdaptiveLimiter.random_throttles``); ``ALONE`` when the job has at most one
        other call in flight; else ``NO`` (the backoff grows)."""
        if pace.rate is not None:
            return InLine.PACED
        if pace.unpaced > 0 or self.limiter.random_throttles > 0:
            return InLine.RANDOM
        if self.limiter.in_flight <= 1:
            return InLine.ALONE
        return InLine.NO

    def _judged_random(self, judged: AdaptiveRate, paces: dict[str, AdaptiveRate]) -> None:
        """``judged``, a prefix's pace, found the store's throttles random: so are every
        other prefix's (one front throttles them all), each judged over again at a
        crawl otherwise, and the rate learnt from the storm that seeded them was no
        limit. Post: no prefix paced until one engages on its own; none seeded again."""
        self._learned = None
        self._random = True
        for other in paces.values():
            if other is not judged and other.unpaced < judged.unpaced:
                other.unpace()
