"""S3 fixtures: a fresh bucket on the session's moto server, through aiobotocore over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiocommit.stores.s3 import S3Store
from tests.stores.s3_fixtures import s3_store_factory


@pytest.fixture
async def s3_root(s3_endpoint: str) -> AsyncIterator[tuple[S3Store, str]]:
    """(store, root) on a fresh bucket; ``root`` exists and is empty."""
    async with s3_store_factory(s3_endpoint) as (store, root):
        yield store, root
