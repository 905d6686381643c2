"""How many requests an HTTP store client starts in one event-loop turn.

Starting a request costs the caller's loop ~0.2 ms of CPU (signing, the client's request
write). Hundreds of calls ready in one turn (answers arriving together, each starting its
worker's next call) would each start theirs in that turn and hold the loop for tens to
hundreds of ms. ``StartsPerTurn.wait()``, awaited before each request, lets ``limit``
start per turn; the rest start in later turns. Counted, not timed: a bound that holds on
any machine.
"""

from __future__ import annotations

import asyncio

import anyio.lowlevel

#: requests a store client starts per loop turn: ~6 ms of the loop's CPU at most
STARTS_PER_TURN = 32


class StartsPerTurn:
    """A per-turn count of requests started, for one client on one event loop."""

    def __init__(self, limit: int = STARTS_PER_TURN) -> None:
        self.limit = limit
        self._started = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def _new_turn(self) -> None:
        self._started = 0

    async def wait(self) -> None:
        """Return when a request may start in this turn. The count is reset by a callback
        that the turn's first start schedules: it runs at the start of the next turn,
        before the tasks that yielded here for want of a start."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a reset pending on a loop that ended is lost
            self._loop, self._started = loop, 0
        while self._started >= self.limit:
            await anyio.lowlevel.checkpoint()  # the next turn
        if self._started == 0:
            loop.call_soon(self._new_turn)
        self._started += 1
