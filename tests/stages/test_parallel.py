"""``committers.common.context.parallel``: workers over items, sharing the caller's loop."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable

import pytest

from aiocommit.committers.common.context import parallel
from aiocommit_testing.ticker import Ticker, ticking


async def _ticked(work: Awaitable[None]) -> Ticker:
    """Run ``work`` beside the 1 ms ticker, the suite's heap frozen out of the collector
    (a full collection of it took ~320 ms inside one gap of a CI run, which is not what
    these tests measure)."""
    gc.collect()
    gc.freeze()
    try:
        async with ticking() as ticker:
            await work
    finally:
        gc.unfreeze()
    return ticker


@pytest.mark.slow
async def test_workers_that_never_suspend_give_the_loop_its_turns() -> None:
    """Items answered without suspending (the memory store): the workers yield the loop
    every few ms between them, not after a fixed count of items each (256 workers x 32
    items of 20 us held the loop ~160 ms per turn before)."""
    done = 0

    async def busy(item: int) -> None:
        nonlocal done
        until = time.thread_time() + 20e-6
        while time.thread_time() < until:
            pass
        done += 1

    ticker = await _ticked(parallel(range(256 * 64), busy, workers=256))
    assert done == 256 * 64
    assert ticker.gaps > 10
    assert ticker.worst_cpu < 0.06, ticker.figures()


@pytest.mark.slow
async def test_workers_whose_items_suspend_start_their_next_item_in_a_later_turn() -> None:
    """Items that suspend (a store call over the network) end together, many in one
    loop turn: each worker's next item starts once the loop has had its turn, not in
    that same turn (1,024 workers x 150 us of work before their call held the loop
    ~150 ms per turn before)."""
    import anyio.lowlevel

    done = 0

    async def call(item: int) -> None:
        nonlocal done
        until = time.thread_time() + 150e-6  # building and sending the request
        while time.thread_time() < until:
            pass
        await anyio.lowlevel.checkpoint()  # the answer, in the next turn
        done += 1

    ticker = await _ticked(parallel(range(1024 * 8), call, workers=1024))
    assert done == 1024 * 8
    assert ticker.gaps > 10
    assert ticker.worst_cpu < 0.06, ticker.figures()
