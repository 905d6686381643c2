"""Concurrency and rate limits shared by the stages of a job, and by the jobs of a client.

``AdaptiveLimiter`` is the in-flight limit: a semaphore whose size follows AIMD
when enabled — starting at 64 and grown by one per success until the first throttle (slow
start), cut by 30% when the store throttles, grown by one after a window of successes.
``AdaptiveRate`` paces the job's requests at what the store admits once the store
throttles a large share of them (a store whose limit is requests per second, not requests
in flight). ``RateLimiter`` caps operations per second at a configured rate. ``Limits``
holds the limiter and the rates that every job of one client shares.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from aiocommit.options import LimitOptions

if TYPE_CHECKING:
    from aiocommit.options import CommitOptions
    from aiocommit.stores.base import StoreCapabilities


#: calls finished in a window before its throttled share can cut the in-flight limit
#: (over fewer, a share drawn at random is noise)
CUT_CALLS = 16
#: cuts in a run after which the throttled share is compared with the run's first
RANDOM_CUTS = 3
#: the part of the run's first share that the share since its first cut keeps when it
#: did not follow the cuts (a limit in flight or per second throttles next to nothing
#: once cut to a third, unless it throttled most calls: the adaptive rate's case)
SHARE_KEPT = 0.3
#: once a run is judged random, the cutting threshold: at least ``RANDOM_THRESHOLD``
#: (a share that high is the adaptive rate's), and ``RANDOM_MARGIN`` above the run's
#: highest share, over windows of ``RANDOM_CUT_CALLS`` calls or more (a share measured
#: as soon as it crosses the threshold is biased towards it)
RANDOM_THRESHOLD = 0.5
RANDOM_MARGIN = 0.2
RANDOM_CUT_CALLS = 64


class AdaptiveLimiter:
    """An in-flight limit that backs off when the store throttles.

    The limit is multiplied by ``decrease_factor`` (not below ``minimum``) when throttles
    make up at least ``throttle_threshold`` of the calls finished in the current window
    (at least two of them, of ``CUT_CALLS`` or more) — a store that sheds load — but not
    for a stray throttle, and only for calls that started after the previous decrease,
    so one burst of throttles that were in flight together counts once. Every ``limit``
    successes grow it by one, up to ``maximum``.

    Cuts with no quiet window between them are a run. A store limited by what is in
    flight throttles a smaller share after each cut; when, ``RANDOM_CUTS`` cuts into a
    run, the share since its first cut is still ``SHARE_KEPT`` of its first, the throttles do
    not follow the limit (a store throttling a share of requests at random): the limit
    goes back to where the run began, slow start resumes (a throttle at random ended
    it), and ``throttle_threshold`` rises above the shares
    seen (``RANDOM_THRESHOLD`` at least, over ``RANDOM_CUT_CALLS`` calls), so that share
    cuts no more (``random_throttles`` counts these judgements).

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
        initial: int = 64,
    ):
        self.maximum = maximum
        self.decrease_factor = decrease_factor
        self.throttle_threshold = throttle_threshold
        self._window_ok = 0
        self._window_throttled = 0
        self.minimum = min(minimum, maximum)
        self.adaptive = adaptive
        #: slow start: from ``initial``, one more per success (doubling per round trip)
        #: until the first throttle, so a rate-limited store meets only the calls in
        #: flight then, not ``maximum`` at once
        self._slow_start = adaptive and initial < maximum
        self._limit = min(maximum, initial) if adaptive else maximum
        self._in_flight = 0
        self._waiters: deque[anyio.Event] = deque()
        self._epoch = 0
        self._successes = 0
        self.peak_in_flight = 0
        #: the run of cuts: the limit before its first cut (None: no run), its first
        #: cut's share and highest share, its cuts, and the calls finished and throttled
        #: since its first cut (any epoch)
        self._run_limit: int | None = None
        self._run_share = 0.0
        self._run_highest = 0.0
        self._run_cuts = self._run_finished = self._run_throttled = 0
        #: runs judged not to follow the limit (throttles at random)
        self.random_throttles = 0
        #: calls finished in a window before its share can cut the limit
        self._cut_calls = CUT_CALLS

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def reset(self) -> None:
        """Back to ``maximum`` (another control took over: the adaptive rate)."""
        self._slow_start = False
        self._epoch += 1
        self._successes = 0
        self._window_ok = self._window_throttled = 0
        self._run_limit = None
        self._set_limit(self.maximum)

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
        if self._run_limit is not None:
            self._run_finished += 1
        if self._slow_start:
            self._window_ok += 1
            self._limit += 1
            if self._limit >= self.maximum:
                self._limit = self.maximum
                self._slow_start = False
            self._wake()
            return
        self._window_ok += 1
        if self._window_ok + self._window_throttled > max(64, 4 * self._limit):
            self._window_ok = self._window_throttled = 0  # a fresh window
            self._run_limit = None  # a window without a cut ends a run
        if self._limit >= self.maximum:
            return
        self._successes += 1
        if self._successes >= self._limit:
            self._successes = 0
            self._set_limit(min(self.maximum, self._limit + 1))

    def on_throttle(self, epoch: int) -> bool:
        """Record a throttle of a call that started in ``epoch``; True if the limit dropped."""
        self._slow_start = False
        if self._run_limit is not None:  # every call finished since the run's first cut
            self._run_finished += 1
            self._run_throttled += 1
        if not self.adaptive or epoch != self._epoch:
            return False
        self._window_throttled += 1
        finished = self._window_ok + self._window_throttled
        if (
            self._window_throttled < 2
            or finished < self._cut_calls
            or self._window_throttled < self.throttle_threshold * finished
        ):
            return False
        share = self._window_throttled / finished
        if self._run_limit is None:
            self._run_limit, self._run_share, self._run_highest = self._limit, share, share
            self._run_cuts = self._run_finished = self._run_throttled = 0
        self._epoch += 1
        self._successes = 0
        self._window_ok = self._window_throttled = 0
        self._run_cuts += 1
        self._run_highest = max(self._run_highest, share)
        if (
            self._run_cuts > RANDOM_CUTS
            and self._run_throttled >= SHARE_KEPT * self._run_share * self._run_finished
        ):
            # cutting did not cut the share: not a limit on calls in flight
            self.random_throttles += 1
            self.throttle_threshold = min(
                0.95, max(RANDOM_THRESHOLD, self._run_highest + RANDOM_MARGIN)
            )
            self._cut_calls = RANDOM_CUT_CALLS
            restored = max(self._limit, self._run_limit)
            self._run_limit = None
            # slow start again: the first throttle that ended it was one of these
            self._slow_start = restored < self.maximum
            self._set_limit(restored)
            return False
        new_limit = max(self.minimum, int(self._limit * self.decrease_factor))
        if new_limit == self._limit:
            return False
        self._set_limit(new_limit)
        return True


