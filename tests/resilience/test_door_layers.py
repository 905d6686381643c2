"""The layers the store-call door composes, each against its own contract: the retry
layer (``Retrying``), admission (``Admission``) and statistics (``CallMeter``)."""

from __future__ import annotations

import itertools
import random
import time

import anyio
import msgspec
import pytest

from aiocommit.errors import NotFound, StoreError, Throttled, Transient
from aiocommit.io.admission import Admission
from aiocommit.io.limits import AdaptiveLimiter, AdaptiveRate
from aiocommit.io.metering import CallMeter
from aiocommit.io.operations import StoreOperations
from aiocommit.io.retry import IN_LINE_TRIES, QUICK_WAIT, InLine, RetryPolicy
from aiocommit.io.retrying import Retrying, Tries
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import FileStatus, StoreCapabilities
from aiocommit.stores.faulty import Faults, FaultyStore, Latency
from aiocommit.stores.memory import MemoryStore


class _Clock:
    """A clock that only ``sleep`` moves."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _retrying(clock: _Clock, stats: IOStatistics, **policy: float) -> Retrying:
    rules = RetryPolicy(clock=clock, rng=random.Random(3), **policy)  # type: ignore[arg-type]
    return Retrying(rules, CallMeter(stats), clock.sleep)


async def test_a_paced_throttle_waits_the_base_delay_and_the_next_backoff_starts_afresh() -> None:
    clock, stats = _Clock(), IOStatistics()
    retrying = _retrying(clock, stats, base_delay=0.5, max_delay=30.0)
    tries = Tries(clock(), attempt=3, delay=8.0)
    await retrying.backoff(Throttled("slow down"), tries, in_line=InLine.PACED)
    assert clock.slept == [0.5]  # the base delay
    assert tries.delay == 0.0
    await retrying.backoff(Transient("reset"), tries, in_line=InLine.PACED)  # not a throttle
    assert tries.delay == clock.slept[-1] == 0.5  # from afresh, then it grows
    assert stats.snapshot().counters[S.STORE_IO_RETRY] == 2


async def test_a_retry_after_raises_one_wait_not_the_backoffs_growth() -> None:
    """A throttle with ``Retry-After: 1`` waits 1 s; the waits after it grow from the
    policy's own delays (0.05, then at most 0.15, 0.45 ...), not from 3 s and 9 s."""
    clock, stats = _Clock(), IOStatistics()
    retrying = _retrying(clock, stats, base_delay=0.05, max_delay=20.0)
    tries = Tries(clock())
    for attempt in range(1, 5):
        tries.attempt = attempt
        await retrying.backoff(Throttled("busy", retry_after=1.0), tries)
    assert clock.slept == [1.0, 1.0, 1.0, 1.0]
    tries.attempt = 5
    await retrying.backoff(Throttled("busy"), tries)  # no Retry-After this time
    assert clock.slept[-1] <= 0.05 * 3**4


async def test_an_unpaced_backoff_grows_and_the_error_that_ends_it_carries_the_tries() -> None:
    clock, stats = _Clock(), IOStatistics()
    retrying = _retrying(clock, stats, base_delay=0.1, max_delay=30.0, max_attempts=3)
    tries = Tries(clock())
    error = Throttled("slow down")
    for attempt in (1, 2):
        tries.attempt = attempt
        await retrying.backoff(error, tries)
    assert clock.slept[0] == pytest.approx(0.1) and clock.slept[1] > clock.slept[0]
    tries.attempt = 3
    with pytest.raises(Throttled) as ended:
        await retrying.backoff(error, tries)
    assert ended.value.attempts == 3
    assert ended.value.retried_seconds == pytest.approx(sum(clock.slept))


