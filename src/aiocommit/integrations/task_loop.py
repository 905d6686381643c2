"""The event loop a Python worker's tasks run their commit steps on: one per process,
kept across tasks (Spark's Python workers, Dask's and Ray's worker processes).

Spark reuses a Python worker for task after task (Dask and Ray their worker processes).
``asyncio.run`` per step would build a new event loop each time, and anyio's worker
threads (which run the local store's blocking calls) stop with the loop's root task:
every small task would pay for a loop and new threads, several times. Here one loop runs
in a daemon thread behind an anyio ``BlockingPortal``; its worker threads stay between
tasks (anyio retires them after 10 s idle). A process forked from one that had the loop
starts its own.

Contract: ``run_in_task_loop(fn, *args)`` runs ``await fn(*args)`` on the loop and returns
its result or raises its error, in the caller's thread, which must not run an event loop
itself. ``task_portal()`` is the loop's portal, for a context manager held open across
calls (``wrap_async_context_manager``). Anything bound to the loop (store clients) may
be passed from one call to the next, and must be closed by the caller: the loop does not
close them.
"""

from __future__ import annotations

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
