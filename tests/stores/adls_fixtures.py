"""ADLS Gen2 store factory over the in-package DFS emulator, for the store contract suite
and engine tests."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from aiocommit.stores.adls import AdlsStore
from aiocommit_testing.adls_emulator import EmulatorHandle, run_adls_emulator

_filesystems = itertools.count(1)


def make_store(handle: EmulatorHandle, filesystem: str, **options: Any) -> AdlsStore:
    """An ``AdlsStore`` on ``handle``'s emulator, shared-key auth; ``options`` go to the store."""
    options.setdefault("account_key", handle.key)
    return AdlsStore(handle.account, filesystem, endpoint=handle.endpoint, **options)


@asynccontextmanager
async def adls_store_factory(
    emulator: EmulatorHandle | None = None, *, page_size: int = 7, **options: Any
) -> AsyncIterator[tuple[AdlsStore, str]]:
    """Yield ``(store, "/root")`` on a fresh filesystem; ``/root`` exists and is empty.

    ``emulator``: a running emulator; without it one is started for the block.
    ``options`` go to ``AdlsStore``.
    """
    async with AsyncExitStack() as stack:
        if emulator is None:
            emulator = await stack.enter_async_context(run_adls_emulator())
        filesystem = f"fs{next(_filesystems)}"
        emulator.create_filesystem(filesystem)
        store = make_store(emulator, filesystem, page_size=page_size, **options)
        stack.push_async_callback(store.aclose)
        await store.mkdirs("/root")
        yield store, "/root"