#: the adaptive rate's success counts are sampled this often (while paced, or throttled)
MARK_SECONDS = 0.05
#: and measured over this long at a decrease, and over at least this many successes
MEASURE_SECONDS = 0.2
MEASURE_CALLS = 20
MEASURE_SECONDS_MOST = 1.0
#: calls finished in a window before its throttled share can engage the rate (a store
#: throttling at random seldom throttles half of so many)
ENGAGE_CALLS = 32
#: seconds after a decrease before the rate probes above the ceiling; each probe that
#: finds the ceiling where it was (within ``SAME_CEILING``) doubles the wait, up to
#: ``PROBE_SECONDS_MOST``: every probe that finds the limit costs a few throttles
PROBE_SECONDS = 2.0
PROBE_SECONDS_MOST = 16.0
SAME_CEILING = 0.1
#: share of the ceiling the rate recovers to after a decrease (below the store's limit:
#: the bucket refills, so a burst of retries or a jittered call is not throttled)
RECOVER_TO = 0.95
#: the decreases since engaging (or since the store last admitted the rate) are a run;
#: once they took the rate to ``RANDOM_FALL`` of the highest success rate over a second
#: in the run, the calls sent from then on, held at that rate, are the verdict's: a
#: rate-limited store whose limit fell less than that admits them (only probes would be
#: throttled, and probes wait for the verdict). ``RANDOM_THROTTLES`` of them throttled
#: before ``RANDOM_CALLS`` ended mean throttles that do not follow the rate (a store
#: throttling at random); ``RANDOM_CALLS`` ended with fewer end the run
RANDOM_FALL = 0.125
RANDOM_SHARE = 0.1
RANDOM_THROTTLES = 4
RANDOM_CALLS = 64
#: calls sent after a decrease settled that end a run when the store admitted them (less
#: than ``RANDOM_SHARE`` throttled): a later fall is measured from the rate they went at
ADMITTED_CALLS = 32


