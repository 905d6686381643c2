"""``stages.context.parallel``: workers over items, sharing the caller's loop."""

from __future__ import annotations

import gc
import time

from aiocommit.stages.context import parallel
from aiocommit.stress.loop_bench import ticking


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

    # the whole suite's heap is frozen out of the collector: a full collection of it
    # took ~320 ms inside one gap of the CI run, which is not what this test measures
    gc.collect()
    gc.freeze()
    try:
        async with ticking() as ticker:
            await parallel(range(256 * 64), busy, workers=256)
    finally:
        gc.unfreeze()
    assert done == 256 * 64
    assert ticker.gaps > 10
    assert ticker.worst_cpu < 0.06, ticker.figures()
