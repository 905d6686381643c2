"""Store fixtures shared by the contract suite and the engine tests. The tiers' marks
(unit, ``emulator``, ``spark``, ``slow``) are applied by ``tests/tiers.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from aiocommit.stores.base import Store
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit_testing.s3_emulator import use_dummy_credentials
from tests.tiers import CLOUD_STORES

# moto accepts any credentials and botocore needs some to sign; set before any Spark
# session starts, so its Python workers inherit them (credentials never go in options)
use_dummy_credentials()

StoreFactory = Callable[[Path], AbstractAsyncContextManager[tuple[Store, str]]]


@asynccontextmanager
async def memory_store(tmp_path: Path) -> AsyncIterator[tuple[Store, str]]:
    store = MemoryStore(f"test-{id(tmp_path)}", page_size=7)
    yield store, "/root"
    await store.aclose()


@asynccontextmanager
async def local_store(tmp_path: Path) -> AsyncIterator[tuple[Store, str]]:
    root = tmp_path / "store"
    root.mkdir()
    store = LocalStore(page_size=7)
    yield store, str(root)
    await store.aclose()


#: the in-process stores every engine test runs against
STORE_FACTORIES: dict[str, StoreFactory] = {
    "memory": memory_store,
    "local": local_store,
}


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    """One fake-gcs-server (the real Go binary) on loopback for the whole run."""
    from aiocommit_testing.gcs_emulator import FakeGcsServer

    with FakeGcsServer() as server:
        yield server.endpoint


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """One moto server (server mode, real HTTP) on loopback for the whole run."""
    from aiocommit_testing.s3_emulator import MotoServer

    with MotoServer() as server:
        yield server.endpoint


@asynccontextmanager
async def cloud_store(
    kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Store, str]]:
    if kind == "gcs":
        from tests.stores.gcs_fixtures import gcs_store_factory

        async with gcs_store_factory(request.getfixturevalue("gcs_endpoint")) as (store, root):
            yield store, root
        return
    if kind == "s3":
        from tests.stores.s3_fixtures import s3_store_factory

        async with s3_store_factory(request.getfixturevalue("s3_endpoint")) as (store, root):
            yield store, root
        return
    if kind == "adls":
        from tests.stores.adls_fixtures import adls_store_factory

        async with adls_store_factory() as (store, root):
            yield store, root
        return
    raise ValueError(kind)


@pytest.fixture(params=sorted(STORE_FACTORIES))
async def store_root(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Store, str]]:
    """(store, root directory) for each in-process store; the root is empty."""
    async with STORE_FACTORIES[request.param](tmp_path) as (store, root):
        yield store, root


@pytest.fixture(params=[*sorted(STORE_FACTORIES), *CLOUD_STORES])
async def any_store_root(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Store, str]]:
    """(store, root directory) for every store, the emulated cloud ones included."""
    if request.param in STORE_FACTORIES:
        async with STORE_FACTORIES[request.param](tmp_path) as (store, root):
            yield store, root
    else:
        async with cloud_store(request.param, request) as (store, root):
            yield store, root


@pytest.fixture(params=CLOUD_STORES)
async def cloud_store_root(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Store, str]]:
    """(store, root directory) on each emulated cloud store."""
    async with cloud_store(request.param, request) as (store, root):
        yield store, root