class _ThrottlingStore(MemoryStore):
    """Answers ``stat`` with the scripted errors first, one per call (``always``: a
    throttle every time, a store that is down)."""

    def __init__(self, errors: list[StoreError], *, always: bool = False) -> None:
        super().__init__("throttling")
        self.errors = errors
        self.always = always
        self.calls = 0

    async def stat(self, path: str) -> FileStatus:
        self.calls += 1
        if self.always:
            raise Throttled("down")
        if self.errors:
            raise self.errors.pop(0)
        return await super().stat(path)


def _door(store: MemoryStore, clock: _Clock, **policy: float) -> StoreOperations:
    rules = RetryPolicy(clock=clock, rng=random.Random(3), **policy)  # type: ignore[arg-type]
    return StoreOperations(store, CommitOptions(), IOStatistics(), retry=rules, sleep=clock.sleep)


async def _judge_random(admission: Admission, pace: AdaptiveRate) -> None:
    """Throttle ``pace`` as a store throttling at random does: a storm engages it, and
    the verdict's calls are throttled as before. Post: unpaced by a verdict."""
    for _ in range(32):
        admission.throttled(0, time.perf_counter(), pace)
    assert pace.rate is not None
    while pace.rate is not None:
        await anyio.sleep(pace.settle * 1.1)
        for _ in range(4):
            admission.throttled(0, time.perf_counter(), pace)
    assert pace.unpaced == 1


async def test_once_judged_random_a_throttled_call_retries_after_its_own_latency() -> None:
    """After the verdict that the store's throttles are random, a throttled call's
    first ``IN_LINE_TRIES`` retries each wait as long as the throttle's answer took
    (here under a millisecond: ``QUICK_WAIT``), not the base delay or a wait grown from
    the last (6.6-20 s tails at 30 %, before); a Retry-After longer than that is waited.
    The later ones wait the base delay, not a growing backoff (a call of several
    requests is throttled several times in a row at random: grown, S3's renames at 30 %
    waited up to 20 s); the attempts bound a store that is down; a transient error backs
    off growing."""
    assert IN_LINE_TRIES == 3
    clock = _Clock()
    throttles: list[StoreError] = [Throttled("busy") for _ in range(3)]
    throttles[1] = Throttled("busy", retry_after=0.5)
    store = _ThrottlingStore([*throttles, Transient("reset"), Transient("reset")])
    await store.write_bytes("/f", b"x")
    door = _door(store, clock, base_delay=0.05, max_delay=20.0)
    await _judge_random(door.admission, door.pace)
    assert door.stats.counters[S.STORE_IO_RATE_ENGAGED] == 1
    assert door.admission.in_line(door.pace) is InLine.RANDOM
    assert (await door.stat("/f")).size == 1
    assert store.calls == 6
    assert clock.slept[:3] == [QUICK_WAIT, 0.5, QUICK_WAIT]
    assert clock.slept[3] == 0.05 and clock.slept[4] > 0.05  # transient: grows afresh
    down = _ThrottlingStore([], always=True)
    down_clock = _Clock()
    door = _door(down, down_clock, base_delay=0.05, max_delay=20.0, max_attempts=8)
    await _judge_random(door.admission, door.pace)
    with pytest.raises(Throttled) as ended:
        await door.stat("/f")
    assert ended.value.attempts == down.calls == 8
    assert down_clock.slept == [QUICK_WAIT] * 3 + [0.05] * 4


async def test_once_the_in_flight_limit_judged_throttles_random_retries_wait_the_base() -> None:
    """The in-flight limit's verdict counts too: a store throttling 30 % at random that
    never engaged the pace (S3 in `bench random-throttle`: no rate decrease, yet its
    longest backoff 3.38 s) retries its throttled calls after the base delay."""
    limiter = AdaptiveLimiter(2048, minimum=4, initial=64)
    draw = random.Random(7)
    while not limiter.random_throttles:
        epochs = [limiter.try_acquire() for _ in range(limiter.limit)]
        for epoch in epochs:
            assert epoch is not None
            limiter.release()
            if draw.random() < 0.3:
                limiter.on_throttle(epoch)
            else:
                limiter.on_success()
    clock = _Clock()
    store = _ThrottlingStore([Throttled("busy") for _ in range(6)])
    await store.write_bytes("/f", b"x")
    rules = RetryPolicy(clock=clock, rng=random.Random(3), base_delay=0.05, max_delay=20.0)
    door = StoreOperations(
        store, CommitOptions(), IOStatistics(), retry=rules, sleep=clock.sleep, limiter=limiter
    )
    assert door.pace.rate is None and door.pace.unpaced == 0
    await door.stat("/f")
    assert clock.slept == [QUICK_WAIT] * 3 + [0.05] * 3