class AdaptiveRate:
    """Requests per second that follow what a rate-limited store admits.

    Unpaced (``rate`` None, nothing to wait for) until the store throttles at least
    ``engage_share`` of the calls finished since the window's first throttle (at least
    ``ENGAGE_CALLS`` finished and ``engage_throttles`` throttles; successes before the
    first throttle do not dilute a storm): a store that limits requests per second. Once
    throttles were judged not to follow the rate (``unpaced``), the calls still
    ``pending`` count too: a throttle is answered at once and a success after the store's
    work, so of calls begun together the throttled ones finish first, and the pending
    calls are the successes not yet back, counted however long they take. Then
    every call waits its turn at ``rate`` requests a second (first come, first served; a
    changed rate applies to calls waiting).

    Decrease: two throttles (and eight calls, or four throttles) of calls started at least
    ``settle`` seconds after the last change (the store's own bucket may still be empty
    from before it) set the rate to ``decrease_factor`` of what the store admitted: the
    success rate over the latest ``MEASURE_SECONDS`` and ``MEASURE_CALLS``, and no more
    than the share of the turns granted since the change settled that were not
    throttled (at most the rate, at least half of it), and remember that as the
    ceiling. Increase, every ``tick``
    seconds at least ``hold`` after a decrease: ``grow`` per tick from engaging to
    the first decrease (the rate measured then may be low); ``recover`` per tick up to
    ``RECOVER_TO`` of the ceiling; then, ``PROBE_SECONDS`` after the decrease (doubled by
    each probe that found the same ceiling), beyond it (the store may have loosened):
    by ``probe`` of that per tick, more the longer the store admits it (``p + p²/20``
    ticks' worth after ``p`` ticks: +8 % after 2 s, +35 % after 5 s). Growth is at
    most one tick's at a time: a rate not used for a while was not shown to be too low.
    A probe that finds the store's limit goes back to ``decrease_factor`` of the ceiling
    (or of the success rate, if higher): the ceiling falls only at a decrease below it.
    The rate never falls below ``minimum``.
    The decreases since engaging are a run; ``ADMITTED_CALLS`` calls sent after a
    decrease settled and throttled less than ``RANDOM_SHARE`` (the store admitted the
    rate) end it. Once the decreases took the rate to ``RANDOM_FALL`` of the run's
    highest success rate over a second (a reference the pace's own overshoot does not
    raise; a store's bucket of half a second's requests adds at most half its limit)
    or to ``minimum``, the rate is held there, probes wait, and the calls begun after
    that settled are the verdict's, each outcome counted for the rate its call began
    at (``on_success``, ``on_throttle``): ``RANDOM_THROTTLES`` of them throttled before
    ``RANDOM_CALLS`` ended mean throttles that do not follow the rate (a store
    throttling at random): unpaced again, and ``engage_share`` raised by a quarter;
    ``RANDOM_CALLS`` ended with fewer end the run (the next decrease begins another).
    A rate-limited store is judged random only if its limit fell below ``RANDOM_FALL``
    of that reference within a run. Counts only, no timer: the verdict does not move
    with the machine's speed.
    ``seed(rate)``: start paced at a rate learnt elsewhere (another prefix of the store).

    Callers report each success (``on_success``) and each throttle (``on_throttle``)
    with the clock reading when that call started.
    """

    def __init__(
        self,
        *,
        minimum: float = 1.0,
        engage_share: float = 0.5,
        engage_throttles: int = 4,
        engage_seconds: float = 0.1,
        settle: float = 0.1,
        decrease_factor: float = 0.9,
        recover: float = 0.02,
        probe: float = 0.002,
        grow: float = 0.05,
        tick: float = 0.1,
        hold: float = 0.3,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ):
        self.minimum = minimum
        self.engage_share = engage_share
        self.engage_throttles = engage_throttles
        self.engage_seconds = engage_seconds
        self.settle = settle
        self.decrease_factor = decrease_factor
        self.recover = recover
        self.probe = probe
        self.grow = grow
        self.tick = tick
        self.hold = hold
        self._clock = clock
        self._sleep = sleep
        #: requests/s the job is paced at; None: unpaced
        self.rate: float | None = None
        self.ceiling = 0.0
        #: successes reported (the caller increments it)
        self.admitted = 0
        #: calls begun and not yet ended (the caller keeps it)
        self.pending = 0
        self.decreases = 0
        now = clock()
        self._changed = now  # when the rate last dropped (or the window began)
        self._window_admitted = 0
        self._throttles = 0  # throttles of calls started after ``_changed``
        self._marks: deque[tuple[float, int]] = deque([(now, 0)], maxlen=64)
        self._first = (now, 0)  # unpaced: when the window's first throttle came, admitted then
        self._adjusted = now
        self._probing = 0.0  # ticks spent probing above the ceiling since the last decrease
        self._found = True  # False from engaging until the first decrease while paced
        #: the rate at the current run's first decrease (None: no run)
        self._run_rate: float | None = None
        #: calls begun from this clock reading on are the verdict's (None: not yet)
        self._verdict_from: float | None = None
        self._verdict_ok = 0  # of those, the successes and the throttles so far
        self._verdict_throttled = 0
        self._settled_ok = 0  # successes of calls begun after the last change settled
        self._granted = 0  # turns granted at the rate since the last change settled
        #: times the throttles were judged not to follow the rate
        self.unpaced = 0
        self._probe_wait = PROBE_SECONDS
        # pacing: a token bucket (``burst``: 50 ms of ``rate``) and the calls waiting
        self._credit = 0.0
        self._refilled = now
        self._queue: deque[anyio.Event] = deque()
        #: calls' further requests waiting (``acquire(urgent=True)``): served before
        #: ``_queue``, so a call begun finishes before more calls begin
        self._urgent: deque[anyio.Event] = deque()
        self._holder: anyio.Event | None = None  # the waiter whose turn is next

    def on_success(self, started: float) -> None:
        """A call that started at ``started`` succeeded (or got an answer)."""
        self.admitted += 1
        if self._run_rate is None:
            return
        verdict_from = self._verdict_from
        if verdict_from is not None:
            if started >= verdict_from:
                self._verdict_ok += 1
                if self._verdict_ok + self._verdict_throttled >= RANDOM_CALLS:
                    self._end_run()  # the throttles followed the rate: probe again
        elif started >= self._changed + self.settle:
            self._settled_ok += 1
            throttles = self._throttles
            ended = self._settled_ok + throttles
            if ended >= ADMITTED_CALLS and throttles < RANDOM_SHARE * ended:
                # the store admits the rate the decreases came to: a later decrease
                # (a probe, a store that tightened) is measured against this rate
                self._end_run()

    def on_throttle(self, started: float) -> bool:
        """A call that started at ``started`` was throttled; True if the rate dropped."""
        now = self._clock()
        self._mark(now)
        verdict_from = self._verdict_from
        if verdict_from is not None and started >= verdict_from:
            self._verdict_throttled += 1
            ended = self._verdict_ok + self._verdict_throttled
            throttled = self._verdict_throttled
            if throttled >= RANDOM_THROTTLES:
                # sent far below what the store admitted, throttled as before: a store
                # whose throttles do not follow the rate, not a rate limit
                self._unpace(now)
                return False
            if ended >= RANDOM_CALLS:
                self._end_run()  # the throttles followed the rate
        if started < self._changed + (self.settle if self.rate is not None else 0.0):
            return False  # sent before the last change settled: already accounted for
        self._throttles += 1
        if self.rate is None:
            return self._engage(now)
        throttles = self._throttles
        finished = self.admitted - self._window_admitted + throttles
        if throttles < 2 or (finished < 8 and throttles < 4):
            return False
        rate = self.rate
        if self._verdict_from is not None:
            return False  # the verdict's calls all go at the rate it began at
        # the run's reference: the highest rate the store admitted in it, over a second
        self._run_rate = max(self._run_rate or 0.0, self._sustained(now))
        # what the store admitted: the success rate measured, and no more than the share
        # of the turns granted since the change settled that were not throttled (a
        # store limiting requests a second throttles ``1 - limit / rate`` of them, one
        # throttling at random its share at any rate; the successes measured lag the
        # rate by a success's time, and at a few a second a measure is mostly noise)
        granted = max(self._granted, throttles)
        admitted = max(min(rate, self._measured(now), rate * (1 - throttles / granted)), rate / 2)
        if self._found and rate > self.ceiling * RECOVER_TO:
            # a probe above the ceiling found the store's limit: back below the ceiling
            # the rate held without throttles, not to a measure over a second or less
            # (noisy at a few requests a second, low after a stall of the caller's
            # loop); a store that tightened meanwhile throttles on there, and the next
            # decrease measures what it admits
            admitted = max(admitted, min(rate, self.ceiling))
        self._decrease(now, admitted)
        self._found = True
        run_rate, fallen = self._run_rate, self.rate
        if (
            run_rate is not None
            and self._verdict_from is None
            and fallen is not None
            and fallen <= max(RANDOM_FALL * run_rate, self.minimum)
        ):
            # the verdict's calls go at that fraction of the reference (or the
            # minimum), however far the decrease took the rate below it
            self.rate = max(fallen, RANDOM_FALL * run_rate)
            self._verdict_from = now + self.settle
            self._verdict_ok = self._verdict_throttled = 0
        return True

    def _end_run(self) -> None:
        self._run_rate = self._verdict_from = None

    def unpace(self) -> None:
        """Take a verdict reached elsewhere (another prefix's pace on the same store): its
        throttles do not follow the rate. Post: unpaced, ``engage_share`` raised by a
        quarter, ``unpaced`` counted (later storms count the calls pending)."""
        self._unpace(self._clock())

    def _unpace(self, now: float) -> None:
        """Throttles that do not follow the rate: unpaced again, and slower to engage."""
        self.rate = None
        self.engage_share = min(0.95, self.engage_share + 0.25)
        self._changed, self._window_admitted, self._throttles = now, self.admitted, 0
        self._end_run()
        self.unpaced += 1

    def _mark(self, now: float) -> None:
        if now - self._marks[-1][0] >= MARK_SECONDS:
            self._marks.append((now, self.admitted))

    def _measured(self, now: float) -> float:
        """Successes a second over the latest ``MEASURE_SECONDS`` and ``MEASURE_CALLS``, or
        ``MEASURE_SECONDS_MOST`` (a slow store: what it admits now, not seconds ago)."""
        when, admitted = self._marks[0]
        for mark in reversed(self._marks):
            age = now - mark[0]
            if age >= MEASURE_SECONDS and (
                self.admitted - mark[1] >= MEASURE_CALLS or age >= MEASURE_SECONDS_MOST
            ):
                when, admitted = mark
                break
        return (self.admitted - admitted) / max(now - when, 1e-3)

    def _sustained(self, now: float) -> float:
        """Successes a second over the latest ``MEASURE_SECONDS_MOST`` or more (as if that
        long when the marks are younger): a store's bucket of half a second's requests,
        full before a storm, adds at most half of its limit to it."""
        when, admitted = self._marks[0]
        for mark in reversed(self._marks):
            if now - mark[0] >= MEASURE_SECONDS_MOST:
                when, admitted = mark
                break
        return (self.admitted - admitted) / max(now - when, MEASURE_SECONDS_MOST)

    def _recent(self, now: float, first: float, admitted_then: int) -> tuple[float, int]:
        """The newest mark at least ``MEASURE_SECONDS_MOST`` old and not before ``first``
        (when, admitted then), else ``(first, admitted_then)``."""
        for mark in reversed(self._marks):
            if mark[0] < first:
                break
            if now - mark[0] >= MEASURE_SECONDS_MOST:
                return mark
        return first, admitted_then

    def _engage(self, now: float) -> bool:
        """Unpaced: start pacing once enough of the window's calls were throttled, at once
        (every call sent unpaced meanwhile would be throttled too), at the rate of the
        successes and the calls still pending since the window's first throttle, or over
        the latest ``MEASURE_SECONDS_MOST`` when that came earlier (over at least
        ``engage_seconds``; a storm at a stage's start comes before any success of a
        slow store, which it paced at ``minimum``) or of the successes since the window
        began, whichever is larger (too high costs a few throttles and decreases, each at
        most a halving; too low, time: the rate grows fast until the first decrease)."""
        if self._throttles == 1:
            self._first = (now, self.admitted)
        first, admitted_then = self._first
        finished = self.admitted - admitted_then + self._throttles
        if finished > 512 and self._throttles < self.engage_share * finished:
            self._changed, self._window_admitted, self._throttles = now, self.admitted, 0
            return False  # a fresh window: old successes do not dilute new throttles
        if (
            self._throttles < self.engage_throttles
            or finished < ENGAGE_CALLS
            or self._throttles < self.engage_share * (finished + self._pending())
        ):
            return False
        # over the latest second or more of the window: a window whose first throttle
        # came stages ago, at a serial stage's few calls, averages them in, and the
        # parallel stage whose storm engaged it was paced at that crawl
        since, admitted_since = self._recent(now, first, admitted_then)
        admitted = max(
            (self.admitted - admitted_since + max(0, self.pending))
            / max(now - since, self.engage_seconds),
            (self.admitted - self._window_admitted) / max(now - self._changed, 1e-3),
        )
        self._credit, self._refilled = 0.0, now
        self._decrease(now, admitted)
        self._end_run()
        self._found = False  # measured in a storm of throttles: maybe low; grow fast
        return True

    def _pending(self) -> int:
        """The calls still pending that the engaging share counts: none until throttles
        were judged not to follow the rate (``unpaced``). A store limiting requests a
        second throttles its calls' retries and the calls begun in their freed slots at
        once, while its admitted calls are pending: counted, it was paced rounds later
        (docs/performance.md, "The pace counts the calls pending")."""
        return max(0, self.pending) if self.unpaced else 0

    def seed(self, rate: float) -> None:
        """Unpaced: start paced at ``rate`` (learnt on another prefix of the store), grown
        fast until this prefix's store throttles (its limit may be higher)."""
        if self.rate is not None:
            return
        now = self._clock()
        self._credit, self._refilled = 0.0, now
        self._decrease(now, rate / self.decrease_factor)
        self._end_run()
        self._found = False

    def _decrease(self, now: float, admitted: float) -> None:
        ceiling = max(self.minimum, admitted)
        if self._found and self.rate is not None:
            # a probe (or a store change) found the ceiling: where it was, probe later
            same = abs(ceiling - self.ceiling) <= SAME_CEILING * self.ceiling
            self._probe_wait = (
                min(PROBE_SECONDS_MOST, self._probe_wait * 2) if same else PROBE_SECONDS
            )
        self.ceiling = ceiling
        rate = max(self.minimum, admitted * self.decrease_factor)
        self.rate = rate if self.rate is None else min(self.rate, rate)
        self._changed, self._window_admitted, self._throttles = now, self.admitted, 0
        self._settled_ok = self._granted = 0
        self._adjusted = now
        self._probing = 0.0
        self.decreases += 1

    def _adjust(self, now: float) -> None:
        self._mark(now)
        rate = self.rate
        if rate is None or now - self._adjusted < self.tick:
            return
        # at most one tick's growth at once: a rate left unused for a while (calls backing
        # off, a stage between others) has not been shown to be too low
        ticks = min(1.0, (now - self._adjusted) / self.tick)
        self._adjusted = now
        if now - self._changed < self.hold:
            return
        recovered = self.ceiling * RECOVER_TO
        if not self._found:
            rate *= (1 + self.grow) ** ticks
        elif rate < recovered:
            rate = min(recovered, rate * (1 + self.recover) ** ticks)
        elif now - self._changed < self._probe_wait or self._verdict_from is not None:
            return  # not yet time to probe, or the calls now sent are the verdict's
        else:  # probing: faster the longer the store has not throttled
            self._probing += ticks
            probing = self._probing
            rate = max(rate, recovered * (1 + self.probe * (probing + probing**2 / 20)))
        self.rate = rate

    def _grant(self, now: float) -> None:
        """A turn granted at ``now``: counted once the last change settled."""
        if now >= self._changed + self.settle:
            self._granted += 1

    def _take(self, now: float, rate: float) -> float:
        """Take a token if there is one (0.0), else the seconds until there is."""
        burst = max(1.0, rate * 0.05)
        self._credit = min(burst, self._credit + (now - self._refilled) * rate)
        self._refilled = now
        if self._credit >= 1.0:
            self._credit -= 1.0
            return 0.0
        return (1.0 - self._credit) / rate

    async def acquire(self, *, urgent: bool = False) -> float:
        """Wait for this call's turn at ``rate``; the seconds waited (0 when unpaced).
        Calls queue first come, first served, ``urgent`` ones (a call's further requests)
        ahead of the rest; only the waiter whose turn is next sleeps (at most a ``tick``
        at a time, so a changed rate applies at once)."""
        rate = self.rate
        if rate is None:
            return 0.0
        now = self._clock()
        if self._holder is None:  # nobody waiting
            self._adjust(now)
            rate = self.rate
            if rate is None:
                return 0.0
            if self._take(now, rate) == 0.0:
                self._grant(now)
                return 0.0
        turn = anyio.Event()
        line = self._urgent if urgent else self._queue
        line.append(turn)
        if self._holder is None:
            self._holder = turn
            turn.set()
        begin = now
        try:
            await turn.wait()
            while True:
                now = self._clock()
                self._adjust(now)
                rate = self.rate
                if rate is None:
                    break
                short = self._take(now, rate)
                if short == 0.0:
                    self._grant(now)
                    break
                await self._sleep(min(short, self.tick))
        finally:
            line.remove(turn)  # the first in its line, unless cancelled while waiting
            if self._holder is turn:
                following = self._urgent or self._queue
                self._holder = following[0] if following else None
                if self._holder is not None:
                    self._holder.set()
        return self._clock() - begin


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


