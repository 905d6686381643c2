"""A test server in a child process on 127.0.0.1: spawned on a free port, ready when an
HTTP probe answers 200 (``ChildServer``) or when it has printed its settings
(``start_announcing``), stopped (terminate, then kill) at the end (``stop_process``).

The one implementation of that life cycle for the emulators that run as processes
(moto in server mode, fake-gcs-server) and the stress harness's emulator processes::

    class MyServer(ChildServer):
        name = "my server"
        ready_path = "/health"

        def command(self) -> list[str]:
            return ["my-server", "--port", str(self.port)]

    async with run_child_server(MyServer()) as server:  # or ``with MyServer() as server``
        ... server.endpoint ...
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import IO, Any, Self, TypeVar

import anyio
import anyio.to_thread


async def until_signalled() -> None:
    """In a child server's own process: return at SIGINT or SIGTERM (``stop_process``
    sends SIGTERM), so the server's clean-up runs."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (another process may take it before use:
    ``ChildServer.start`` retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_process(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """Terminate ``process``, kill it after ``timeout`` seconds, reap it and close its
    output pipe."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


def start_announcing(
    argv: Sequence[str],
    ready: Callable[[dict[str, str]], bool],
    *,
    env: Mapping[str, str] | None = None,
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Start a server that prints ``NAME=VALUE`` lines (its endpoint, keys) before it
    serves; read them until ``ready(values)``. The caller stops it with ``stop_process``.
    A server that exits first raises ``RuntimeError`` (and is reaped)."""
    process = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout is not None
        values: dict[str, str] = {}
        while not ready(values):
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"server {list(argv)} exited with {process.wait()}")
            name, sep, value = line.strip().partition("=")
            if sep and not name.startswith("#"):
                values[name] = value
    except BaseException:
        stop_process(process)
        raise
    return process, values


class ChildServer:
    """One server process. ``start``/``stop`` block; use ``run_child_server`` from async
    code. Subclasses name the ``command`` and the ``ready_path`` probed until it answers."""

    #: what the error messages call it
    name = "server"
    #: an HTTP path that answers 200 once the server serves
    ready_path = "/"
    #: seconds between readiness probes
    poll_interval = 0.05

    def __init__(self, port: int = 0, *, ready_timeout: float = 30.0):
        self.requested_port = port
        self.port = port
        self.ready_timeout = ready_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def command(self) -> list[str]:
        """The argv that serves on ``127.0.0.1:self.port``."""
        raise NotImplementedError

    def before_start(self) -> None:
        """Called once before the process is spawned (e.g. to set the environment)."""

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the server and wait until it answers; retries a port taken meanwhile."""
        self.before_start()
        attempts = 3 if self.requested_port == 0 else 1
        for attempt in range(attempts):
            self.port = self.requested_port or free_port()
            try:
                self._spawn()
                return
            except RuntimeError:
                if attempt == attempts - 1:
                    raise

    def _spawn(self) -> None:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        self._process = subprocess.Popen(
            self.command(), stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                output = self._read_log()
                self.stop()
                raise RuntimeError(f"{self.name} exited at start: {output}")
            try:
                with urllib.request.urlopen(self.endpoint + self.ready_path, timeout=1) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(self.poll_interval)
        output = self._read_log()
        self.stop()
        raise RuntimeError(f"{self.name} not ready after {self.ready_timeout} s: {output}")

    def _read_log(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-2000:].decode(errors="replace")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Terminate the process (kill it if it lingers) and drop its log. Idempotent."""
        process, self._process = self._process, None
        if process is not None:
            stop_process(process)
        log, self._log = self._log, None
        if log is not None:
            log.close()


Server = TypeVar("Server", bound=ChildServer)


@contextlib.asynccontextmanager
async def run_child_server(server: Server) -> AsyncIterator[Server]:
    """Start ``server`` for the block (in a worker thread) and stop it at the end, even
    when the block is cancelled."""
    await anyio.to_thread.run_sync(server.start)
    try:
        yield server
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(server.stop)


@contextlib.contextmanager
def server_process(*args: str) -> Iterator[dict[str, str]]:
    """Run ``python -m ARGS``; yield the ``NAME=VALUE`` lines it prints before serving."""
    process, values = start_announcing(
        [sys.executable, "-m", *args],
        lambda values: "PORT" in values or "AZURE_STORAGE_ACCOUNT_KEY" in values,
        env=dict(os.environ),
    )
    try:
        yield values
    finally:
        stop_process(process)
