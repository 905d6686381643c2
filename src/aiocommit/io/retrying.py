"""The retry layer of the store-call door: the backoff between a call's attempts (per
``RetryPolicy``, recorded), and ``RequestRetry``, which retries each request of a call
made of several on its own, in its own turn at the pace."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiocommit.errors import StoreError, Throttled, Transient
from aiocommit.io.admission import Admission
from aiocommit.io.limits import AdaptiveRate
from aiocommit.io.metering import CallMeter
from aiocommit.io.retry import IN_LINE_TRIES, QUICK_WAIT, InLine, RetryPolicy

T = TypeVar("T")


class Tries:
    """One call's attempts so far: how many were made, the backoff before the last one,
    how many were retried in line after a throttle judged random or alone
    (``InLine.RANDOM``, ``InLine.ALONE``), and when the first began (the retry budget's
    start, moved on by the time spent waiting for a turn at a rate: that is not time
    spent retrying)."""

    __slots__ = ("attempt", "delay", "in_line", "started")

    def __init__(self, started: float, attempt: int = 0, delay: float = 0.0) -> None:
        self.started = started
        self.attempt = attempt
        self.delay = delay
        self.in_line = 0


class Retrying:
    """Whether and how long a call waits before its next attempt.

    ``backoff`` either sleeps the policy's delay (recorded) and returns, or re-raises the
    error with ``attempts`` and ``retried_seconds`` set, so callers can tell a call that
    may have been applied although it reported failure. A throttled call retried in
    line (``Admission.in_line``) does not back off further each time: paced, it waits
    the base delay and its turn at the rate again (the rate spaces the calls); where the
    throttles were judged random, its first ``IN_LINE_TRIES`` retries wait as long as the
    throttle's answer took, the later ones the base delay (a random throttle is no rarer
    after a longer wait, and a wait of the store's own latency, not a fixed base, is what
    a commit on a fast store can afford on each of its serial requests; a call of
    several requests fails an attempt when any of them is throttled, so its throttles
    come several in a row); alone in flight, the base delay ``IN_LINE_TRIES`` times, then
    the backoff grows. The store's ``Retry-After`` is a floor for any wait; the policy's
    attempts and budget still bound them all. A ``Retry-After`` raises one wait; the
    backoff grows from its own delays, not from it.
    """

    __slots__ = ("meter", "policy", "sleep")

    def __init__(
        self, policy: RetryPolicy, meter: CallMeter, sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self.policy = policy
        self.meter = meter
        self.sleep = sleep

    def start(self, attempt: int = 0) -> Tries:
        """The tries of a call beginning now (``attempt`` of them made already)."""
        return Tries(self.policy.clock(), attempt)

    async def backoff(
        self,
        error: StoreError,
        tries: Tries,
        *,
        in_line: InLine = InLine.NO,
        took: float = 0.0,
    ) -> None:
        """Sleep before attempt ``tries.attempt + 1``, or re-raise ``error``. A throttle
        retried ``in_line`` waits as that says (``took``: the seconds the throttled
        attempt took), and the next growing backoff starts afresh. A request of the
        call that was retried on its own and given up already (``error.retried_seconds``)
        is not retried again."""
        if error.retried_seconds:
            raise error
        policy = self.policy
        if not isinstance(error, Throttled) or (
            in_line is InLine.ALONE and tries.in_line >= IN_LINE_TRIES
        ):
            in_line = InLine.NO
        wait = None
        if in_line is InLine.RANDOM and tries.in_line < IN_LINE_TRIES:
            wait = min(policy.base_delay, max(QUICK_WAIT, took))
        elif in_line is not InLine.NO:
            wait = policy.base_delay
        delay = policy.next_delay(error, tries.attempt, tries.delay, tries.started, wait=wait)
        if delay is None:
            error.attempts = tries.attempt
            error.retried_seconds = max(1e-9, policy.clock() - tries.started)
            raise error
        if in_line is InLine.NO:
            # the store's Retry-After is a floor for this wait, not a step of the
            # backoff's growth: a throttle at random with Retry-After: 1 would otherwise
            # start the next wait's range at 3 s, the one after at 9 s (a long tail for
            # one unlucky call)
            tries.delay = min(delay, policy.growth_bound(tries.delay))
        else:
            tries.delay = 0.0
            tries.in_line += 1
        self.meter.backoff(delay)
        await self.sleep(delay)


class RequestRetry:
    """``REQUEST_RETRY`` for one store call made of several requests.

    The first request of each attempt rides on the call's turn at the pace (the door
    sets ``pace``, ``epoch`` and ``first`` per attempt); every other one takes its own
    turn, ahead of calls waiting to begin (a call begun finishes first). Each is counted
    as admitted when answered, and retried on its own when throttled (a throttled
    request was not applied, unless the throttle says it ``maybe_applied``) or, with
    ``transient``, on any throttle or transient error (where repeating a request is
    safe: listings, deletes, markers). An error a request gives
    up on carries ``retried_seconds``: the call does not retry it again.
    """

    __slots__ = ("admission", "epoch", "first", "pace", "retrying", "transient")

    def __init__(self, admission: Admission, retrying: Retrying, *, transient: bool) -> None:
        self.admission = admission
        self.retrying = retrying
        self.transient = transient
        self.pace: AdaptiveRate = admission.pace
        self.epoch = 0
        self.first = True

    def __call__(self, request: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        ride, self.first = self.first, False
        return self._request(request, ride)

    async def _request(self, request: Callable[[], Awaitable[T]], ride: bool) -> T:
        """One request of the call in progress (which holds the slot), retried on its
        own; it ``ride``s on the call's turn at the pace when it is the call's first."""
        pace = self.pace
        retrying = self.retrying
        meter = retrying.meter
        tries = retrying.start()
        while True:
            tries.attempt += 1
            if not ride and pace.rate is not None:
                # ahead of calls waiting to begin: a call begun finishes first
                waited = await pace.acquire(urgent=True)
                if waited:
                    meter.waited(waited)
                    tries.started += waited
            begin = time.perf_counter()
            try:
                result = await request()
            except StoreError as error:
                maybe_applied = isinstance(error, Throttled | Transient) and error.maybe_applied
                if maybe_applied and not self.transient:
                    raise  # the call's own retry decides (it may have been applied)
                if isinstance(error, Throttled):
                    self.admission.throttled(self.epoch, begin, pace)
                    ride = False
                elif isinstance(error, Transient):
                    if not self.transient:
                        raise  # the call's own retry decides
                    meter.transient()
                    ride = False
                else:
                    pace.on_success(begin)  # an answer (not found, a conflict)
                await retrying.backoff(
                    error,
                    tries,
                    in_line=self.admission.in_line(pace),
                    took=time.perf_counter() - begin,
                )
                continue
            pace.on_success(begin)  # counted when answered: the rate measures the store
            return result
