"""The event loop a Python worker's tasks run their commit steps on: one per process,
kept across tasks (Spark's Python workers, Dask's and Ray's worker processes).

Spark reuses a Python worker for task after task (Dask and Ray their worker processes).
``asyncio.run`` per step would build a new event loop each time, and anyio's worker
threads (which run the local store's blocking calls) stop with the loop's root task:
every small task would pay for a loop and new threads, several times. Here one loop runs
in a daemon thread behind an anyio ``BlockingPortal``; its worker threads stay between
tasks (anyio retires them after 10 s idle). A process forked from one that had the loop
starts its own.

Each call to that loop is two thread hops: the loop's thread wakes, then the caller's
does again, and on a busy machine each wake-up waits for a core. Steps whose every await
is short and never needs the loop between calls (a local task attempt's set-up and
commit, whose metadata calls and small writes run on the loop) can instead run on the
caller's own thread: ``run_in_thread_loop`` keeps one event loop per thread (and process)
and runs each step on it, in the calling thread, with no hop.

Contract: ``run_in_task_loop(fn, *args)`` runs ``await fn(*args)`` on the loop and returns
its result or raises its error, in the caller's thread, which must not run an event loop
itself. ``task_portal()`` is the loop's portal, for a context manager held open across
calls (``wrap_async_context_manager``). Anything bound to the loop (store clients) may
be passed from one call to the next, and must be closed by the caller: the loop does not
close them. ``run_in_thread_loop(fn, *args)`` is the same on the calling thread's own
loop, which runs only during a call: what is bound to it is used by that thread only,
and each call is a task of its own (no cancel scope or task group may span two calls);
the loop is closed when its thread ends.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple, Unpack

import anyio
from anyio.from_thread import BlockingPortal

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

_lock = threading.Lock()
_portal: BlockingPortal | None = None
_pid = 0


def _start() -> BlockingPortal:
    started = threading.Event()
    box: list[BlockingPortal] = []

    async def serve() -> None:
        async with BlockingPortal() as portal:
            box.append(portal)
            started.set()
            await portal.sleep_until_stopped()

    # a daemon: the process exits without stopping it (Spark ends workers with os._exit)
    thread = threading.Thread(
        target=anyio.run, args=(serve,), name="aiocommit-task-loop", daemon=True
    )
    thread.start()
    started.wait()
    return box[0]


def _current() -> BlockingPortal:
    global _portal, _pid
    with _lock:
        if _portal is None or _pid != os.getpid():
            _portal, _pid = _start(), os.getpid()
        return _portal


def run_in_task_loop(fn: Callable[[Unpack[Ts]], Awaitable[T]], *args: *Ts) -> T:
    """``await fn(*args)`` on the process's task loop (see the module docstring)."""
    return _current().call(fn, *args)


def task_portal() -> BlockingPortal:
    """The portal of the process's task loop (started on first use)."""
    return _current()


class _ThreadLoop:
    """A thread's own event loop (``run_in_thread_loop``), closed when the thread ends
    and its ``threading.local`` slot is dropped. A bare loop, not an ``asyncio.Runner``:
    a runner in the main thread installs and restores a SIGINT handler on every call,
    and reading the handler back formats the task's repr."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        if self.pid == os.getpid() and not self.loop.is_running():
            self.loop.close()


class _ThreadLoops(threading.local):
    loop: _ThreadLoop | None = None


_thread_loops = _ThreadLoops()


def run_in_thread_loop(fn: Callable[[Unpack[Ts]], Awaitable[T]], *args: *Ts) -> T:
    """``await fn(*args)`` on the calling thread's own event loop, run in this thread
    (see the module docstring); the thread must not run an event loop itself."""
    state = _thread_loops.loop
    if state is None or state.pid != os.getpid():
        # a forked child leaves its parent's loop alone (its file descriptors are shared)
        state = _thread_loops.loop = _ThreadLoop()
    return state.loop.run_until_complete(_awaited(fn, *args))


async def _awaited(fn: Callable[[Unpack[Ts]], Awaitable[T]], *args: *Ts) -> T:
    return await fn(*args)
