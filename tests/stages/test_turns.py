"""``take_turn``: CPU work shares the caller's loop in slices, and those that wait for
a slice cost the loop nothing until their turn."""

from __future__ import annotations

import asyncio
import time

from aiocommit.runtime.runtime import current, here
from aiocommit.runtime.turns import SLICE_SECONDS, take_turn


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def test_waiting_for_a_slice_costs_the_loop_nothing_until_its_turn() -> None:
    """256 tasks ready at once, each a unit of CPU work a quarter of a slice long: those
    that find the slice used up wait in line and resume once, when let go; they are not
    woken in every turn to look again (which stepped every waiting task every turn:
    ~256 * 256 / 4 / 2 task steps in all, ~40 per unit). And the loop still gets a turn
    between slices."""
    loop = asyncio.get_running_loop()
    selector = loop._selector  # type: ignore[attr-defined]
    select = selector.select
    steps = 0
    selects = 0

    def counting_select(timeout: float | None = None) -> object:
        nonlocal steps, selects
        steps += len(loop._ready)  # type: ignore[attr-defined]  # handles this turn runs
        selects += 1
        return select(timeout)

    done: list[int] = []

    async def one(n: int) -> None:
        await take_turn()
        _busy(SLICE_SECONDS / 4)
        done.append(n)

    selector.select = counting_select
    try:
        await asyncio.gather(*(one(n) for n in range(256)))
    finally:
        del selector.select
    assert sorted(done) == list(range(256))
    # per unit: its task's first step, at most a resumption or two, gather's callback
    # (the old way: ~8,000 more)
    assert steps <= 5 * 256
    assert selects >= 256 // 8  # the loop got a turn at least every ~slice of work


async def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    """A task cancelled while it waits in line (or just after being let go) leaves the
    line moving: everyone else gets a slice."""
    _busy(SLICE_SECONDS * 1.5)  # the slice is used up: the first yields, the rest wait
    done: list[int] = []

    async def one(n: int) -> None:
        await take_turn()
        _busy(SLICE_SECONDS / 2)
        done.append(n)

    tasks = [asyncio.ensure_future(one(n)) for n in range(40)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    for task in tasks[1:40:3]:
        task.cancel()
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
    cancelled = set(range(1, 40, 3))
    assert set(done) | cancelled == set(range(40))
    line = current()
    assert line is here.runtime and not line.waiting and not line.yielding