async def test_a_throttled_call_backs_off_growing_while_no_verdict_judged_random() -> None:
    """The same throttles on a store whose pace never judged them random (unpaced, as
    before a storm or on a store that throttles what is in flight), other calls of the
    job in flight: the waits grow."""
    clock = _Clock()
    store = _ThrottlingStore([Throttled("busy") for _ in range(6)])
    await store.write_bytes("/f", b"x")
    door = _door(store, clock, base_delay=0.05, max_delay=20.0)
    for _ in range(2):
        assert door.limiter.try_acquire() is not None  # two calls of the job in flight
    assert door.admission.in_line(door.pace) is InLine.NO
    await door.stat("/f")
    assert clock.slept[0] == 0.05 and max(clock.slept) > 0.05 * 3
    assert all(later <= earlier * 3 for earlier, later in itertools.pairwise(clock.slept))


async def test_a_throttled_call_alone_in_flight_retries_at_the_base_delay_then_grows() -> None:
    """No verdict yet, but nothing else of the job in flight (a serial stage: the plan,
    the lease, ``_SUCCESS``): its first ``IN_LINE_TRIES`` retries wait the base delay,
    not a wait grown from the last (a plan write throttled four times in a row waited
    0.65 s, half an unthrottled commit on the ADLS emulator); then the backoff grows."""
    clock = _Clock()
    store = _ThrottlingStore([Throttled("busy") for _ in range(6)])
    await store.write_bytes("/f", b"x")
    door = _door(store, clock, base_delay=0.05, max_delay=20.0)
    assert door.admission.in_line(door.pace) is InLine.ALONE
    await door.stat("/f")
    assert clock.slept[:4] == [0.05] * 4  # three in line, then the growth's first draw
    assert max(clock.slept) > 0.05 * 3 / 2
    assert all(later <= earlier * 3 for earlier, later in itertools.pairwise(clock.slept))


async def test_an_error_a_request_gave_up_on_and_a_final_answer_are_not_retried() -> None:
    clock, stats = _Clock(), IOStatistics()
    retrying = _retrying(clock, stats)
    given_up = Transient("reset")
    given_up.retried_seconds = 2.0
    with pytest.raises(Transient):
        await retrying.backoff(given_up, Tries(clock(), attempt=1))
    with pytest.raises(NotFound):
        await retrying.backoff(NotFound("gone"), Tries(clock(), attempt=1))
    assert clock.slept == []
    assert given_up.retried_seconds == 2.0  # as the request left it


async def test_a_call_is_admitted_at_once_only_when_no_rate_paces_it() -> None:
    meter = CallMeter(IOStatistics())
    free = Admission(MemoryStore("admit-free"), CommitOptions(concurrency=2), meter)
    assert free.try_enter(free.pace) is not None
    assert free.limiter.in_flight == 1
    free.succeeded(free.pace, True, 0.0)
    assert free.limiter.in_flight == 0 and free.pace.admitted == 1
    rated = Admission(MemoryStore("admit-rated"), CommitOptions(rate_limit=1000.0), meter)
    assert rated.try_enter(rated.pace) is None  # its turn at the rate first: ``enter``
    assert not rated.admits_batches and free.admits_batches


