"""The ADLS emulator against the documented service behaviour (Path-Create, Path-List,
"Authorize with Shared Key", Hadoop's ABFS client): each documented difference fixed in
issue #11 has a test here. Requests are signed by the adapter's lean client or sent raw."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from email.utils import formatdate
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from aioresponses import aioresponses
from yarl import URL

from aiocommit.errors import NotFound, StoreError
from aiocommit.stores.adls import AdlsStore
from aiocommit.stores.adls_rest import DfsResponseError, LeanDfsClient
from aiocommit_testing.adls_emulator import EmulatorHandle, run_adls_emulator

from .adls_fixtures import adls_store_factory, make_store


@pytest.fixture
async def emulator() -> AsyncIterator[EmulatorHandle]:
    async with run_adls_emulator() as handle:
        yield handle


@pytest.fixture
async def store(emulator: EmulatorHandle) -> AsyncIterator[AdlsStore]:
    async with adls_store_factory(emulator) as (adls, _root):
        yield adls


async def call(
    store: AdlsStore,
    method: str,
    rel: str | None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str, Any]:
    """(status, x-ms-error-code, response headers) of one signed request."""
    try:
        response = await store._dfs().request(method, rel, dict(query or {}), dict(headers or {}))
    except DfsResponseError as error:
        return error.status, error.code, error.headers
    return response.status, "", response.headers


LEASE = "5c1a4c2e-0000-0000-0000-000000000000"


def rename_headers(source: str, **extra: str) -> dict[str, str]:
    return {"x-ms-rename-source": f"/{quote(source)}", **extra}


# -- SharedKey signatures ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["with space", "100%", "50%25", "ünï-中文-🙂", "a+b", "q?x=1"])
async def test_signatures_verified_for_odd_names(
    store: AdlsStore, emulator: EmulatorHandle, name: str
) -> None:
    await store.write_bytes(f"/root/{name}", b"x")  # signed by the SDK
    assert (await store.stat(f"/root/{name}")).size == 1  # signed by the lean client
    assert emulator.stats["auth:bad_signature"] == 0
    # the same request signed over a differently encoded path is refused
    lean = store._dfs()
    raw_path = f"/{emulator.account}/{store.filesystem}/root/{name}"  # not percent-encoded
    headers = {"x-ms-version": "2025-01-05", "x-ms-date": formatdate(time.time(), usegmt=True)}
    signature = lean.sign("HEAD", raw_path, {}, headers)
    headers["Authorization"] = f"SharedKey {emulator.account}:{signature}"
    url = f"{emulator.endpoint}/{store.filesystem}/root/{quote(name)}"
    expected = 200 if quote(name) == name else 403
    async with (
        aiohttp.ClientSession() as session,
        session.head(URL(url, encoded=True), headers=headers) as response,
    ):
        assert response.status == expected
    assert emulator.stats["auth:bad_signature"] == (expected == 403)


async def test_wrong_key_or_tampered_header_is_refused(emulator: EmulatorHandle) -> None:
    emulator.create_filesystem("fs")
    other_key = "b3RoZXIta2V5LW9mLXRoZS1zYW1lLWFjY291bnQ="
    wrong = AdlsStore(emulator.account, "fs", endpoint=emulator.endpoint, account_key=other_key)
    try:
        status, code, _ = await call(wrong, "HEAD", "x")
        assert (status, code) == (403, "AuthenticationFailed")
    finally:
        await wrong.aclose()
    right = make_store(emulator, "fs")
    try:
        lean = right._dfs()
        original = lean.sign

        def sign_then_tamper(
            method: str, raw_path: str, query: dict[str, str], headers: dict[str, str]
        ) -> str:
            signature = original(method, raw_path, query, headers)
            headers["x-ms-meta-added"] = "after signing"
            return signature

        lean.sign = sign_then_tamper  # type: ignore[method-assign]
        status, code, _ = await call(right, "HEAD", "x")
        assert (status, code) == (403, "AuthenticationFailed")
        lean.sign = original  # type: ignore[method-assign]
        status, _, _ = await call(right, "HEAD", "x")
        assert status == 404  # signed right: the path is simply missing
    finally:
        await right.aclose()
    assert emulator.stats["auth:bad_signature"] == 2


# -- rename -----------------------------------------------------------------------------------


async def test_directory_rename_into_itself_or_same_path(store: AdlsStore) -> None:
    await store.write_bytes("/root/d/f", b"x")
    fs = store.filesystem
    for dest in ("root/d/sub", "root/d"):
        status, code, _ = await call(store, "PUT", dest, {}, rename_headers(f"{fs}/root/d"))
        assert (status, code) == (400, "InvalidRenameSourcePath")
    status, _, _ = await call(store, "PUT", "root/d/f", {}, rename_headers(f"{fs}/root/d/f"))
    assert status == 201  # a file renamed onto itself is accepted
    assert await store.read_bytes("/root/d/f") == b"x"


async def test_destination_of_the_other_type(store: AdlsStore) -> None:
    await store.write_bytes("/root/f", b"x")
    await store.mkdirs("/root/d")
    fs = store.filesystem
    for source, dest in (("root/f", "root/d"), ("root/d", "root/f")):
        status, code, _ = await call(store, "PUT", dest, {}, rename_headers(f"{fs}/{source}"))
        assert (status, code) == (409, "InvalidSourceOrDestinationResourceType")


async def test_source_conditions(store: AdlsStore) -> None:
    await store.write_bytes("/root/f", b"x")
    fs = store.filesystem
    past = formatdate(time.time() - 3600, usegmt=True)
    future = formatdate(time.time() + 3600, usegmt=True)
    for extra in (
        {"x-ms-source-if-none-match": "*"},
        {"x-ms-source-if-modified-since": future},
        {"x-ms-source-if-unmodified-since": past},
    ):
        headers = rename_headers(f"{fs}/root/f", **extra)
        status, code, _ = await call(store, "PUT", "root/g", {}, headers)
        assert (status, code) == (412, "SourceConditionNotMet"), extra
    headers = rename_headers(f"{fs}/root/f", **{"x-ms-source-if-modified-since": past})
    assert (await call(store, "PUT", "root/g", {}, headers))[0] == 201


async def test_destination_dates_leases_and_mode(store: AdlsStore) -> None:
    await store.write_bytes("/root/f", b"x")
    await store.write_bytes("/root/g", b"y")
    fs = store.filesystem
    past = formatdate(time.time() - 3600, usegmt=True)
    cases: list[tuple[dict[str, str], dict[str, str], int, str]] = [
        ({}, {"if-unmodified-since": past}, 412, "ConditionNotMet"),
        ({}, {"x-ms-lease-id": LEASE}, 412, "LeaseNotPresent"),
        ({}, {"x-ms-source-lease-id": LEASE}, 412, "LeaseNotPresent"),
        ({"mode": "atomic"}, {}, 400, "InvalidQueryParameterValue"),
    ]  # fmt: skip
    for query, extra, expected_status, expected_code in cases:
        headers = rename_headers(f"{fs}/root/f", **extra)
        status, code, _ = await call(store, "PUT", "root/g", query, headers)
        assert (status, code) == (expected_status, expected_code), (query, extra)
    assert await store.read_bytes("/root/g") == b"y"
    status, _, _ = await call(
        store, "PUT", "root/g", {"mode": "posix"}, rename_headers(f"{fs}/root/f")
    )
    assert status == 201
    assert await store.read_bytes("/root/g") == b"x"


async def test_rename_across_filesystems_of_the_account(
    store: AdlsStore, emulator: EmulatorHandle
) -> None:
    written = await store.write_bytes("/root/f", b"x")
    emulator.create_filesystem("other")
    other = make_store(emulator, "other")
    try:
        await other.mkdirs("/in")
        headers = rename_headers(f"{store.filesystem}/root/f")
        status, _, _ = await call(other, "PUT", "in/f", {"mode": "legacy"}, headers)
        assert status == 201
        assert (await other.stat("/in/f")).etag == written.etag
        with pytest.raises(NotFound):
            await store.stat("/root/f")
    finally:
        await other.aclose()


async def test_rename_continuation_is_followed(store: AdlsStore, emulator: EmulatorHandle) -> None:
    written = await store.write_bytes("/root/f", b"x")
    # a single request that ignores the token leaves the rename unfinished
    emulator.faults.rename_continuations = 1
    status, _, headers = await call(
        store, "PUT", "root/g", {}, rename_headers(f"{store.filesystem}/root/f")
    )
    token = headers["x-ms-continuation"]
    assert status == 201 and token
    assert (await store.stat("/root/f")).etag == written.etag
    # a token names its own rename only
    wrong = {"continuation": token}
    status, code, _ = await call(
        store, "PUT", "root/h", wrong, rename_headers(f"{store.filesystem}/root/f")
    )
    assert (status, code) == (400, "InvalidQueryParameterValue")
    # the adapter follows every token to the end
    emulator.faults.rename_continuations = 3
    before = emulator.stats["rename"]
    await store.rename("/root/f", "/root/g", source_etag=written.etag)
    assert emulator.stats["rename"] - before == 4
    assert (await store.stat("/root/g")).etag == written.etag
    with pytest.raises(NotFound):
        await store.stat("/root/f")


async def test_transient_parent_not_found_fault(store: AdlsStore, emulator: EmulatorHandle) -> None:
    await store.write_bytes("/root/f", b"x")
    await store.mkdirs("/root/d")
    emulator.faults.rename_parent_not_found_probability = 1.0
    with pytest.raises(NotFound) as caught:
        await store.rename("/root/f", "/root/d/f")
    assert caught.value.path == "/root/d"  # retried once after checking the parent
    assert emulator.stats["injected:rename_parent_not_found"] == 2
    emulator.faults.rename_parent_not_found_probability = 0.5
    emulator.faults.reseed(3)
    names = [f"/root/d/n{n}" for n in range(20)]
    for name in names:
        await store.write_bytes(name + ".src", b"y")
    renamed = 0
    for name in names:
        try:
            await store.rename(name + ".src", name)
            renamed += 1
        except NotFound:
            pass
    assert renamed > 12  # one retry rescues most; the rest surface as NotFound(parent)


# -- listing ------------------------------------------------------------------------------------


async def test_recursive_listing_resumes_after_a_deleted_continuation_path(
    store: AdlsStore, emulator: EmulatorHandle
) -> None:
    for name in ("a/x", "a/y", "a-b", "b", "c"):
        await store.write_bytes(f"/root/{name}", b"x")
    query = {"resource": "filesystem", "directory": "root", "recursive": "true", "maxResults": "3"}
    first = await store._dfs().request("GET", None, dict(query), {}, read_body=True)
    token = first.headers["x-ms-continuation"]
    assert "+" in token or "/" in token  # a client must URL-encode it
    assert await store.delete("/root/a/y")  # the page's last path
    rest = await store._dfs().request(
        "GET", None, {**query, "continuation": token}, {}, read_body=True
    )
    assert b'"root/a-b"' in rest.body and b'"root/c"' in rest.body


async def test_unencoded_token_and_bad_max_results(
    store: AdlsStore, emulator: EmulatorHandle
) -> None:
    for n in range(10):
        await store.write_bytes(f"/root/f{n}", b"x")
    query = {"resource": "filesystem", "directory": "root", "recursive": "false", "maxResults": "3"}
    first = await store._dfs().request("GET", None, dict(query), {}, read_body=True)
    token = first.headers["x-ms-continuation"]
    url = (
        f"{emulator.endpoint}/{store.filesystem}?resource=filesystem&directory=root"
        f"&recursive=false&maxResults=3&continuation={token}&sig=x"
    )  # the token as is, not URL-encoded (a SAS-style request: no signature to break)
    async with (
        aiohttp.ClientSession() as session,
        session.get(URL(url, encoded=True)) as response,
    ):
        assert response.status == 400
        assert response.headers["x-ms-error-code"] == "InvalidQueryParameterValue"
    status, code, _ = await call(store, "GET", None, {**query, "maxResults": "ten"})
    assert (status, code) == (400, "InvalidQueryParameterValue")


async def test_bearer_token_refreshed_before_expiry(emulator: EmulatorHandle) -> None:
    """The lean client asks the SDK credential again only when the token nears expiry."""
    from azure.core.credentials import AccessToken

    emulator.create_filesystem("fs")

    class Credential:
        def __init__(self, lifetime: float) -> None:
            self.lifetime = lifetime
            self.calls = 0

        async def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
            assert scopes == ("https://storage.azure.com/.default",)
            self.calls += 1
            return AccessToken(f"token-{self.calls}", int(time.time() + self.lifetime))

        async def close(self) -> None:
            return None

    for lifetime, expected_calls in ((3600, 1), (60, 5)):
        credential = Credential(lifetime)
        async with aiohttp.ClientSession() as session:
            lean = LeanDfsClient(
                session, emulator.endpoint, "fs", credential,  # type: ignore[arg-type]
                emulator.account, connection_timeout=5, read_timeout=5,
            )  # fmt: skip
            for _ in range(5):
                with pytest.raises(DfsResponseError) as caught:
                    await lean.properties("missing")
                assert caught.value.status == 404  # the bearer token was accepted
        assert credential.calls == expected_calls


# -- scripted over aioresponses: what the emulator does not produce ---------------------------


async def test_garbled_listing_is_a_store_error(mock_http: aioresponses) -> None:
    store = AdlsStore("acct", "fs", endpoint="http://adls.test/acct", account_key="a2V5")
    try:
        mock_http.get(re.compile(r"http://adls\.test/acct/fs\?.*"), body=b"<html>proxy</html>")
        with pytest.raises(StoreError) as caught:
            [page async for page in store.list_dir("/d")]
        assert type(caught.value) is StoreError and caught.value.path == "/d"
    finally:
        await store.aclose()


async def test_sas_rides_on_the_rename_source(mock_http: aioresponses) -> None:
    sas = "sv=2024-08-04&sp=rwdl&sig=c2ln"
    store = AdlsStore("acct", "fs", endpoint="http://adls.test/acct", sas_token="?" + sas)
    try:
        mock_http.put(re.compile(r"http://adls\.test/acct/fs/dst/g\?.*"), status=201)
        await store.rename("/src dir/f", "/dst/g")
        ((_, url), calls), *_ = mock_http.requests.items()
        assert url.query["mode"] == "legacy" and url.query["sig"] == "c2ln"
        headers = calls[0].kwargs["headers"]
        assert headers["x-ms-rename-source"] == f"/fs/src%20dir/f?{sas}"
        assert headers["if-none-match"] == "*" and "authorization" not in headers
    finally:
        await store.aclose()


async def test_cli_sets_the_rename_faults() -> None:
    from aiocommit_testing.child_server import server_process

    args = ("--rename-continuations", "2", "--rename-parent-not-found", "0.25")
    with server_process("aiocommit_testing.adls_emulator", *args) as env:
        control = env["AIOCOMMIT_ADLS_ENDPOINT"].rsplit("/", 1)[0] + "/_emulator/faults"
        async with aiohttp.ClientSession() as session, session.get(control) as response:
            faults = await response.json()
    assert faults["rename_continuations"] == 2
    assert faults["rename_parent_not_found_probability"] == 0.25


async def test_token_delete_is_paginated_and_continued(mock_http: aioresponses) -> None:
    """With a token credential the SDK pages a recursive delete (API >= 2023-08-03): so do we,
    following ``x-ms-continuation`` (URL-encoded) until the service stops sending one."""
    from azure.core.credentials import AccessToken

    class Credential:
        async def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
            return AccessToken("tok", int(time.time() + 3600))

        async def close(self) -> None:
            return None

    store = AdlsStore(
        "acct",
        "fs",
        endpoint="https://adls.test/acct",
        token_credential=Credential(),  # type: ignore[arg-type]
    )
    try:
        url = re.compile(r"https://adls\.test/acct/fs/big%20dir\?.*")
        mock_http.delete(url, status=200, headers={"x-ms-continuation": "a+b/c="})
        mock_http.delete(url, status=200)
        assert await store.delete("/big dir", recursive=True) is True
        calls = [call for (_, _), sent in mock_http.requests.items() for call in sent]
        urls = [url for (_, url), sent in mock_http.requests.items() for _ in sent]
        assert len(calls) == 2
        # an unencoded "+" would come back as a space
        assert [u.query.get("continuation") for u in urls] == [None, "a+b/c="]
        assert all(u.query["paginated"] == "true" and u.query["recursive"] == "true" for u in urls)
        assert all(c.kwargs["headers"]["authorization"] == "Bearer tok" for c in calls)
    finally:
        await store.aclose()


async def test_seeded_files_are_files_the_store_reads_lists_and_renames(
    emulator: EmulatorHandle,
) -> None:
    """``/_emulator/seed`` (a bench's bulk preparation) leaves what create + append +
    flush would: parents made, the given size, an etag each that a rename keeps."""
    store = make_store(emulator, "seeded")
    control = emulator.endpoint.rsplit("/", 1)[0] + "/_emulator/seed"
    files = [["a/b=1/x.dat", 5], ["a/b=1/y.dat", 0], ["a/c.dat", 70_000]]
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(control, json={"filesystem": "seeded", "files": files}) as r:
                assert r.status == 200
                assert (await r.json()) == {"seeded": 3}
            async with session.post(
                control, json={"filesystem": "seeded", "files": [["a/b=1", 1]]}
            ) as r:
                assert r.status == 409  # a directory is not replaced by a file
        assert await store.read_bytes("/a/b=1/x.dat") == bytes(5)
        statuses = {s.path: s for page in [p async for p in store.list_dir("/a/b=1")] for s in page}
        assert sorted(statuses) == ["/a/b=1/x.dat", "/a/b=1/y.dat"]
        assert statuses["/a/b=1/y.dat"].size == 0
        big = await store.stat("/a/c.dat")
        assert big.size == 70_000
        assert len({big.etag, *(s.etag for s in statuses.values())}) == 3
        await store.rename("/a/c.dat", "/a/d.dat", source_etag=big.etag)
        assert (await store.stat("/a/d.dat")).etag == big.etag
    finally:
        await store.aclose()


async def test_the_real_sdk_speaks_to_the_emulator(emulator: EmulatorHandle) -> None:
    """The store no longer goes through ``azure-storage-file-datalake``, so the SDK checks
    the emulator here: what the SDK sends for a write (create, append, flush), a
    conditional rename, a listing, a read and a recursive delete is answered as the
    service answers it."""
    datalake = pytest.importorskip("azure.storage.filedatalake.aio")
    from azure.core import MatchConditions
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.core.exceptions import HttpResponseError

    emulator.create_filesystem("sdk")
    credential = AzureNamedKeyCredential(emulator.account, emulator.key)
    async with datalake.DataLakeServiceClient(emulator.endpoint, credential=credential) as sdk:
        filesystem = sdk.get_file_system_client("sdk")
        await filesystem.create_directory("in")
        await filesystem.create_directory("out")
        written = filesystem.get_file_client("in/a.txt")
        await written.upload_data(b"hello" * 1000, overwrite=True)
        etag = (await written.get_file_properties()).etag
        with pytest.raises(HttpResponseError) as refused:
            await written.rename_file(
                "sdk/out/a.txt",
                source_etag='"0x8D0000000000000"',
                source_match_condition=MatchConditions.IfNotModified,
            )
        assert "SourceConditionNotMet" in str(refused.value)
        await written.rename_file(
            "sdk/out/a.txt", source_etag=etag, source_match_condition=MatchConditions.IfNotModified
        )
        names = sorted([path.name async for path in filesystem.get_paths(recursive=True)])
        assert names == ["in", "out", "out/a.txt"]
        moved = filesystem.get_file_client("out/a.txt")
        assert (await moved.get_file_properties()).etag == etag
        assert await (await moved.download_file()).readall() == b"hello" * 1000
        await filesystem.get_directory_client("out").delete_directory()
        assert sorted([path.name async for path in filesystem.get_paths(recursive=True)]) == ["in"]
