"""How many requests an HTTP store client starts in one event-loop turn.

Starting a request costs the caller's loop ~0.2 ms of CPU (signing, the client's request
write). Hundreds of calls ready in one turn (answers arriving together, each starting its
worker's next call) would each start theirs in that turn and hold the loop for tens to
hundreds of ms. ``StartsPerTurn.wait()``, awaited before each request, lets at most
``limit`` start per loop turn; the rest start in later turns. Counted, not timed: a bound
that holds on any machine.
"""

from __future__ import annotations

import asyncio

#: requests a store client starts per loop turn: ~6 ms of the loop's CPU at most
STARTS_PER_TURN = 32


class StartsPerTurn:
    """A count of requests started, for one client on one event loop: at most ``limit``
    start in any one loop turn.

    A coroutine cannot see where a loop turn begins. What it can see is a window: the first
    start schedules a ``call_soon`` that closes the window, and that callback runs during the
    next turn, somewhere among the callbacks ready there. So a window spans the end of one
    turn and the beginning of the next, and one turn holds the end of one window and the
    beginning of the next, never more (a window opened in a turn closes in the following
    one). Each window lets ``limit // 2`` start, so a turn holds at most ``limit``.
    """

    def __init__(self, limit: int = STARTS_PER_TURN) -> None:
        self.limit = limit
        self._per_window = max(1, limit // 2)
        self._started = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def _close_window(self) -> None:
        self._started = 0

    async def wait(self) -> None:
        """Return when a request may start without more than ``limit`` starting in this
        loop turn. Cost: a comparison and an increment; one ``call_soon`` per window."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a window left open on a loop that ended is lost
            self._loop, self._started = loop, 0
        # a later turn, not an event; sleep(0) makes fewer objects than anyio's checkpoint
        while self._started >= self._per_window:  # noqa: ASYNC110
            await asyncio.sleep(0)
        if self._started == 0:
            loop.call_soon(self._close_window)
        self._started += 1
