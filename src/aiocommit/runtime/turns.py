"""Sharing the caller's event loop: the stages' CPU work runs in short slices.

An event loop runs every task that is ready in one turn, one after another, so work
that many tasks do between two suspensions adds up (2,048 renamers each renaming a few
files held a loop for seconds). ``take_turn()``, awaited before each unit of CPU work
(a file, a manifest, a page), yields the loop once aiocommit's tasks on this thread
have run for ``SLICE_SECONDS`` since the loop last got it back. One task yields for the
next slice and opens it when it is back; those that find the slice used up meanwhile
wait in line (first come, first served) on an event each, and cost the loop nothing
until their turn: each one let go lets the next go after it, in a later step, until the
slice is used up again and the next in line yields for another. (Waiting by yielding
again and again instead woke every waiter in every turn: with 256 manifests loading,
~75 task steps per manifest.) A unit costs one call of ``perf_counter`` when there is
time left and nobody waits.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import anyio
import anyio.lowlevel

#: the longest aiocommit runs on a loop between two chances for the loop's other tasks
SLICE_SECONDS = 0.004


class _Line:
    """Who waits for a slice on one event loop."""

    __slots__ = ("waiting", "yielding")

    def __init__(self) -> None:
        self.waiting: deque[anyio.Event] = deque()
        #: a task is yielding the loop for the next slice
        self.yielding = False


class _Slice(threading.local):
    started = 0.0

    def __init__(self) -> None:
        #: the line of the loop that last waited on this thread (looked up again when it
        #: is not empty: a loop that ended may have left it so)
        self.line = _Line()


_slice = _Slice()
_lines: anyio.lowlevel.RunVar[_Line] = anyio.lowlevel.RunVar("aiocommit_take_turn_line")


async def take_turn() -> None:
    """Yield the event loop if this thread's slice is used up (see the module)."""
    current = _slice
    if time.perf_counter() - current.started <= SLICE_SECONDS and not current.line.waiting:
        return
    try:
        line = _lines.get()
    except LookupError:
        line = _Line()
        _lines.set(line)
    current.line = line
    let_go = False  # by the one before in line: the next in line waits for this one
    while True:
        if let_go or not line.waiting:
            if time.perf_counter() - current.started <= SLICE_SECONDS:
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
        current.started = time.perf_counter()
        _let_next_go(line)


async def _wait_in_line(line: _Line, *, front: bool) -> None:
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


def _let_next_go(line: _Line) -> None:
    if line.waiting:
        line.waiting.popleft().set()


def yield_due() -> bool:
    """Is this thread's slice used up (for code that yields by other means)?"""
    return time.perf_counter() - _slice.started > SLICE_SECONDS
