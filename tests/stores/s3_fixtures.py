"""S3 store factory over moto in server mode, for the contract suite and engine tests."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from aiocommit.stores.s3 import S3Store
from aiocommit_testing.s3_emulator import create_bucket, run_moto_server

_buckets = itertools.count(1)


def fresh_bucket_name() -> str:
    return f"aiocommit-test-{os.getpid()}-{next(_buckets)}"


@asynccontextmanager
async def s3_store_factory(
    endpoint: str | None = None, *, page_size: int = 7, **options: Any
) -> AsyncIterator[tuple[S3Store, str]]:
    """Yield ``(store, "/root")`` on a fresh bucket; ``/root`` exists and is empty.
    ``endpoint``: a running moto server; without one, one is started for the block."""
    async with AsyncExitStack() as stack:
        if endpoint is None:
            endpoint = (await stack.enter_async_context(run_moto_server())).endpoint
        bucket = fresh_bucket_name()
        await create_bucket(endpoint, bucket)
        store = S3Store(bucket, endpoint_url=endpoint, page_size=page_size, **options)
        stack.push_async_callback(store.aclose)
        await store.mkdirs("/root")
        yield store, "/root"