class Limits:
    """The limits every job of a client shares: the in-flight limit (``limiter``), and
    the configured rates of store calls (``rate``) and of directory deletes
    (``delete_rate``). One object, passed on, is how clients share them
    (``Client(..., limits=other.limits)``); nothing is shared through module state.
    """

    __slots__ = ("delete_rate", "limiter", "rate")

    def __init__(
        self,
        limiter: AdaptiveLimiter,
        *,
        rate: RateLimiter | None = None,
        delete_rate: RateLimiter | None = None,
    ):
        self.limiter = limiter
        self.rate = rate
        self.delete_rate = delete_rate

    @classmethod
    def for_options(
        cls,
        options: CommitOptions,
        max_in_flight: int | None = None,
        *,
        loop_in_flight: int | None = None,
    ) -> Limits:
        """Limits as ``options`` set them (``concurrency``, ``min_concurrency``,
        ``adaptive_concurrency``, ``rate_limit``, ``delete_rate_limit``), the in-flight
        limit capped at the store's ``max_in_flight`` and at ``loop_in_flight``
        (``host_loop_in_flight``) when given."""
        return cls(
            AdaptiveLimiter(
                in_flight_ceiling(options, max_in_flight, loop_in_flight),
                minimum=options.min_concurrency,
                adaptive=options.adaptive_concurrency,
            ),
            rate=RateLimiter(options.rate_limit) if options.rate_limit else None,
            delete_rate=(
                RateLimiter(options.delete_rate_limit) if options.delete_rate_limit else None
            ),
        )


def in_flight_ceiling(
    options: CommitOptions, max_in_flight: int | None, loop_in_flight: int | None
) -> int:
    """The in-flight limit at its widest: ``concurrency`` capped at the store's
    ``max_in_flight`` and at ``loop_in_flight`` (``host_loop_in_flight``) when given."""
    return min(cap for cap in (options.concurrency, max_in_flight, loop_in_flight) if cap)


def host_loop_in_flight(
    options: CommitOptions, capabilities: StoreCapabilities, *, host_loop: bool = True
) -> int | None:
    """The store's ``loop_in_flight`` where it caps the job's calls in flight, else None.

    It does where the calls run on an event loop the job shares with its host
    (``host_loop``: not a rename worker process, which exists to rename) at
    ``processes=1``, with ``concurrency`` at its default: a ``concurrency`` set to any
    other value wins."""
    if not host_loop or options.processes != 1:
        return None
    if options.concurrency != LimitOptions.concurrency:
        return None
    return capabilities.loop_in_flight
