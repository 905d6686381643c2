"""``bench loop``'s split of a ticker gap into the garbage collections run in it and the
rest of the loop thread's work: a real collection and a real busy callback beside the
ticker."""

from __future__ import annotations

import gc
import time

import anyio

from aiocommit_stress.loop_probes import GapSplit, collections_watched
from aiocommit_testing.ticker import ticking

#: objects enough for a full collection of the test process to take milliseconds
HEAP = 1_000_000


def busy(seconds: float) -> None:
    ends = time.thread_time() + seconds
    while time.thread_time() < ends:
        pass


async def test_a_gap_is_split_into_its_collections_and_the_rest() -> None:
    gc.disable()  # no collections while the heap is built
    try:
        heap = [[index] for index in range(HEAP)]
    finally:
        gc.enable()
    async with collections_watched() as collected:
        split = GapSplit(collected)
        async with ticking(on_gap=lambda cpu, wall: split.gap(cpu)) as ticker:
            await anyio.sleep(0.01)
            gc.collect()  # one gap: a full collection, little else
            await anyio.sleep(0.01)
            busy(0.01)  # another: 10 ms of work, no collection
            await anyio.sleep(0.01)
    del heap
    figures = split.figures()
    assert collected.full and collected.spent >= sum(collected.full)
    assert max(collected.full) > 0.015  # the collection outweighs the busy gap
    # the worst gap is one of the two; its parts add up to the ticker's worst
    worst = ticker.figures()["worst_stall_ms"]
    parts = figures["worst_stall_collecting_ms"] + figures["worst_stall_rest_ms"]
    assert abs(parts - worst) <= 0.2, (figures, worst)
    # the worst gap is the collection's, nearly all of it collecting
    assert figures["worst_stall_collecting_ms"] >= max(collected.full) * 1000 - 0.1, figures
    # the busy gap is the worst rest; the collection's gap is not counted as rest
    assert 10.0 <= figures["worst_rest_ms"] < 15.0, figures
