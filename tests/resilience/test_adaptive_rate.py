"""The adaptive rate in the store-call door: what happens around the moment it engages,
to calls throttled while paced, and to a rate left unused (issue 22's throttled commit)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import pytest

from aiocommit.errors import Throttled
from aiocommit.io.limits import AdaptiveRate
from aiocommit.io.operations import StoreOperations
from aiocommit.io.retry import RetryPolicy
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.memory import MemoryStore


def _engage(rate: AdaptiveRate, started: float) -> None:
    """Throttles enough for an unpaced rate to engage (nothing admitted: the minimum)."""
    for _ in range(64):
        if rate.on_throttle(started):
            return
    raise AssertionError("the rate did not engage")


async def test_calls_queued_for_a_slot_wait_their_turn_once_the_rate_engages() -> None:
    """Calls that passed the (then unpaced) rate and queue for an in-flight slot do not
    all reach the store when the rate engages and frees the slots: each waits its turn.
    (Before, every call queued for a slot went at once: the storm at the start of a
    throttled commit's rename stage.)"""
    ops = StoreOperations(MemoryStore("engage"), CommitOptions(concurrency=1), IOStatistics())
    holding = anyio.Event()
    release = anyio.Event()
    reached = 0

    async def first() -> None:
        holding.set()
        await release.wait()

    async def queued() -> None:
        nonlocal reached
        reached += 1

    async def through_the_door(name: str, function: Callable[[], Awaitable[None]]) -> None:
        await ops.call(name, function)

    async with anyio.create_task_group() as group:
        group.start_soon(through_the_door, "op_first", first)
        await holding.wait()
        for _ in range(20):
            group.start_soon(through_the_door, "op_queued", queued)
        await anyio.sleep(0.05)  # all 20 wait for the one slot
        assert ops.limiter.in_flight == 1 and reached == 0
        _engage(ops.pace, time.perf_counter())
        rate = ops.pace.rate
        assert rate is not None and rate <= 1.0
        began = time.perf_counter()
        release.set()
        await anyio.sleep(0.3)
        elapsed = time.perf_counter() - began
        # at ``rate`` a second, however slow this process was: not the 20 at once
        assert reached <= 2 + elapsed * rate, (reached, elapsed)
        group.cancel_scope.cancel()


async def test_a_paced_call_that_is_throttled_retries_in_line_without_growing_backoff() -> None:
    """Once paced, a throttled call waits the base delay (or the store's Retry-After),
    then its turn at the rate again: its backoff does not grow with each throttle (that
    left calls waiting up to ``retry_max_delay`` while the rate had room: a long tail)."""
    policy = RetryPolicy(max_attempts=20, base_delay=0.001, max_delay=5.0)
    stats = IOStatistics()
    ops = StoreOperations(MemoryStore("in-line"), CommitOptions(), stats, retry=policy)
    _engage(ops.pace, time.perf_counter())
    ops.pace.rate = 10_000.0  # paced, but not slow
    calls = 0

    async def throttled_six_times() -> str:
        nonlocal calls
        calls += 1
        if calls <= 6:
            raise Throttled("slow down")
        return "done"

    assert await ops.call("op_x", throttled_six_times) == "done"
    backoff = stats.snapshot().meanstatistics[S.STORE_IO_BACKOFF + ".mean"]
    assert backoff.samples == 6
    assert backoff.sum == pytest.approx(6 * policy.base_delay * 1000)  # each the base delay, ms


async def test_a_rate_left_unused_does_not_grow_while_idle() -> None:
    """Growth is at most one tick's per adjustment: a rate not used for a minute (calls
    backing off, another stage) comes back where it was, not a million times higher
    (which unpaced the calls in effect, and a storm followed)."""
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    rate = AdaptiveRate(clock=lambda: now[0], sleep=sleep)
    _engage(rate, 0.0)
    before = rate.rate
    assert before is not None
    now[0] += 60.0
    await rate.acquire()
    assert rate.rate is not None and rate.rate <= before * 1.2, (before, rate.rate)
