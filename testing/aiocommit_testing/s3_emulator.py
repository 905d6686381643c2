"""moto in server mode (``moto[server]``) on loopback: a real HTTP S3 endpoint.

``MotoServer().start()`` runs moto's server (``python -m aiocommit_testing.moto_main -H
127.0.0.1 -p PORT``: ``moto.server`` with upload start times reported) as a child
process and waits until it answers; ``stop()`` ends it. ``run_moto_server()`` is the async
form. Tests and the stress harness talk to it through aiobotocore over HTTP, never an
in-process mock. Dummy credentials are set in the environment where none are.

For the stress harness: ``python -m aiocommit_testing.s3_emulator --port N`` runs until
interrupted.

Where moto 5.x differs from S3's documented behaviour (each gap is covered by a scripted
test of the documented behaviour in ``tests/stores/test_s3_documented.py``):

* ``ListMultipartUploads`` ignores ``MaxUploads``: everything comes in one page, never
  truncated; S3 pages at 1000 with ``NextKeyMarker`` / ``NextUploadIdMarker``.
* A second ``CompleteMultipartUpload`` of a completed upload answers 200 with the
  object's etag; S3 documents ``NoSuchUpload`` for a completed upload (and in practice
  answers 200 for a while after completion): both must count as done.
* ``ListMultipartUploads`` reports every upload as started on 2010-11-10; closed here
  (``moto_main``): each upload's real start time.
* Injected S3 faults (503 SlowDown, lost responses) are not produced by moto at all.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import time
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import anyio

from aiocommit_testing.child_server import ChildServer, run_child_server

if TYPE_CHECKING:
    from aiobotocore.session import AioSession

DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def use_dummy_credentials() -> None:
    """moto accepts any credentials; botocore needs some to sign."""
    for name, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(name, value)


class MotoServer(ChildServer):
    """One moto server process on 127.0.0.1."""

    name = "moto server"
    ready_path = "/moto-api/"
    poll_interval = 0.1

    def __init__(self, port: int = 0, *, ready_timeout: float = 30.0):
        super().__init__(port, ready_timeout=ready_timeout)

    def before_start(self) -> None:
        use_dummy_credentials()

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "aiocommit_testing.moto_main",
            "-H",
            "127.0.0.1",
            "-p",
            str(self.port),
        ]


def run_moto_server(port: int = 0) -> AbstractAsyncContextManager[MotoServer]:
    """Start a moto server for the block."""
    return run_child_server(MotoServer(port))


@functools.cache
def _bucket_session() -> AioSession:
    """One aiobotocore session for every ``create_bucket`` of the process: a new session
    loads and parses botocore's S3 service model again for its first client."""
    from aiobotocore.session import get_session

    return get_session()


async def create_bucket(endpoint: str, bucket: str) -> None:
    """Create ``bucket`` on the server at ``endpoint`` (through aiobotocore)."""
    use_dummy_credentials()
    async with _bucket_session().create_client(
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
