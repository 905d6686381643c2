"""Blocking calls off the event loop: one bounded thread limiter per event loop (its
runtime's, ``runtime.Runtime.threads``), shared by every store client, and a batcher
that runs the small blocking calls made in one loop turn together in one worker thread.

A store that makes system calls (the local filesystem) must never make them on the
caller's event loop: a rename takes 10-40 µs, but 2,000 of them in one loop turn hold
the loop for most of a second. One thread hop per call costs more than the call itself,
so ``Batcher`` gathers the calls of a turn (up to ``max_batch``) and hands each batch to
a thread: the loop's cost per call is one suspension, and the system calls of different
batches run in parallel (the GIL is released while a system call runs).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from aiocommit.runtime.runtime import THREADS, current, dedicate_loop, loop_is_dedicated

T = TypeVar("T")

__all__ = [
    "THREADS",
    "Batcher",
    "dedicate_loop",
    "loop_is_dedicated",
    "shared_thread_limiter",
]


def shared_thread_limiter() -> anyio.CapacityLimiter:
    """The one limiter of this event loop's store threads (``THREADS`` at once): its
    runtime's."""
    return current().threads


class _Call(Generic[T]):
    __slots__ = ("args", "error", "function", "result", "withdrawn")

    def __init__(self, function: Callable[..., T], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args
        self.result: T | None = None
        self.error: BaseException | None = None
        self.withdrawn = False


class _Batch:
    __slots__ = ("calls", "done", "loop")

    def __init__(self) -> None:
        self.calls: list[_Call[Any]] = []
        self.done = anyio.Event()
        self.loop = threading.get_ident()  # one event loop runs in a thread at a time

    def run(self) -> None:
        """In the worker thread: every call not withdrawn, each error kept for its caller."""
        for call in self.calls:
            if call.withdrawn:
                continue
            try:
                call.result = call.function(*call.args)
            except BaseException as error:  # handed back to the caller that made the call
                call.error = error


class Batcher:
    """Runs blocking calls in worker threads, the calls made in one loop turn together.

    ``run(function, *args)`` returns ``function(*args)``'s result or raises its
    exception (a module-level function and its arguments: no closure per call). The first
    caller of a batch leads: it yields (the other callers of the turn join its batch,
    up to ``max_batch``) and waits for one of ``max_running`` places, then runs the
    batch in a thread and wakes the others. Bounding the batches that run at once
    bounds the callers woken in one loop turn (``max_running * max_batch``) and the
    threads that contend for the GIL. A started batch runs to its end (shielded: it is
    short); a caller cancelled before its batch starts is withdrawn from it, so a
    cancelled caller issues no call that had not begun.
    """

    def __init__(
        self,
        limiter: Callable[[], anyio.CapacityLimiter],
        *,
        max_batch: int = 64,
        max_running: int = 2,
    ):
        self._limiter = limiter
        self.max_batch = max_batch
        self.max_running = max_running
        self._running = 0
        self._places: collections.deque[anyio.Event] = collections.deque()
        self._open: _Batch | None = None

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        call = _Call(function, args)
        batch = self._open
        if (
            batch is not None
            and len(batch.calls) < self.max_batch
            and batch.loop == threading.get_ident()
        ):
            batch.calls.append(call)
            try:
                await batch.done.wait()
            except BaseException:
                call.withdrawn = True
                raise
        else:
            batch = self._open = _Batch()
            batch.calls.append(call)
            await self._lead(batch, call)
        if call.error is not None:
            error = call.error
            call.error = None  # no cycle through the traceback
            raise error
        return call.result  # type: ignore[return-value]

    async def _lead(self, batch: _Batch, own: _Call[Any]) -> None:
        """Gather the batch, wait for a place, run it, wake its callers. Cancelled before
        it starts, the leader's own call is withdrawn and the batch runs only for callers
        still waiting (after one turn, in which callers cancelled with it withdraw)."""
        try:
            await anyio.lowlevel.checkpoint()  # the rest of this turn joins
            await self._take_place()  # and those that come while it waits
        except BaseException:
            own.withdrawn = True
            if self._open is batch:
                self._open = None
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()
                if any(not call.withdrawn for call in batch.calls):
                    await self._take_place()
                    await self._run_placed(batch)
                batch.done.set()
            raise
        if self._open is batch:
            self._open = None
        with anyio.CancelScope(shield=True):  # a started batch is short: it finishes
            await self._run_placed(batch)

    async def _run_placed(self, batch: _Batch) -> None:
        try:
            await anyio.to_thread.run_sync(batch.run, limiter=self._limiter())
        finally:
            self._give_place()
            batch.done.set()

    async def _take_place(self) -> None:
        if self._running < self.max_running and not self._places:
            self._running += 1
            return
        place = anyio.Event()
        self._places.append(place)
        try:
            await place.wait()
        except BaseException:
            if place.is_set():
                self._give_place()  # handed over as the wait was cancelled: pass it on
            else:
                self._places.remove(place)
            raise

    def _give_place(self) -> None:
        if self._places:
            self._places.popleft().set()  # the place passes to the next batch
        else:
            self._running -= 1
