"""AdlsStore against the in-package DFS emulator, over real HTTP: the lean REST client
with azure-core's credentials (the Datalake SDK is not used)."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from azure.core.credentials import AccessToken

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
from aiocommit.stores.adls import AdlsStore
from aiocommit.stores.adls_rest import BODY_SLICE_BYTES
from aiocommit.stores.base import FileStatus
from aiocommit.stores.registry import open_store
from aiocommit_testing.adls_emulator import EmulatorHandle, run_adls_emulator

from .adls_fixtures import adls_store_factory, make_store
from .turn_counts import starts_per_turn

_ENV = (
    "AIOCOMMIT_ADLS_ENDPOINT",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def emulator() -> AsyncIterator[EmulatorHandle]:
    async with run_adls_emulator() as handle:
        yield handle


@pytest.fixture
async def store(emulator: EmulatorHandle) -> AsyncIterator[AdlsStore]:
    async with adls_store_factory(emulator) as (adls, _root):
        yield adls


async def listing(store: AdlsStore, path: str) -> list[list[FileStatus]]:
    return [page async for page in store.list_dir(path)]


# -- the error table (stores.md 1.3): every mapped status/code, injected over HTTP ----------

Op = Callable[[AdlsStore], Awaitable[object]]


async def _stat(store: AdlsStore) -> object:
    return await store.stat("/root/f")


async def _rename(store: AdlsStore) -> object:
    await store.rename("/root/f", "/root/d/g")
    return None


async def _mkdirs(store: AdlsStore) -> object:
    await store.mkdirs("/root/d2")
    return None


async def _delete(store: AdlsStore) -> object:
    return await store.delete("/root/d")


async def _write_new(store: AdlsStore) -> object:
    return await store.write_bytes("/root/new", b"x", overwrite=False)


async def _list(store: AdlsStore) -> object:
    return await listing(store, "/root")


async def _read(store: AdlsStore) -> object:
    return await store.read_bytes("/root/f")


ERROR_TABLE: list[tuple[int, str, str, Op, type[StoreError], str | None]] = [
    # status, x-ms-error-code, emulator operation, store call, expected, expected .path
    (503, "ServerBusy", "head", _stat, Throttled, "/root/f"),
    (500, "OperationTimedOut", "rename", _rename, Throttled, "/root/f"),
    (429, "TooManyRequests", "list", _list, Throttled, "/root"),
    (500, "InternalError", "create", _mkdirs, Transient, "/root/d2"),
    (404, "SourcePathNotFound", "rename", _rename, NotFound, "/root/f"),
    # 404 RenameDestinationParentPathNotFound: test_transient_parent_not_found_*
    (404, "PathNotFound", "list", _list, NotFound, "/root"),
    (404, "BlobNotFound", "read", _read, NotFound, "/root/f"),
    (503, "ServerBusy", "read", _read, Throttled, "/root/f"),
    (404, "BlobNotFound", "head", _stat, NotFound, "/root/f"),
    (409, "PathAlreadyExists", "rename", _rename, AlreadyExists, "/root/d/g"),
    (409, "PathConflict", "create", _mkdirs, AlreadyExists, "/root/d2"),
    (409, "InvalidDestinationPath", "rename", _rename, AlreadyExists, "/root/d/g"),
    (409, "DirectoryNotEmpty", "delete", _delete, NotEmpty, "/root/d"),
    (412, "ConditionNotMet", "flush", _write_new, PreconditionFailed, "/root/new"),
    (412, "SourceConditionNotMet", "rename", _rename, PreconditionFailed, "/root/f"),
    (412, "LeaseIdMissing", "rename", _rename, PreconditionFailed, "/root/f"),
    (401, "NoAuthenticationInformation", "head", _stat, PermissionDenied, "/root/f"),
    (403, "AuthorizationPermissionMismatch", "rename", _rename, PermissionDenied, "/root/f"),
    (403, "AuthenticationFailed", "list", _list, PermissionDenied, "/root"),
    (400, "InvalidQueryParameterValue", "create", _mkdirs, StoreError, "/root/d2"),
]


@pytest.mark.parametrize(
    ("status", "code", "operation", "call", "expected", "path"),
    ERROR_TABLE,
    ids=[f"{row[0]}-{row[1]}" for row in ERROR_TABLE],
)
async def test_error_table(
    store: AdlsStore,
    emulator: EmulatorHandle,
    status: int,
    code: str,
    operation: str,
    call: Op,
    expected: type[StoreError],
    path: str | None,
) -> None:
    await store.write_bytes("/root/f", b"data")
    await store.mkdirs("/root/d")
    emulator.faults.inject(status, code, operation=operation, retry_after=2.5)
    with pytest.raises(StoreError) as caught:
        await call(store)
    error = caught.value
    assert type(error) is expected
    assert error.path == path
    assert code in str(error)
    assert emulator.stats[f"error:{status}:{code}"] == 1
    if expected is Throttled:
        assert isinstance(error, Throttled)
        assert error.retry_after == 2.5
        assert error.retryable
    if expected is Transient:
        assert isinstance(error, Transient)
        assert error.maybe_applied
    if expected is PermissionDenied:
        assert "account key" in str(error)
        assert isinstance(error, PermissionError)
        assert not error.retryable
    if expected is StoreError:
        assert not error.retryable


async def test_throttle_without_retry_after(store: AdlsStore, emulator: EmulatorHandle) -> None:
    assert await store.stat("/") == FileStatus("/", True)  # the root is answered locally
    emulator.faults.inject(503, "ServerBusy", operation="head")
    with pytest.raises(Throttled) as caught:
        await store.stat("/root")
    assert caught.value.retry_after is None
    assert emulator.stats["head"] == 1


async def test_random_throttling_is_seeded(emulator: EmulatorHandle, store: AdlsStore) -> None:
    await store.write_bytes("/root/f", b"x")

    async def pattern() -> list[float | None]:
        outcome: list[float | None] = []
        for _ in range(40):
            try:
                await store.stat("/root/f")
                outcome.append(None)
            except Throttled as error:
                outcome.append(error.retry_after)
        return outcome

    emulator.faults.throttle_probability = 0.5
    emulator.faults.reseed(7)
    first = await pattern()
    emulator.faults.reseed(7)
    assert await pattern() == first
    assert set(first) == {None, 1.0}
    assert 5 < first.count(1.0) < 35


async def test_read_timeout_is_transient_maybe_applied(emulator: EmulatorHandle) -> None:
    async with adls_store_factory(emulator, read_timeout=0.2) as (store, root):
        emulator.faults.latency_seconds = 1.0
        with pytest.raises(Transient) as caught:
            await store.stat(f"{root}/x")
        assert caught.value.maybe_applied


async def test_connect_refused_is_transient_not_applied() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = AdlsStore("acct", "fs", endpoint=f"http://127.0.0.1:{port}/acct", account_key="a2V5")
    try:
        with pytest.raises(Transient) as caught:
            await store.stat("/x")
        assert caught.value.maybe_applied is False
    finally:
        await store.aclose()


async def test_dropped_connection_after_apply_is_maybe_applied(
    store: AdlsStore, emulator: EmulatorHandle
) -> None:
    written = await store.write_bytes("/root/f", b"data")
    emulator.faults.inject(operation="rename", apply_first=True, disconnect=True)
    with pytest.raises(Transient) as caught:
        await store.rename("/root/f", "/root/g")
    # azure-core reports a reset after send as ServiceRequestError, yet the rename happened
    assert caught.value.maybe_applied
    assert emulator.stats["rename"] == 1  # aiohttp did not resend the PUT by itself
    assert (await store.stat("/root/g")).etag == written.etag


async def test_wrong_account_name_is_permission_denied(emulator: EmulatorHandle) -> None:
    emulator.create_filesystem("fs")
    store = AdlsStore("other", "fs", endpoint=emulator.endpoint, account_key=emulator.key)
    try:
        with pytest.raises(PermissionDenied, match=r"AuthenticationFailed.*account key"):
            await store.stat("/x")
    finally:
        await store.aclose()


# -- rename ------------------------------------------------------------------------------------


async def test_rename_no_overwrite_and_overwrite(store: AdlsStore) -> None:
    await store.write_bytes("/root/a", b"new")
    old = await store.write_bytes("/root/b", b"old")
    with pytest.raises(AlreadyExists) as caught:
        await store.rename("/root/a", "/root/b")
    assert caught.value.path == "/root/b"
    assert (await store.stat("/root/b")).etag == old.etag
    await store.rename("/root/a", "/root/b", overwrite=True)
    assert await store.read_bytes("/root/b") == b"new"
    with pytest.raises(NotFound):
        await store.stat("/root/a")


async def test_rename_source_etag(store: AdlsStore) -> None:
    first = await store.write_bytes("/root/a", b"v1")
    second = await store.write_bytes("/root/a", b"v2")
    assert first.etag != second.etag
    with pytest.raises(PreconditionFailed) as caught:
        await store.rename("/root/a", "/root/b", source_etag=first.etag)
    assert caught.value.path == "/root/a"
    assert await store.read_bytes("/root/a") == b"v2"
    with pytest.raises(NotFound):
        await store.stat("/root/b")
    listed = {s.name: s.etag for page in await listing(store, "/root") for s in page}
    assert listed["a"] == second.etag  # list, HEAD and write etags compare equal unquoted
    await store.rename("/root/a", "/root/b", source_etag=f'"{listed["a"]}"')
    assert (await store.stat("/root/b")).etag == second.etag


async def test_rename_missing_source_and_parent(store: AdlsStore) -> None:
    await store.write_bytes("/root/f", b"x")
    with pytest.raises(NotFound) as caught:
        await store.rename("/root/nope", "/root/g")
    assert caught.value.path == "/root/nope"
    with pytest.raises(NotFound) as caught:
        await store.rename("/root/f", "/root/no/such/g")
    assert caught.value.path == "/root/no/such"
    await store.mkdirs("/root/dir")
    with pytest.raises(AlreadyExists):  # a directory is in the way, even with overwrite
        await store.rename("/root/f", "/root/dir", overwrite=True)


async def test_transient_parent_not_found_is_retried_once(
    store: AdlsStore, emulator: EmulatorHandle
) -> None:
    """HADOOP-18242: a live account may answer 404 RenameDestinationParentPathNotFound
    while the parent exists; the adapter checks the parent and retries once."""
    written = await store.write_bytes("/root/f", b"data")
    await store.mkdirs("/root/d")
    emulator.faults.inject(404, "RenameDestinationParentPathNotFound", operation="rename")
    await store.rename("/root/f", "/root/d/g", source_etag=written.etag)
    assert (await store.stat("/root/d/g")).etag == written.etag
    assert emulator.stats["rename"] == 2
    assert emulator.stats["error:404:RenameDestinationParentPathNotFound"] == 1


async def test_transient_parent_not_found_twice_is_not_found_of_parent(
    store: AdlsStore, emulator: EmulatorHandle
) -> None:
    await store.write_bytes("/root/f", b"data")
    await store.mkdirs("/root/d")
    emulator.faults.inject(404, "RenameDestinationParentPathNotFound", operation="rename", times=2)
    with pytest.raises(NotFound, match="RenameDestinationParentPathNotFound") as caught:
        await store.rename("/root/f", "/root/d/g")
    assert caught.value.path == "/root/d"
    assert emulator.stats["rename"] == 2
    assert await store.read_bytes("/root/f") == b"data"


async def test_lost_rename_response_then_retry(store: AdlsStore, emulator: EmulatorHandle) -> None:
    written = await store.write_bytes("/root/task/part-0", b"payload")
    await store.mkdirs("/root/dest")
    emulator.faults.drop_rename_response_probability = 1.0
    with pytest.raises(Throttled, match="OperationTimedOut"):
        await store.rename("/root/task/part-0", "/root/dest/part-0", source_etag=written.etag)
    emulator.faults.drop_rename_response_probability = 0.0
    with pytest.raises(NotFound) as caught:
        await store.rename("/root/task/part-0", "/root/dest/part-0", source_etag=written.etag)
    assert caught.value.path == "/root/task/part-0"
    moved = await store.stat("/root/dest/part-0")
    assert moved.etag == written.etag
    assert emulator.stats["injected:drop_rename_response"] == 1
    assert emulator.stats["rename"] == 2


# -- listing, delete, mkdirs, read/write --------------------------------------------------------


async def test_listing_with_continuation(store: AdlsStore, emulator: EmulatorHandle) -> None:
    await asyncio.gather(*(store.write_bytes(f"/root/d/f{n:02d}", bytes(n)) for n in range(30)))
    await store.mkdirs("/root/d/sub")
    before = emulator.stats["list"]
    pages = await listing(store, "/root/d")
    assert [len(page) for page in pages] == [7, 7, 7, 7, 3]
    assert emulator.stats["list"] - before == 5
    found = {s.name: (s.is_dir, s.size) for page in pages for s in page}
    assert found == {**{f"f{n:02d}": (False, n) for n in range(30)}, "sub": (True, 0)}
    assert all(s.path == f"/root/d/{s.name}" for page in pages for s in page)


async def test_list_missing_or_file_is_not_found(store: AdlsStore) -> None:
    await store.write_bytes("/root/f", b"x")
    with pytest.raises(NotFound):
        await listing(store, "/root/missing")
    with pytest.raises(NotFound):
        await listing(store, "/root/f")
    await store.mkdirs("/root/empty")
    assert await listing(store, "/root/empty") == []


async def test_delete(store: AdlsStore) -> None:
    assert await store.delete("/root/missing") is False
    assert await store.delete("/root/no/parent/either", recursive=True) is False
    await store.write_bytes("/root/t/a/f", b"x")
    with pytest.raises(NotEmpty):
        await store.delete("/root/t")
    assert await store.delete("/root/t", recursive=True) is True
    assert await store.delete("/root/t", recursive=True) is False
    with pytest.raises(PreconditionFailed):
        await store.delete("/")


async def test_mkdirs(store: AdlsStore) -> None:
    await store.mkdirs("/root/x/y/z")
    await store.mkdirs("/root/x/y/z")
    assert (await store.stat("/root/x/y")).is_dir
    await store.write_bytes("/root/f", b"x")
    with pytest.raises(AlreadyExists):
        await store.mkdirs("/root/f")
    with pytest.raises(AlreadyExists):
        await store.mkdirs("/root/f/below")
    assert await store.read_bytes("/root/f") == b"x"
    await store.mkdirs("/")


async def test_write_read_stat(store: AdlsStore, tmp_path: Path) -> None:
    first = await store.write_bytes("/root/a/b/f", b"hello")
    assert first == await store.stat("/root/a/b/f")
    assert first.etag is not None and first.etag.startswith("0x8D")
    with pytest.raises(AlreadyExists):
        await store.write_bytes("/root/a/b/f", b"other", overwrite=False)
    empty = await store.write_bytes("/root/a/b/f", b"")  # upload_data(b"") would do nothing
    assert (empty.size, await store.read_bytes("/root/a/b/f")) == (0, b"")
    assert empty.etag != first.etag
    created = await store.write_bytes("/root/new", b"", overwrite=False)
    assert (await store.stat("/root/new")).etag == created.etag
    with pytest.raises(AlreadyExists):
        await store.write_bytes("/root/a", b"x")  # a directory is there
    with pytest.raises(NotFound):
        await store.read_bytes("/root/missing")
    with pytest.raises(NotFound):
        await store.read_bytes("/root/a")  # a directory
    assert await store.stat("/") == FileStatus("/", True)
    local = tmp_path / "local.bin"
    local.write_bytes(b"\x00\x01" * 5000)
    uploaded = await store.upload_file(str(local), "/root/up/local.bin")
    assert uploaded.size == 10000
    assert await store.read_bytes("/root/up/local.bin") == b"\x00\x01" * 5000


async def test_a_body_over_a_mebibyte_is_sent_in_slices(store: AdlsStore) -> None:
    """aiohttp warns (``ResourceWarning``) of a ``bytes`` body over 1 MiB, which it says
    may hold the loop; a job commit writes its plan's manifest copies in parts of up to
    8 MB, so on ADLS it warned (and failed under ``-W error``) for 200 manifests. Now such
    a body goes in slices under its own ``Content-Length``, and lands whole."""
    data = bytes(range(256)) * (4 * BODY_SLICE_BYTES // 256) + b"tail"
    written = await store.write_bytes("/root/big", data)
    assert written.size == len(data)
    assert await store.read_bytes("/root/big") == data


_EVERY_CALL = """
import asyncio, sys
from aiocommit.stores.adls import AdlsStore

