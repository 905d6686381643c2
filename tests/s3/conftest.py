"""The S3A committers' store: each store with multipart uploads, the memory store (the fast
tier) and S3 (a fresh bucket on the session's moto server, aiobotocore over HTTP)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.multipart import MultipartStore
from tests.stores.s3_fixtures import s3_store_factory


@pytest.fixture(params=["memory", "s3"])
async def s3_root(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[MultipartStore, str]]:
    """(store, root) with multipart uploads; ``root`` exists and is empty."""
    if request.param == "memory":
        store = MemoryStore(f"s3a-{id(tmp_path)}", page_size=7)
        await store.mkdirs("/root")
        yield store, "/root"
        return
    async with s3_store_factory(request.getfixturevalue("s3_endpoint")) as (s3, root):
        yield s3, root


@pytest.fixture
async def moto_root(s3_endpoint: str) -> AsyncIterator[tuple[MultipartStore, str]]:
    """(store, root) on S3 only (moto), for what a store without atomic rename does."""
    async with s3_store_factory(s3_endpoint) as (s3, root):
        yield s3, root