async def test_only_a_recursive_delete_waits_at_the_delete_rate() -> None:
    stats = IOStatistics()
    options = CommitOptions(delete_rate_limit=20.0)
    admission = Admission(MemoryStore("admit-delete"), options, CallMeter(stats))
    waits = []
    for statistic in (S.OP_DELETE_DIR, S.OP_DELETE_DIR, S.OP_DELETE, S.OP_RENAME):
        _, waited = await admission.enter(admission.pace, statistic)
        admission.release(admission.pace)
        waits.append(waited)
    assert waits[0] == 0.0 and waits[1] > 0.0  # 20 a second: the second waits its turn
    assert waits[2:] == [0.0, 0.0]
    limited = stats.snapshot().meanstatistics[S.STORE_IO_RATE_LIMITED + ".mean"]
    assert limited.samples == 1


def test_the_meter_records_a_wait_only_when_there_was_one() -> None:
    stats = IOStatistics()
    meter = CallMeter(stats)
    meter.waited(0.0)
    assert S.STORE_IO_RATE_LIMITED + ".mean" not in stats.snapshot().meanstatistics
    meter.waited(0.25)
    assert stats.snapshot().meanstatistics[S.STORE_IO_RATE_LIMITED + ".mean"].sum == 250.0


async def test_the_pace_counts_the_calls_pending_through_every_ending() -> None:
    """The pace's ``pending`` (calls begun, not ended) is back at 0 after calls that
    succeeded, were throttled and retried, answered a probe with not-found, or failed."""
    memory = MemoryStore("pending")
    faults = Faults(seed=5, throttle_probability=0.4, latency=Latency(fixed=0.001))
    store = FaultyStore(memory, faults)
    ops = StoreOperations(store, CommitOptions(retry_base_delay=0.001), IOStatistics())
    for n in range(20):
        await memory.write_bytes(f"/a/{n}", b"x")
    await memory.mkdirs("/b")
    seen: list[int] = []

    async def rename(n: int) -> None:
        await ops.rename(f"/a/{n}", f"/b/{n}")
        seen.append(ops.pace.pending)

    async with anyio.create_task_group() as group:
        for n in range(20):
            group.start_soon(rename, n)
    assert max(seen) > 0  # calls were pending while others ended
    assert await ops.stat_or_none("/a/missing") is None
    with pytest.raises(NotFound):
        await ops.stat("/a/missing")
    assert store.counts.throttled > 0
    assert ops.pace.pending == 0


class _PrefixedMemoryStore(MemoryStore):
    """A memory store whose rate limits are per key prefix, as S3's."""

    @property
    def capabilities(self) -> StoreCapabilities:
        return msgspec.structs.replace(super().capabilities, rate_per_prefix=True)


async def test_a_prefix_judged_random_unpaces_every_prefix_and_seeds_none() -> None:
    """Per-prefix paces (S3): the first prefix to engage seeds every other one with its
    rate; once its verdict finds the throttles random, the others it seeded are unpaced
    too and a later prefix starts unpaced (before, each went through its own verdict:
    77 rate decreases in one 1,000-file S3 commit throttled 30 % at random)."""
    admission = Admission(
        _PrefixedMemoryStore("prefixes"), CommitOptions(), CallMeter(IOStatistics())
    )
    judged, seeded = admission.pace_for("/a/f"), admission.pace_for("/b/f")
    for _ in range(32):  # a storm, nothing admitted: engaged at the minimum
        admission.throttled(0, time.perf_counter(), judged)
    assert judged.rate is not None and seeded.rate is not None
    while judged.rate is not None:  # throttled at the verdict's rate too: random
        await anyio.sleep(judged.settle * 1.1)
        for _ in range(4):
            admission.throttled(0, time.perf_counter(), judged)
    assert judged.unpaced == 1
    assert seeded.rate is None and seeded.unpaced == 1
    later = admission.pace_for("/c/f")
    assert later.rate is None and later.unpaced == 1
