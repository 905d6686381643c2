"""Opt-in checks against a live ADLS Gen2 account (hierarchical namespace).

Set ``AIOCOMMIT_ADLS_LIVE_URL=abfss://FS@ACCOUNT.dfs.core.windows.net/some/prefix`` and one of
``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``, ``AZURE_STORAGE_CONNECTION_STRING``
(or ``AIOCOMMIT_ADLS_LIVE_DEFAULT_CREDENTIAL=1`` for ``DefaultAzureCredential``). Each test
works under a fresh directory below the prefix and deletes it afterwards. These settle the
points the emulator can only assume: quoted and bare etags both accepted as source
conditions, etags kept by rename, listing and HEAD etags equal.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from aiocommit.errors import AlreadyExists, NotEmpty, NotFound, PreconditionFailed
from aiocommit.stores.adls import AdlsStore

LIVE_URL = os.environ.get("AIOCOMMIT_ADLS_LIVE_URL", "")
_CREDENTIAL_ENV = (
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AIOCOMMIT_ADLS_LIVE_DEFAULT_CREDENTIAL",
)

pytestmark = pytest.mark.skipif(
    not LIVE_URL or not any(os.environ.get(name) for name in _CREDENTIAL_ENV),
    reason="set AIOCOMMIT_ADLS_LIVE_URL and a credential variable to run live ADLS tests",
)


@pytest.fixture
async def live() -> AsyncIterator[tuple[AdlsStore, str]]:
    if os.environ.get("AIOCOMMIT_ADLS_ENDPOINT"):
        pytest.skip("AIOCOMMIT_ADLS_ENDPOINT would redirect the live tests to an emulator")
    store, prefix = AdlsStore.from_url(LIVE_URL, page_size=3)
    root = f"{prefix.rstrip('/')}/aiocommit-live-{uuid.uuid4().hex[:12]}"
    try:
        await store.mkdirs(root)
        yield store, root
    finally:
        try:
            await store.delete(root, recursive=True)
        finally:
            await store.aclose()


async def test_live_etags_rename_and_listing(live: tuple[AdlsStore, str]) -> None:
    store, root = live
    written = await store.write_bytes(f"{root}/src/a b%#?ü", b"payload")
    head = await store.stat(f"{root}/src/a b%#?ü")
    listed = [s async for page in store.list_dir(f"{root}/src") for s in page]
    assert head.etag == written.etag == listed[0].etag
    await store.mkdirs(f"{root}/dst")
    await store.rename(f"{root}/src/a b%#?ü", f"{root}/dst/a b%#?ü", source_etag=written.etag)
    assert (await store.stat(f"{root}/dst/a b%#?ü")).etag == written.etag
    with pytest.raises(NotFound) as caught:
        await store.rename(f"{root}/src/a b%#?ü", f"{root}/dst/x", source_etag=written.etag)
    assert caught.value.path == f"{root}/src/a b%#?ü"


async def test_live_conditions(live: tuple[AdlsStore, str]) -> None:
    store, root = live
    first = await store.write_bytes(f"{root}/f", b"1")
    second = await store.write_bytes(f"{root}/f", b"2")
    await store.write_bytes(f"{root}/g", b"g")
    with pytest.raises(PreconditionFailed):
        await store.rename(f"{root}/f", f"{root}/h", source_etag=first.etag)
    with pytest.raises(AlreadyExists):
        await store.rename(f"{root}/f", f"{root}/g", source_etag=second.etag)
    with pytest.raises(AlreadyExists):
        await store.write_bytes(f"{root}/g", b"again", overwrite=False)
    await store.rename(f"{root}/f", f"{root}/h", source_etag=f'"{second.etag}"')
    with pytest.raises(NotFound) as caught:
        await store.rename(f"{root}/h", f"{root}/no/parent/h")
    assert caught.value.path == f"{root}/no/parent"


async def test_live_listing_delete_mkdirs(live: tuple[AdlsStore, str]) -> None:
    store, root = live
    for n in range(8):
        await store.write_bytes(f"{root}/d/f{n}", bytes(n))
    pages = [page async for page in store.list_dir(f"{root}/d")]
    assert len(pages) >= 3
    assert sorted(s.name for page in pages for s in page) == [f"f{n}" for n in range(8)]
    with pytest.raises(NotFound):
        _ = [page async for page in store.list_dir(f"{root}/d/f0")]
    with pytest.raises(AlreadyExists):
        await store.mkdirs(f"{root}/d/f0")
    with pytest.raises(NotEmpty):
        await store.delete(f"{root}/d")
    assert await store.delete(f"{root}/d", recursive=True) is True
    assert await store.delete(f"{root}/d") is False
