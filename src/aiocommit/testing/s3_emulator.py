"""moto in server mode (``moto[server]``) on loopback: a real HTTP S3 endpoint.

``MotoServer().start()`` runs ``python -m moto.server -H 127.0.0.1 -p PORT`` as a child
process and waits until it answers; ``stop()`` ends it. ``run_moto_server()`` is the async
form. Tests and the stress harness talk to it through aiobotocore over HTTP, never an
in-process mock. Dummy credentials are set in the environment where none are.

For the stress harness: ``python -m aiocommit.testing.s3_emulator --port N`` runs until
interrupted.

Where moto 5.x differs from S3's documented behaviour (each gap is covered by a scripted
test of the documented behaviour in ``tests/stores/test_s3_documented.py``):

* ``ListMultipartUploads`` ignores ``MaxUploads``: everything comes in one page, never
  truncated; S3 pages at 1000 with ``NextKeyMarker`` / ``NextUploadIdMarker``.
* A second ``CompleteMultipartUpload`` of a completed upload answers 200 with the
  object's etag; S3 documents ``NoSuchUpload`` for a completed upload (and in practice
  answers 200 for a while after completion): both must count as done.
* Injected S3 faults (503 SlowDown, lost responses) are not produced by moto at all.
"""

from __future__ import annotations

import argparse
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
from collections.abc import AsyncIterator
from typing import IO

import anyio.to_thread

DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def use_dummy_credentials() -> None:
    """moto accepts any credentials; botocore needs some to sign."""
    for name, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(name, value)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class MotoServer:
    """One moto server process on 127.0.0.1."""

    def __init__(self, port: int = 0, *, ready_timeout: float = 30.0):
        self.requested_port = port
        self.port = port
        self.ready_timeout = ready_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        use_dummy_credentials()
        attempts = 3 if self.requested_port == 0 else 1
        for attempt in range(attempts):
            self.port = self.requested_port or _free_port()
            try:
                self._spawn()
                return
            except RuntimeError:
                if attempt == attempts - 1:
                    raise

    def _spawn(self) -> None:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        self._process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                output = self._read_log()
                self.stop()
                raise RuntimeError(f"moto server exited at start: {output}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto server did not answer within {self.ready_timeout} s")

    def _read_log(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-2000:].decode(errors="replace")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


@contextlib.asynccontextmanager
async def run_moto_server(port: int = 0) -> AsyncIterator[MotoServer]:
    """Start a moto server for the block."""
    server = MotoServer(port)
    await anyio.to_thread.run_sync(server.start)
    try:
        yield server
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(server.stop)


async def create_bucket(endpoint: str, bucket: str) -> None:
    """Create ``bucket`` on the server at ``endpoint`` (through aiobotocore)."""
    from aiobotocore.session import get_session

    use_dummy_credentials()
    async with get_session().create_client(
        "s3", endpoint_url=endpoint, region_name="us-east-1"
    ) as client:
        await client.create_bucket(Bucket=bucket)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="moto S3 server on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bucket", action="append", default=[])
    args = parser.parse_args(argv)
    server = MotoServer(args.port)
    server.start()
    for bucket in args.bucket:
        anyio.run(create_bucket, server.endpoint, bucket)
    print(server.endpoint, flush=True)

    def stop(signum: int, frame: object) -> None:
        server.stop()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
