"""The multipart-upload contract (``aiocommit.stores.multipart``), run against every store
that implements it: the memory store and S3 (moto in server mode, over HTTP)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiocommit.errors import AlreadyExists, NotFound, StoreError, Transient
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.multipart import (
    MultipartStore,
    as_multipart,
    multipart_etag,
    supports_multipart,
)
from tests.conftest import STORE_FACTORIES, cloud_store
from tests.helpers import exists

#: the stores with multipart uploads; every other store must say it has none
MULTIPART_STORES = ("memory", "s3")
PART = 5 * 1024 * 1024  # S3's smallest part but the last


def on_moto(store: MultipartStore) -> bool:
    """moto 5 (the S3 emulator) departs from S3 here, as its source shows
    (``moto/s3/models.py``): UploadPart to, and CompleteMultipartUpload of, an aborted or
    unknown upload fail with a 500 (a ``KeyError``) where S3 answers NoSuchUpload; an
    upload ID is not tied to its key; ListMultipartUploads ignores max-uploads ("not yet
    implemented"), so it never pages."""
    return not isinstance(store, MemoryStore)


def gone(store: MultipartStore) -> type[StoreError]:
    """What a call on an upload that is gone raises: NoSuchUpload (``NotFound``) as S3
    answers it; moto's 500 (``Transient``)."""
    return Transient if on_moto(store) else NotFound


@pytest.fixture(params=MULTIPART_STORES)
async def multipart_root(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[MultipartStore, str]]:
    """(store, root) on each store with multipart uploads; the root is empty."""
    if request.param in STORE_FACTORIES:
        async with STORE_FACTORIES[request.param](tmp_path) as (store, root):
            yield as_multipart(store), root
    else:
        async with cloud_store(request.param, request) as (store, root):
            yield as_multipart(store), root


async def uploads_under(store: MultipartStore, prefix: str) -> list[tuple[str, str]]:
    return [(u.path, u.upload_id) async for page in store.list_uploads(prefix) for u in page]


def test_which_stores_have_multipart_uploads(any_store_root: tuple[Store, str]) -> None:
    """A store that gains multipart uploads must join this suite (``MULTIPART_STORES``)."""
    store, _ = any_store_root
    assert supports_multipart(store) == isinstance(store, MemoryStore | _s3_store_class())
    assert supports_multipart(FaultyStore(store, Faults())) == supports_multipart(store)


def _s3_store_class() -> type:
    from aiocommit.stores.s3 import S3Store

    return S3Store


async def test_nothing_visible_until_complete(multipart_root: tuple[MultipartStore, str]) -> None:
    store, root = multipart_root
    path = join(root, "d/file.bin")
    upload_id = await store.create_upload(path)
    etag = await store.upload_part(path, upload_id, 1, b"hello")
    assert etag == hashlib.md5(b"hello", usedforsecurity=False).hexdigest()
    assert not await exists(store, path)
    assert await uploads_under(store, join(root, "")) == [(path, upload_id)]
    status = await store.complete_upload(path, upload_id, [etag])
    assert status.path == path and status.etag == multipart_etag([etag])
    assert await store.read_bytes(path) == b"hello"
    stat = await store.stat(path)
    assert (stat.size, stat.etag) == (5, multipart_etag([etag]))
    assert await uploads_under(store, join(root, "")) == []


async def test_parts_in_order_whatever_the_upload_order(
    multipart_root: tuple[MultipartStore, str],
) -> None:
    store, root = multipart_root
    path = join(root, "big.bin")
    first, second, last = bytes([1]) * PART, bytes([2]) * PART, b"tail"
    upload_id = await store.create_upload(path)
    etags = {3: await store.upload_part(path, upload_id, 3, last)}
    etags[1] = await store.upload_part(path, upload_id, 1, b"replaced by the next upload")
    etags[1] = await store.upload_part(path, upload_id, 1, first)
    etags[2] = await store.upload_part(path, upload_id, 2, second)
    ordered = [etags[1], etags[2], etags[3]]
    status = await store.complete_upload(path, upload_id, ordered)
    assert status.etag == multipart_etag(ordered)
    assert status.etag is not None and status.etag.endswith("-3")
    assert await store.read_bytes(path) == first + second + last


async def test_small_part_but_the_last_is_refused(
    multipart_root: tuple[MultipartStore, str],
) -> None:
    store, root = multipart_root
    path = join(root, "small.bin")
    upload_id = await store.create_upload(path)
    etags = [await store.upload_part(path, upload_id, n, b"tiny") for n in (1, 2)]
    with pytest.raises(StoreError) as caught:
        await store.complete_upload(path, upload_id, etags)
    assert not caught.value.retryable and not isinstance(caught.value, NotFound)
    assert not await exists(store, path)
    assert await store.abort_upload(path, upload_id), "a refused complete leaves the upload"


async def test_complete_with_a_part_never_uploaded_is_refused(
    multipart_root: tuple[MultipartStore, str],
) -> None:
    store, root = multipart_root
    path = join(root, "f.bin")
    upload_id = await store.create_upload(path)
    etag = await store.upload_part(path, upload_id, 1, b"data")
    wrong = hashlib.md5(b"other data", usedforsecurity=False).hexdigest()
    with pytest.raises(StoreError) as caught:
        await store.complete_upload(path, upload_id, [wrong])
    assert not caught.value.retryable and not isinstance(caught.value, NotFound)
    await store.complete_upload(path, upload_id, [etag])
    assert await store.read_bytes(path) == b"data"


async def test_abort_discards_once(multipart_root: tuple[MultipartStore, str]) -> None:
    store, root = multipart_root
    path = join(root, "gone.bin")
    upload_id = await store.create_upload(path)
    etag = await store.upload_part(path, upload_id, 1, b"data")
    assert await store.abort_upload(path, upload_id)
    assert not await store.abort_upload(path, upload_id)
    assert await uploads_under(store, join(root, "")) == []
    assert not await exists(store, path)
    with pytest.raises(gone(store)):
        await store.upload_part(path, upload_id, 2, b"more")
    with pytest.raises(gone(store)):
        await store.complete_upload(path, upload_id, [etag])
    assert not await exists(store, path)


async def test_unknown_upload(multipart_root: tuple[MultipartStore, str]) -> None:
    store, root = multipart_root
    path = join(root, "f.bin")
    known = await store.create_upload(path)
    with pytest.raises(gone(store)):
        await store.upload_part(path, "no-such-upload", 1, b"data")
    with pytest.raises(gone(store)):
        await store.complete_upload(path, "no-such-upload", ["0" * 32])
    assert not await store.abort_upload(path, "no-such-upload")
    if not on_moto(store):
        with pytest.raises(NotFound):  # an upload ID is its path's
            await store.upload_part(join(root, "other.bin"), known, 1, b"data")
    assert await store.abort_upload(path, known)
    assert not await exists(store, path)


async def test_second_complete(multipart_root: tuple[MultipartStore, str]) -> None:
    """A second complete of an applied upload: S3 documents NoSuchUpload (``NotFound``),
    and also answers 200 for a while after (moto always does); either way the object
    is the first complete's."""
    store, root = multipart_root
    path = join(root, "twice.bin")
    upload_id = await store.create_upload(path)
    etags = [await store.upload_part(path, upload_id, 1, b"once")]
    await store.complete_upload(path, upload_id, etags)
    try:
        again = await store.complete_upload(path, upload_id, etags)
    except NotFound:
        pass
    else:
        assert again.etag == multipart_etag(etags)
    assert await store.read_bytes(path) == b"once"
    assert await uploads_under(store, join(root, "")) == []


async def test_memory_answers_a_finished_upload_as_s3_documents(tmp_path: Path) -> None:
    async with STORE_FACTORIES["memory"](tmp_path) as (plain, root):
        store = as_multipart(plain)
        path = join(root, "f.bin")
        upload_id = await store.create_upload(path)
        etags = [await store.upload_part(path, upload_id, 1, b"x")]
        await store.complete_upload(path, upload_id, etags)
        with pytest.raises(NotFound, match="NoSuchUpload"):
            await store.complete_upload(path, upload_id, etags)
        with pytest.raises(NotFound, match="NoSuchUpload"):
            await store.complete_upload(path, "never-created", etags)


async def test_complete_if_none_match(multipart_root: tuple[MultipartStore, str]) -> None:
    store, root = multipart_root
    path = join(root, "exists.bin")
    await store.write_bytes(path, b"already here")
    upload_id = await store.create_upload(path)
    etags = [await store.upload_part(path, upload_id, 1, b"new")]
    with pytest.raises(AlreadyExists):
        await store.complete_upload(path, upload_id, etags, if_none_match=True)
    assert await store.read_bytes(path) == b"already here"
    fresh = join(root, "fresh.bin")
    fresh_id = await store.create_upload(fresh)
    fresh_etags = [await store.upload_part(fresh, fresh_id, 1, b"new")]
    await store.complete_upload(fresh, fresh_id, fresh_etags, if_none_match=True)
    assert await store.read_bytes(fresh) == b"new"
    await store.complete_upload(path, upload_id, etags)  # without the condition it replaces
    assert await store.read_bytes(path) == b"new"


async def test_list_uploads_by_string_prefix_in_pages(
    multipart_root: tuple[MultipartStore, str],
) -> None:
    store, root = multipart_root
    expected = {}
    for n in range(9):  # the fixtures page every 7
        path = join(root, f"a/part-{n}.bin")
        expected[path] = await store.create_upload(path)
    other = join(root, "ab/x.bin")
    other_id = await store.create_upload(other)
    outside = join(root, "b/y.bin")
    await store.create_upload(outside)
    pages = [page async for page in store.list_uploads(join(root, "a/"))]
    assert len(pages) == (1 if on_moto(store) else 2)
    assert {(u.path, u.upload_id) for page in pages for u in page} == set(expected.items())
    assert all(u.initiated > 0 for page in pages for u in page)
    # a plain string prefix, as S3 lists: "a" also matches "ab/"
    assert set(await uploads_under(store, join(root, "a"))) == {
        *expected.items(),
        (other, other_id),
    }
    assert len(await uploads_under(store, join(root, ""))) == 11


async def test_two_uploads_to_one_path(multipart_root: tuple[MultipartStore, str]) -> None:
    """Uploads are independent: the last complete wins, an abort touches only its own."""
    store, root = multipart_root
    path = join(root, "f.bin")
    first = await store.create_upload(path)
    second = await store.create_upload(path)
    assert first != second
    first_etags = [await store.upload_part(path, first, 1, b"first")]
    second_etags = [await store.upload_part(path, second, 1, b"second")]
    assert sorted(await uploads_under(store, path)) == sorted([(path, first), (path, second)])
    await store.complete_upload(path, second, second_etags)
    assert await uploads_under(store, path) == [(path, first)]
    await store.complete_upload(path, first, first_etags)
    assert await store.read_bytes(path) == b"first"
