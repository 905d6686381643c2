"""Sharing the caller's event loop: the stages' CPU work runs in short slices.

An event loop runs every task that is ready in one turn, one after another, so work
that many tasks do between two suspensions adds up (2,048 renamers each renaming a few
files held a loop for seconds). ``take_turn()``, awaited before each unit of CPU work
(a file, a manifest, a page), yields the loop once aiocommit's tasks on this thread
have run for ``SLICE_SECONDS`` since the loop last got it back; the first task to run
again after the yield opens the next slice, and the others check again. A unit costs
one call of ``perf_counter`` when there is time left.
"""

from __future__ import annotations

import threading
import time

import anyio.lowlevel

#: the longest aiocommit runs on a loop between two chances for the loop's other tasks
SLICE_SECONDS = 0.004


class _Slice(threading.local):
    started = 0.0
    number = 0


_slice = _Slice()


async def take_turn() -> None:
    """Yield the event loop if this thread's slice is used up (see the module)."""
    current = _slice
    while time.perf_counter() - current.started > SLICE_SECONDS:
        number = current.number
        await anyio.lowlevel.checkpoint()
        if current.number == number:  # the first back after the yield: a new slice
            current.number = number + 1
            current.started = time.perf_counter()
            return


def yield_due() -> bool:
    """Is this thread's slice used up (for code that yields by other means)?"""
    return time.perf_counter() - _slice.started > SLICE_SECONDS
