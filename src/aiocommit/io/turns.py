"""Sharing the caller's event loop: the stages' CPU work runs in short slices.

An event loop runs every task that is ready in one turn, one after another, so work
that many tasks do between two suspensions adds up (2,048 renamers each renaming a few
files held a loop for seconds). ``take_turn()``, awaited before each unit of CPU work
(a file, a manifest, a page), yields the loop once aiocommit's tasks on this thread
have run for ``SLICE_SECONDS`` in the loop's current turn.

The slice opens at the first check in a turn. On asyncio that check queues one callback
(``call_soon``) that runs first in the loop's next turn and closes the slice, so a new
turn opens a new slice without anyone yielding for it: a unit whose store call
suspended anyway costs one ``perf_counter`` call, not a yield. Elsewhere (trio) the
slice opens when the first task to yield for it runs again.
"""

from __future__ import annotations

import asyncio
import threading
import time

import anyio.lowlevel

#: the longest aiocommit runs on a loop between two chances for the loop's other tasks
SLICE_SECONDS = 0.004


class _Slice(threading.local):
    started = 0.0
    number = 0
    #: the asyncio loop on which a callback is queued to close the slice at its next turn
    loop: object = None


_slice = _Slice()


def _close() -> None:
    _slice.loop = None


async def take_turn() -> None:
    """Yield the event loop if this thread's slice is used up (see the module)."""
    current = _slice
    while yield_due():
        number = current.number
        await anyio.lowlevel.checkpoint()
        if current.number == number:  # the first back after the yield: a new slice
            current.number = number + 1
            current.started = time.perf_counter()
            return


def yield_due() -> bool:
    """Is this thread's slice used up (for code that yields by other means)?"""
    current = _slice
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: slices open as tasks take their turns
        return time.perf_counter() - current.started > SLICE_SECONDS
    if current.loop is not loop:  # the first check in this turn: the slice opens
        loop.call_soon(_close)
        current.loop = loop
        current.started = time.perf_counter()
        return False
    return time.perf_counter() - current.started > SLICE_SECONDS