async def main(endpoint, account, key, local):
    async with AdlsStore(account, "fs", endpoint=endpoint, account_key=key) as store:
        await store.mkdirs("/d/e")
        await store.write_bytes("/d/new", b"x" * 10, overwrite=False)
        await store.write_bytes("/d/new", b"y" * 5)
        await store.write_bytes("/d/empty", b"")
        await store.upload_file(local, "/d/up")
        assert await store.read_bytes("/d/new") == b"y" * 5
        assert (await store.stat("/d/up")).size == 3
        await store.rename("/d/new", "/d/e/moved")
        assert [s.path async for page in store.list_dir("/d/e") for s in page] == ["/d/e/moved"]
        assert await store.delete("/d", recursive=True)
    print(sorted({m for m in sys.modules if m.split(".")[0] == "azure"}))

asyncio.run(main(*sys.argv[1:]))
"""


async def test_no_call_imports_an_azure_package(emulator: EmulatorHandle, tmp_path: Path) -> None:
    """Every store call goes through the lean client: ``azure-storage-file-datalake`` is
    never imported (~26,000 objects that every full garbage collection of the host
    walked, ~30 % of its time on the stress bench: a loop stall), and with an account key
    neither is azure-core (49 modules, ~3,000 objects). In a fresh interpreter, as a
    service would use the store."""
    emulator.create_filesystem("fs")
    local = tmp_path / "local.bin"
    local.write_bytes(b"abc")
    script = tmp_path / "every_call.py"
    script.write_text(_EVERY_CALL)
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), emulator.endpoint, emulator.account, emulator.key,
        str(local), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert out.decode().strip() == "[]"


async def test_requests_started_in_one_loop_turn_are_bounded(store: AdlsStore) -> None:
    """Hundreds of calls ready in one loop turn (answers arriving together, each starting
    its next call) each signed and wrote a request in that turn, ~0.2 ms of the loop's
    CPU each (847 ms turns in a 100,000-file commit). Counted per turn, not timed."""
    await store.write_bytes("/root/f", b"x")
    statuses, per_turn = await starts_per_turn(
        store._dfs(), "session", [lambda: store.stat("/root/f")] * 300
    )
    assert len({status.etag for status in statuses}) == 1
    assert sum(per_turn.values()) == 300
    assert max(per_turn.values()) <= STARTS_PER_TURN


@pytest.mark.parametrize(
    "name",
    [
        "with space",
        "100%",
        "50%25",
        "hash#tag",
        "q?x=1&y=2",
        "ünïcødé-中文-🙂",
        "plus+sign",
        "~tilde",
    ],
)
async def test_odd_path_characters(store: AdlsStore, name: str) -> None:
    source, dest = f"/root/src {name}/{name}", f"/root/dst/{name}"
    written = await store.write_bytes(source, name.encode())
    listed = [s for page in await listing(store, f"/root/src {name}") for s in page]
    assert [(s.path, s.etag) for s in listed] == [(source, written.etag)]
    await store.mkdirs("/root/dst")
    await store.rename(source, dest, source_etag=written.etag)
    assert await store.read_bytes(dest) == name.encode()
    assert (await store.stat(dest)).etag == written.etag
    assert store.unqualify(store.qualify(dest)) == dest
    assert await store.delete(dest) is True


# -- URLs, credentials, registry, session -------------------------------------------------------


async def test_qualify_and_unqualify() -> None:
    store, path = AdlsStore.from_url(
        "abfs://data@acct.dfs.core.windows.net/out/x", account_key="a2V5"
    )
    assert path == "/out/x"
    assert store.qualify("/out/x/f") == "abfs://data@acct.dfs.core.windows.net/out/x/f"
    assert store.unqualify("abfss://data@acct.dfs.core.windows.net/a b#?") == "/a b#?"
    for other in (
        "abfs://other@acct.dfs.core.windows.net/x",
        "abfs://data@acct2.dfs.core.windows.net/x",
        "gs://data/x",
    ):
        with pytest.raises(ValueError, match="is not"):
            store.unqualify(other)
    assert store.capabilities.etags_preserved_in_rename and store.capabilities.atomic_rename
    await store.aclose()


async def test_open_store_from_env(
    emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator.create_filesystem("data")
    monkeypatch.setenv("AIOCOMMIT_ADLS_ENDPOINT", emulator.endpoint)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", emulator.key)
    store, path = open_store(f"abfss://data@{emulator.account}.dfs.core.windows.net/out")
    try:
        assert isinstance(store, AdlsStore) and path == "/out"
        assert store.credential_kind == "account key"
        await store.write_bytes("/out/f", b"x")
        assert (
            store.qualify("/out/f") == f"abfss://data@{emulator.account}.dfs.core.windows.net/out/f"
        )
    finally:
        await store.aclose()


@pytest.mark.parametrize("kind", ["sas", "connection-string-key", "connection-string-sas"])
async def test_other_credentials(
    emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    emulator.create_filesystem("fs")
    sas = "sv=2024-08-04&ss=b&srt=sco&sp=rwdlac&se=2099-01-01T00:00:00Z&sig=c2lnbmF0dXJl"
    if kind == "sas":
        monkeypatch.setenv("AZURE_STORAGE_SAS_TOKEN", "?" + sas)
    elif kind == "connection-string-key":
        monkeypatch.setenv(
            "AZURE_STORAGE_CONNECTION_STRING",
            f"AccountName={emulator.account};AccountKey={emulator.key};"
            f"DfsEndpoint={emulator.endpoint}",
        )
    else:
        monkeypatch.setenv(
            "AZURE_STORAGE_CONNECTION_STRING",
            f"BlobEndpoint={emulator.endpoint};SharedAccessSignature={sas}",
        )
    if kind == "sas":
        store = AdlsStore(emulator.account, "fs", endpoint=emulator.endpoint)
    else:
        store = AdlsStore(emulator.account, "fs")
    try:
        written = await store.write_bytes("/d/f", b"x")
        await store.rename("/d/f", "/d/g", source_etag=written.etag)
        assert (await store.stat("/d/g")).etag == written.etag
        assert await store.read_bytes("/d/g") == b"x"
        assert ("SAS" in store.credential_kind) == kind.endswith("sas")
    finally:
        await store.aclose()


def test_credential_errors() -> None:
    with pytest.raises(ValueError, match="account"):
        AdlsStore("acct", "fs", connection_string="AccountName=other;AccountKey=a2V5")
    with pytest.raises(ValueError, match="https"):
        AdlsStore("acct", "fs", endpoint="http://127.0.0.1:1/acct", token_credential=_NoToken())
    with pytest.raises(ValueError, match="scheme"):
        AdlsStore("acct", "fs", scheme="wasb", account_key="a2V5")


class _NoToken:
    """Stands in for an ``AsyncTokenCredential``; never asked for a token here."""

    async def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        raise AssertionError("not reached")

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> _NoToken:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None


async def test_default_azure_credential_is_lazy() -> None:
    pytest.importorskip("azure.identity.aio")
    store = AdlsStore("acct", "fs")
    assert store.credential_kind == "DefaultAzureCredential"
    assert store._credential is None  # created on first use, closed by aclose
    await store.aclose()


async def test_one_session_bounded_by_connections(emulator: EmulatorHandle) -> None:
    async with adls_store_factory(emulator, connections=8) as (store, root):
        await store.write_bytes(f"{root}/f", b"x")
        emulator.faults.latency_seconds = 0.02
        statuses = await asyncio.gather(*(store.stat(f"{root}/f") for _ in range(64)))
        assert len({s.etag for s in statuses}) == 1
        assert emulator.max_in_flight == 8
        session = store._session
        assert session is not None
    assert session.closed
    await store.aclose()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await store.stat(f"{root}/f")


async def test_concurrent_renames(store: AdlsStore) -> None:
    written = await asyncio.gather(
        *(store.write_bytes(f"/root/src/f{n}", b"x" * n) for n in range(100))
    )
    await store.mkdirs("/root/dst")
    await asyncio.gather(
        *(
            store.rename(f"/root/src/f{n}", f"/root/dst/f{n}", source_etag=w.etag)
            for n, w in enumerate(written)
        )
    )
    listed = {s.name: s.etag for page in await listing(store, "/root/dst") for s in page}
    assert listed == {f"f{n}": w.etag for n, w in enumerate(written)}
    assert await listing(store, "/root/src") == []


# -- the emulator itself --------------------------------------------------------------------------


async def test_emulator_serves_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        async with run_adls_emulator("0.0.0.0"):
            pass


async def test_emulator_control_endpoint(emulator: EmulatorHandle, store: AdlsStore) -> None:
    url = f"http://{emulator.host}:{emulator.port}/_emulator"
    async with aiohttp.ClientSession() as session:
        change = {"throttle_probability": 1.0, "retry_after_seconds": 3, "seed": 1}
        async with session.put(f"{url}/faults", json=change) as response:
            assert (await response.json())["throttle_probability"] == 1.0
        with pytest.raises(Throttled) as caught:
            await store.stat("/root/f")
        assert caught.value.retry_after == 3.0
        async with session.get(f"{url}/stats") as response:
            stats = await response.json()
    assert stats["injected:throttle"] == 1
    assert stats["error:503:ServerBusy"] == 1


async def test_emulator_rejects_anonymous(emulator: EmulatorHandle) -> None:
    emulator.create_filesystem("fs")
    async with (
        aiohttp.ClientSession() as session,
        session.head(f"{emulator.endpoint}/fs/x") as response,
    ):
        assert response.status == 401
        assert response.headers["x-ms-error-code"] == "NoAuthenticationInformation"
    store = make_store(emulator, "fs")
    try:
        with pytest.raises(NotFound):
            await store.stat("/x")
    finally:
        await store.aclose()
