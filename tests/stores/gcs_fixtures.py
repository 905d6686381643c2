"""GCS store factory over fake-gcs-server, for the store contract suite and engine tests."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from aiocommit.stores.gcs import GcsStore
from aiocommit_testing.gcs_emulator import (
    create_bucket,
    precondition_proxy,
    run_fake_gcs_server,
)

_buckets = itertools.count(1)


def fresh_bucket_name() -> str:
    return f"aiocommit-test-{os.getpid()}-{next(_buckets)}"


@asynccontextmanager
async def gcs_store_factory(
    endpoint: str | None = None,
    *,
    enforce_preconditions: bool = True,
    page_size: int = 7,
    **options: Any,
) -> AsyncIterator[tuple[GcsStore, str]]:
    """Yield ``(store, "/root")`` on a fresh bucket; ``/root`` exists and is empty.

    ``endpoint``: a running fake-gcs-server; without it one is started for the block.
    ``enforce_preconditions``: talk to it through ``precondition_proxy`` so generation
    preconditions hold as on GCS (fake-gcs-server 1.54 ignores most of them).
    ``options`` go to ``GcsStore``.
    """
    async with AsyncExitStack() as stack:
        if endpoint is None:
            endpoint = (await stack.enter_async_context(run_fake_gcs_server())).endpoint
        bucket = fresh_bucket_name()
        await create_bucket(endpoint, bucket)
        if enforce_preconditions:
            endpoint = await stack.enter_async_context(precondition_proxy(endpoint))
        store = GcsStore(bucket, api_root=endpoint, page_size=page_size, **options)
        stack.push_async_callback(store.aclose)
        await store.mkdirs("/root")
        yield store, "/root"
