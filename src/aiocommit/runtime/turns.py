"""Sharing the caller's event loop: the stages' CPU work runs in short slices.

An event loop runs every task that is ready in one turn, one after another, so work that
many tasks do between two suspensions adds up (2,048 renamers each renaming a few files
held a loop for seconds). ``take_turn()``, awaited before each unit of CPU work (a file,
a manifest, a page), yields the loop once aiocommit's tasks on this thread have run for
``SLICE_SECONDS`` since the loop last got it back (the slice and its line are the loop's
``runtime.Runtime``). One task yields for the next slice and opens it when it is back;
those that find the slice used up meanwhile wait in line (first come, first served) on
an event each, and cost the loop nothing until their turn: each one let go lets the next
go after it, in a later step, until the slice is used up again and the next in line
yields for another. (Waiting by yielding again and again instead woke every waiter in
every turn: with 256 manifests loading, ~75 task steps per manifest.) A unit costs one
call of ``perf_counter`` when there is time left and nobody waits.
"""

from __future__ import annotations

import time

import anyio
import anyio.lowlevel

from aiocommit.runtime.runtime import Runtime, current, here

#: the longest aiocommit runs on a loop between two chances for the loop's other tasks
SLICE_SECONDS = 0.004


async def take_turn() -> None:
    """Yield the event loop if its slice is used up (see the module)."""
    line = here.runtime
    if time.perf_counter() - line.started <= SLICE_SECONDS and not line.waiting:
        return
    line = current()  # the hot path read this thread's last runtime: the loop's, now
    let_go = False  # by the one before in line: the next in line waits for this one
    while True:
        if let_go or not line.waiting:
            if time.perf_counter() - line.started <= SLICE_SECONDS:
                if let_go:
                    _let_next_go(line)  # it checks the slice in a later step
                return
            if not line.yielding:
                break
        await _wait_in_line(line, front=let_go)
        let_go = True
    line.yielding = True
    try:
        await anyio.lowlevel.checkpoint()
    finally:
        line.yielding = False
        line.started = time.perf_counter()
        _let_next_go(line)


async def _wait_in_line(line: Runtime, *, front: bool) -> None:
    turn = anyio.Event()
    if front:
        line.waiting.appendleft(turn)
    else:
        line.waiting.append(turn)
    try:
        await turn.wait()
    except BaseException:
        if turn.is_set():
            _let_next_go(line)  # let go, but cancelled before its turn: pass it on
        else:
            line.waiting.remove(turn)
        raise


def _let_next_go(line: Runtime) -> None:
    if line.waiting:
        line.waiting.popleft().set()


def yield_due() -> bool:
    """Is this loop's slice used up (for code that yields by other means)?"""
    return time.perf_counter() - here.runtime.started > SLICE_SECONDS
