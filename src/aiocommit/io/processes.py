"""Worker processes: a fresh interpreter running one async function, spoken to over pipes.

Knows nothing of what the workers do. The parent starts a ``WorkerProcess`` with a
``main`` (a module-level async function, pickled by name) and its argument; the worker
runs ``main(argument, channel)`` in its own event loop and ``channel`` carries messages
both ways. The parent's ``receive`` answers each message the worker sent, then a
``Finished`` with ``main``'s result; or raises the worker's exception (rebuilt from its
pickle, else ``WorkerFailed`` with its text), or ``WorkerExited`` when the process ended
without a word (killed).

Each worker is a fresh interpreter (``python -c``, not ``multiprocessing``: no re-import
of the caller's ``__main__``, safe under any embedding) that exits within
``PARENT_POLL_SECONDS`` of its parent's death. Calls that block (``send``, ``receive``,
``reap``) belong in a worker thread, not the event loop. A worker runs under
``runtime.gc_freeze.fewer_collections``.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from aiocommit.errors import first_error
from aiocommit.runtime.gc_freeze import fewer_collections

if TYPE_CHECKING:  # loaded by the processes that use it, not by every commit
    from multiprocessing.connection import Connection

#: how often a worker checks that its parent is alive
PARENT_POLL_SECONDS = 0.2
#: a worker's exit status when its parent died
EXIT_PARENT_GONE = 70

_MESSAGE, _DONE, _ERROR = "message", "done", "error"


class WorkerExited(Exception):
    """A worker process ended without reporting a result or an error (it was killed)."""

    def __init__(self, index: int, pid: int, code: int | None):
        super().__init__(f"worker {index} (pid {pid}) died with exit code {code}")
        self.index = index
        self.pid = pid
        self.code = code


class WorkerFailed(Exception):
    """A worker's exception that could not be sent whole (it did not pickle): its text."""


@dataclasses.dataclass(frozen=True)
class Finished:
    """The last thing ``receive`` answers: the result of the worker's ``main``."""

    result: Any


class Channel:
    """The worker's side of its pipes: what the parent sends, and messages back."""

    def __init__(self, inbox: Connection, outbox: Connection):
        self._inbox = inbox
        self._outbox = outbox

    def receive(self) -> Any:
        """The parent's next message (blocks: call it in a thread)."""
        return self._inbox.recv()

    def send(self, message: object) -> None:
        """A message for the parent's ``receive``."""
        self._outbox.send((_MESSAGE, message))


WorkerMain = Callable[[Any, Channel], Awaitable[Any]]


@dataclasses.dataclass(frozen=True)
class _Start:
    main: WorkerMain
    argument: object


class WorkerProcess:
    """The parent's handle on one worker process running ``main(argument, channel)``.
    The caller kills and reaps it (``kill``, ``reap``) however its work ends."""

    def __init__(self, index: int, main: WorkerMain, argument: object) -> None:
        to_child_read, to_child_write = os.pipe()
        from_child_read, from_child_write = os.pipe()
        # the directory holding the aiocommit package (aiocommit/io/this file)
        source_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (source_root, env.get("PYTHONPATH", "")) if p
        )
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from aiocommit.io.processes import worker_main; worker_main()",
                    str(to_child_read),
                    str(from_child_write),
                    str(os.getpid()),
                ],
                pass_fds=(to_child_read, from_child_write),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            os.close(to_child_read)
            os.close(from_child_write)
        self.index = index
        from multiprocessing.connection import Connection

        self._inbox = Connection(to_child_write, readable=False)
        self._outbox = Connection(from_child_read, writable=False)
        # the child reads this first thing: a short wait at most
        self._inbox.send(_Start(main, argument))

    def send(self, message: object) -> None:
        """A message for the worker's ``channel.receive`` (blocks while the pipe is full,
        so a busy worker holds the sender back; ``OSError`` once the worker is gone)."""
        self._inbox.send(message)

    def receive(self) -> Any:
        """The worker's next message, or ``Finished``; raises as the module says."""
        try:
            kind, value = self._outbox.recv()
        except (EOFError, OSError):
            raise WorkerExited(self.index, self.process.pid, self.process.wait()) from None
        if kind == _MESSAGE:
            return value
        if kind == _DONE:
            return Finished(value)
        raise _rebuilt(value)

    def kill(self) -> None:
        """SIGKILL the process if it still runs (ends a blocked ``send`` too)."""
        if self.process.poll() is None:
            self.process.kill()

    def reap(self) -> None:
        """Wait for the process, then close the pipes (a thread reading the pipe has seen
        its end by then)."""
        self.process.wait()
        self._inbox.close()
        self._outbox.close()


def _rebuilt(payload: bytes | str) -> BaseException:
    """The worker's exception, rebuilt (its type, message and fields)."""
    if isinstance(payload, bytes):
        try:
            error = pickle.loads(payload)
            if isinstance(error, BaseException):
                return error
        except Exception:  # fall through to the text form
            pass
        payload = repr(payload[:200])
    return WorkerFailed(payload)


# -- the worker process ----------------------------------------------------------------


def worker_main() -> None:
    """Entry point of a worker process: ``argv`` holds its two pipe ends and parent pid."""
    from multiprocessing.connection import Connection

    inbox = Connection(int(sys.argv[1]), writable=False)
    outbox = Connection(int(sys.argv[2]), readable=False)
    parent = int(sys.argv[3])
    _exit_with_parent(parent)
    try:
        start: _Start = inbox.recv()
        with fewer_collections():
            result = anyio.run(start.main, start.argument, Channel(inbox, outbox))
    except BaseException as raised:  # every failure is reported, then exit 1
        error = first_error(raised)
        try:
            payload: bytes | str = pickle.dumps(error)
        except Exception:
            payload = f"{type(error).__name__}: {error}"
        try:
            outbox.send((_ERROR, payload))
        finally:
            os._exit(1)
    outbox.send((_DONE, result))
    os._exit(0)


def _exit_with_parent(parent: int) -> None:
    """Exit as soon as the parent is gone (killed): a daemon thread polls ``getppid``."""

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=poll, daemon=True, name="aiocommit-parent-watch").start()
