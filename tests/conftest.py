"""Store fixtures shared by the contract suite and the engine tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from aiocommit.stores.base import Store
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore

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


#: every store the engine tests and the contract suite run against
STORE_FACTORIES: dict[str, StoreFactory] = {
    "memory": memory_store,
    "local": local_store,
}


@pytest.fixture(params=sorted(STORE_FACTORIES))
async def store_root(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Store, str]]:
    """(store, root directory) for each store kind; the root is empty."""
    async with STORE_FACTORIES[request.param](tmp_path) as (store, root):
        yield store, root
