"""``Runtime``: what aiocommit keeps per event loop to share it, one per loop.

Every client, store and stage on a loop shares that loop's runtime: its CPU slice and
the line of tasks waiting for the next (``turns``), the bounded set of threads its
blocking store calls run in (``blocking``), and whether the loop runs nothing but store
calls (a rename worker's: ``dedicate_loop``). A runtime per client would split the one
budget a loop has; a runtime per process would let one loop's waiters stall another's.

The runtime of the running loop is found through an anyio ``RunVar`` (``current``);
the hot paths (a ``take_turn`` with time left, a store asking whether its loop is
dedicated) read the runtime this thread last ran (``here``: one loop runs in a thread
at a time), and look it up again on their slow paths.
"""

from __future__ import annotations

import threading
from collections import deque

import anyio
import anyio.lowlevel

#: worker threads a loop's store clients use at once
THREADS = 32


class Runtime:
    """One event loop's shared state (see the module)."""

    __slots__ = ("_threads", "dedicated", "started", "waiting", "yielding")

    def __init__(self) -> None:
        #: when this loop's current slice began (``perf_counter``)
        self.started = 0.0
        #: tasks waiting for a slice, first come first served
        self.waiting: deque[anyio.Event] = deque()
        #: a task is yielding the loop for the next slice
        self.yielding = False
        #: the loop runs nothing but store calls (``dedicate_loop``)
        self.dedicated = False
        self._threads: anyio.CapacityLimiter | None = None

    @property
    def threads(self) -> anyio.CapacityLimiter:
        """The limiter of this loop's store threads (``THREADS`` at once); made in the
        loop, on first use."""
        threads = self._threads
        if threads is None:
            threads = self._threads = anyio.CapacityLimiter(THREADS)
        return threads


class _Here(threading.local):
    def __init__(self) -> None:
        #: the runtime of the loop this thread last ran; before any, one of no loop
        self.runtime = Runtime()


_runtimes: anyio.lowlevel.RunVar[Runtime] = anyio.lowlevel.RunVar("aiocommit_runtime")
#: per thread: the runtime its loop last used (read on hot paths, see the module)
here = _Here()


def current() -> Runtime:
    """The running loop's runtime (made on first use); this thread's ``here`` follows."""
    try:
        runtime = _runtimes.get()
    except LookupError:
        runtime = Runtime()
        _runtimes.set(runtime)
    here.runtime = runtime
    return runtime


def dedicate_loop() -> None:
    """Declare that the running loop runs nothing but store calls (a rename worker's):
    from then on, short metadata calls run on the loop itself, which costs least when no
    one else waits for the loop."""
    current().dedicated = True


def loop_is_dedicated() -> bool:
    """Whether ``dedicate_loop()`` was called on the loop this thread runs (or last ran,
    outside one)."""
    return here.runtime.dedicated
