"""``StartsPerTurn``: at most ``limit`` requests start in any one loop turn."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from aiocommit.runtime.loop_turns import STARTS_PER_TURN, StartsPerTurn

from .turn_counts import loop_turns


async def test_no_loop_turn_starts_more_than_the_limit() -> None:
    """300 workers whose "answers" come back 0-3 turns after they start (as requests that
    finish together do), each starting its next request at once. Counted against the
    loop's real turns (its selector calls), not against a task that runs once per turn
    somewhere in the middle of it."""
    starts = StartsPerTurn()
    rng = random.Random(0)
    per_turn: Counter[int] = Counter()

    with loop_turns() as turns:

        async def worker() -> None:
            for _ in range(20):
                await starts.wait()
                per_turn[turns.turn] += 1
                for _ in range(rng.randint(0, 3)):  # the answer, some turns later
                    await asyncio.sleep(0)

        await asyncio.gather(*(worker() for _ in range(300)))

    assert sum(per_turn.values()) == 300 * 20
    assert max(per_turn.values()) <= STARTS_PER_TURN
    # and it does not starve: most turns with starts start at least a quarter of the limit
    busy = [count for count in per_turn.values() if count >= STARTS_PER_TURN // 4]
    assert len(busy) >= 0.9 * len(per_turn)


async def test_waiting_starts_cost_the_loop_nothing_until_their_turn() -> None:
    """512 requests ready at once: those past the window wait in line and resume once,
    when let go; they are not woken in every turn to look again (which made each turn
    step every waiting task: ~512 * 512 / 32 task steps in all, and a coroutine, a
    generator and a handle for each)."""
    starts = StartsPerTurn()
    loop = asyncio.get_running_loop()
    steps = 0
    with loop_turns():
        selector = loop._selector  # type: ignore[attr-defined]
        select = selector.select

        def counting_select(timeout: float | None = None) -> object:
            nonlocal steps
            steps += len(loop._ready)  # type: ignore[attr-defined]  # handles this turn runs
            return select(timeout)

        selector.select = counting_select
        started: list[int] = []

        async def one(n: int) -> None:
            await starts.wait()
            started.append(n)

        await asyncio.gather(*(one(n) for n in range(512)))
    assert sorted(started) == list(range(512))
    assert started == list(range(512))  # first come, first served
    # per request: its task's first step, its one resumption, gather's callback; and a
    # window's closing callback per 16 (the old way: ~8,000 more)
    assert steps <= 4 * 512


async def test_a_cancelled_waiter_gives_its_place_away() -> None:
    """A waiter cancelled in line is passed over: the next in line starts."""
    starts = StartsPerTurn(limit=2)  # one start per window
    loop = asyncio.get_running_loop()
    first = asyncio.ensure_future(starts.wait())
    second = asyncio.ensure_future(starts.wait())
    loop.call_soon(first.cancel)  # after both have joined the line
    await starts.wait()  # fills the window; it closes after the cancel
    await asyncio.wait_for(second, 1.0)
    assert first.cancelled()
