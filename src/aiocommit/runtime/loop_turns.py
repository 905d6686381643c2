"""How many requests an HTTP store client starts in one event-loop turn.

Starting a request costs the caller's loop ~0.2 ms of CPU (signing, the client's request
write; more than twice that on a loaded machine). Hundreds of calls ready in one turn
(answers arriving together, each starting its worker's next call) would each start theirs
in that turn and hold the loop for tens to hundreds of ms. ``StartsPerTurn.wait()``,
awaited before each request, lets at most ``limit`` start per loop turn; the rest wait in
line and are let go in later turns.
Counted, not timed: a bound that holds on any machine.
"""

from __future__ import annotations

import asyncio
from collections import deque

#: requests a store client starts per loop turn: a few ms of the loop's CPU at most, on
#: a loaded machine too (where a start costs more than twice as much), so that a turn
#: that also runs a full garbage collection of the host's heap stays short
STARTS_PER_TURN = 8


class StartsPerTurn:
    """A count of requests started, for one client on one event loop: at most ``limit``
    start in any one loop turn.

    A coroutine cannot see where a loop turn begins. What it can see is a window: the first
    start schedules a ``call_soon`` that closes the window, and that callback runs during the
    next turn, somewhere among the callbacks ready there. So a window spans the end of one
    turn and the beginning of the next, and one turn holds the end of one window and the
    beginning of the next, never more (a window opened in a turn closes in the following
    one). Each window lets ``limit // 2`` start, so a turn holds at most ``limit``.

    Those that find the window full wait in line (first come, first served) on a future
    each, and cost the loop nothing until their turn: the callback that closes a window
    opens the next one with up to ``limit // 2`` of them, who resume in the following
    turn, the closing turn of the window they are counted in. (Waiting with
    ``sleep(0)`` instead woke every waiter in every turn, hundreds of task steps a turn
    and a coroutine, a generator and a handle each, which the garbage collector then
    promoted.) A caller who comes while others wait joins the line.
    """

    def __init__(self, limit: int = STARTS_PER_TURN) -> None:
        self.limit = limit
        self._per_window = max(1, limit // 2)
        self._started = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _count(self) -> None:
        """One more start in the open window (opening it: its closing callback)."""
        self._started += 1
        if self._started == 1:
            assert self._loop is not None
            self._loop.call_soon(self._close_window)

    def _close_window(self) -> None:
        self._started = 0
        waiting = self._waiting
        while waiting and self._started < self._per_window:
            future = waiting.popleft()
            if not future.done():  # a waiter cancelled meanwhile is skipped
                future.set_result(None)
                self._count()

    async def wait(self) -> None:
        """Return when a request may start without more than ``limit`` starting in this
        loop turn. Cost with room in the window: a comparison and an increment (one
        ``call_soon`` per window); without: one future, resumed once."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a window left open on a loop that ended is lost
            self._loop, self._started = loop, 0
            self._waiting = deque()
        if self._started < self._per_window and not self._waiting:
            self._count()
            return
        future = loop.create_future()
        self._waiting.append(future)
        # on a cancel the future is cancelled too; a grant that came first is just unused
        await future
