"""The chaos proxy in front of each emulator: the stores' own throttling answers, what it
enforces where an emulator differs from the service, set-up that rides out throttling
(issue 23, defect 2), and whole seeded jobs checked at the destination directly."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest

from aiocommit import CommitOptions, setup_job, setup_task
from aiocommit.errors import NotFound, Throttled
from aiocommit.io.operations import StoreOperations
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import Store
from aiocommit_testing.chaos_proxy import KINDS, Chaos, ChaosProxy, StoreKind, run_chaos_proxy

FAST = CommitOptions(retry_base_delay=0.005, retry_max_delay=0.05)


@asynccontextmanager
async def proxied(
    kind: StoreKind, chaos: Chaos, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Store, ChaosProxy]]:
    """A store of ``kind`` on a fresh bucket / filesystem, through a chaos proxy."""
    async with AsyncExitStack() as stack:
        store: Store
        if kind == "adls":
            from aiocommit.stores.adls import AdlsStore
            from aiocommit_testing.adls_emulator import run_adls_emulator

            handle = await stack.enter_async_context(run_adls_emulator())
            handle.create_filesystem("fs")
            proxy = await stack.enter_async_context(run_chaos_proxy(handle.endpoint, kind, chaos))
            endpoint = proxy.url(handle.endpoint)
            store = AdlsStore(handle.account, "fs", endpoint=endpoint, account_key=handle.key)
        elif kind == "gcs":
            from aiocommit.stores.gcs import GcsStore
            from aiocommit_testing.gcs_emulator import create_bucket
            from tests.stores.gcs_fixtures import fresh_bucket_name

            upstream = request.getfixturevalue("gcs_endpoint")
            bucket = fresh_bucket_name()
            await create_bucket(upstream, bucket)
            proxy = await stack.enter_async_context(run_chaos_proxy(upstream, kind, chaos))
            store = GcsStore(bucket, api_root=proxy.endpoint)
        else:
            from aiocommit.stores.s3 import S3Store
            from aiocommit_testing.s3_emulator import create_bucket as create_s3_bucket
            from tests.stores.s3_fixtures import fresh_bucket_name as fresh_s3_bucket

            upstream = request.getfixturevalue("s3_endpoint")
            bucket = fresh_s3_bucket()
            await create_s3_bucket(upstream, bucket)
            proxy = await stack.enter_async_context(run_chaos_proxy(upstream, kind, chaos))
            store = S3Store(bucket, endpoint_url=proxy.endpoint)
        stack.push_async_callback(store.aclose)
        yield store, proxy


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("retry_after", [None, 3.0])
async def test_throttling_in_each_stores_own_format(
    kind: StoreKind, retry_after: float | None, request: pytest.FixtureRequest
) -> None:
    """Every request throttled: the adapter reads the store's answer as ``Throttled``,
    with the ``Retry-After`` when the proxy sent one."""
    chaos = Chaos(throttle=1.0, retry_after=retry_after or 0.0)
    chaos.retry_after_share = 0.0 if retry_after is None else 1.0
    async with proxied(kind, chaos, request) as (store, proxy):
        with pytest.raises(Throttled) as caught:
            await store.stat("/a/b")
        assert caught.value.retry_after == retry_after
        with pytest.raises(Throttled) as caught:
            await store.write_bytes("/a/f", b"x")
        assert caught.value.retry_after == retry_after
        assert proxy.counts["throttled"] == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_rate_mode_admits_the_rate_and_throttles_the_rest(
    kind: StoreKind, request: pytest.FixtureRequest
) -> None:
    """A token bucket of 20 requests/s with a burst of 10: of 40 calls sent at once,
    the proxy admits the burst plus the rate over the time taken and throttles the rest
    in the store's format (the adapter reads ``Throttled``)."""
    chaos = Chaos(rate=20.0, burst=0.5, rate_scope="bucket")
    async with proxied(kind, chaos, request) as (store, proxy):
        throttled = 0

        async def one() -> None:
            nonlocal throttled
            try:
                await store.stat("/nothing")
            except NotFound:
                pass
            except Throttled:
                throttled += 1

        begin = time.monotonic()
        async with anyio.create_task_group() as group:
            for _ in range(40):
                group.start_soon(one)
        elapsed = time.monotonic() - begin
        admitted = proxy.counts["requests"] - proxy.counts["rate_throttled"]
        assert throttled > 0 and proxy.counts["rate_throttled"] >= throttled
        assert 10 <= admitted <= 10 + 20 * elapsed + 1, (admitted, elapsed)


@pytest.mark.emulator  # moto, through the chaos proxy
async def test_s3_repeated_completion_answers_no_such_upload(
    request: pytest.FixtureRequest,
) -> None:
    """moto answers a repeated CompleteMultipartUpload with 200; S3 documents NoSuchUpload,
    and the proxy answers so (the store takes either as done only by its own checks)."""
    async with proxied("s3", Chaos(), request) as (store, proxy):
        client = await store.client()  # type: ignore[attr-defined]
        bucket = store.bucket  # type: ignore[attr-defined]
        created = await client.create_multipart_upload(Bucket=bucket, Key="k")
        upload = created["UploadId"]
        part = await client.upload_part(
            Bucket=bucket, Key="k", UploadId=upload, PartNumber=1, Body=b"data"
        )
        parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
        await client.complete_multipart_upload(
            Bucket=bucket, Key="k", UploadId=upload, MultipartUpload=parts
        )
        with pytest.raises(client.exceptions.NoSuchUpload):
            await client.complete_multipart_upload(
                Bucket=bucket, Key="k", UploadId=upload, MultipartUpload=parts
            )
        assert proxy.counts["enforced"] == 1
        assert await store.read_bytes("/k") == b"data"


# -- defect 2: set-up under throttling ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["gcs", "s3"])
async def test_setup_rides_out_throttling(kind: StoreKind, request: pytest.FixtureRequest) -> None:
    """30 % of requests throttled, 8 attempts per call: a job and four tasks seven levels
    deep are set up. (Before, the whole walk from the bucket root was one retried call of
    ~20 requests, which then succeeds ~0.05 % per attempt: set-up gave up.)"""
    chaos = Chaos(seed=7, throttle=0.3, retry_after_share=0.0)
    options = CommitOptions(max_attempts=8, retry_base_delay=0.001, retry_max_delay=0.01)
    async with proxied(kind, chaos, request) as (store, proxy):
        dest = "/a/b/c/out"
        job_id = await setup_job(dest, store=store, options=options)
        for task in range(4):
            await setup_task(dest, job_id, task, 0, store=store, options=options)
        assert proxy.counts["throttled"] > 10


@pytest.mark.parametrize("kind", ["gcs", "s3"])
async def test_mkdirs_asks_only_what_it_does_not_know(
    kind: StoreKind, request: pytest.FixtureRequest
) -> None:
    """A directory below one this client made costs two probes and one marker; one it
    made or found costs nothing; a delete through the client forgets what it removed."""
    async with proxied(kind, Chaos(), request) as (store, proxy):
        await store.mkdirs("/r/s/t")
        before = proxy.counts["requests"]
        await store.mkdirs("/r/s/t/u/v/w/x")  # four new levels below a known one
        assert proxy.counts["requests"] - before == 4 * 2 + 4
        before = proxy.counts["requests"]
        await store.mkdirs("/r/s/t/u/v/w/x")
        await store.mkdirs("/r/s")
        assert proxy.counts["requests"] == before
        await store.delete("/r/s/t/u", recursive=True)
        await store.mkdirs("/r/s/t/u")
        assert (await store.stat("/r/s/t/u")).is_dir


@pytest.mark.parametrize("kind", ["gcs", "s3"])
async def test_mkdirs_that_gives_up_says_why(
    kind: StoreKind, request: pytest.FixtureRequest
) -> None:
    """Every request throttled: the error names the directory asked for (not the level
    whose request failed), and says it was retried, how often and for how long."""
    options = CommitOptions(max_attempts=3, retry_base_delay=0.001, retry_max_delay=0.01)
    async with proxied(kind, Chaos(throttle=1.0, retry_after_share=0.0), request) as (
        store,
        proxy,
    ):
        ops = StoreOperations(store, options, IOStatistics())
        with pytest.raises(Throttled) as caught:
            await ops.mkdirs("/x/y/z/out")
        text = str(caught.value)
        assert caught.value.path == "/x/y/z/out", text
        assert "retried, gave up after 3 attempts over" in text, text
        assert proxy.counts["throttled"] <= 2 * 3, "each request retried, not the walk"


@pytest.mark.parametrize("kind", KINDS)
async def test_a_long_listing_rides_out_throttling_page_by_page(
    kind: StoreKind, request: pytest.FixtureRequest
) -> None:
    """A listing of 20 pages with 30 % of requests throttled: each throttled page is asked
    for again at its continuation (about 29 requests). (Before, the listing started again
    from its first page: 20 pages in a row come through once in 1,250 tries, and the
    retries gave up; a job commit that listed a task's 100 files 7 at a time under 10 %
    throttling took up to 2 minutes.)"""
    chaos = Chaos(seed=5, retry_after_share=0.0)
    async with proxied(kind, chaos, request) as (store, proxy):
        names = [f"/d/f{i:03}" for i in range(100)]
        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(store.write_bytes, name, b"x")
        store.page_size = 5  # type: ignore[attr-defined]
        chaos.throttle = 0.3
        before = proxy.counts["requests"]
        operations = StoreOperations(store, FAST, IOStatistics())
        listed = [s.path async for page in operations.list_dir("/d") for s in page]
        assert sorted(listed) == names
        requests = proxy.counts["requests"] - before
        assert proxy.counts["throttled"] > 2
        assert requests <= 20 + proxy.counts["throttled"] + 1 <= 45, proxy.counts


@pytest.mark.emulator  # the ADLS emulator behind a chaos proxy
async def test_an_adls_write_rides_out_throttling_request_by_request(
    request: pytest.FixtureRequest,
) -> None:
    """ADLS writes a file in three requests (create, append, flush). With 30 % of
    requests throttled, each throttled request alone is sent again: every throttle
    costs one request. (Before, the write was sent again from its create, so a
    throttled flush cost three, and a write went through whole 34 % of the time.)"""
    chaos = Chaos(seed=3, retry_after_share=0.0)
    async with proxied("adls", chaos, request) as (store, proxy):
        operations = StoreOperations(store, FAST, IOStatistics())
        chaos.throttle = 0.3
        for index in range(30):
            await operations.write_once(f"/w/f{index:02}", b"data %d" % index, overwrite=True)
        chaos.throttle = 0.0
        assert proxy.counts["throttled"] > 10, proxy.counts
        assert proxy.counts["requests"] == 3 * 30 + proxy.counts["throttled"], proxy.counts
        for index in range(30):
            assert await store.read_bytes(f"/w/f{index:02}") == b"data %d" % index


@pytest.mark.emulator  # the ADLS emulator and a chaos proxy, each in a child process
async def test_a_child_proxy_is_set_and_read_through_its_control_api() -> None:
    """The proxy in a child process (as ``bench random-throttle`` runs it): its control
    API sets the throttled share there and reads its counts, itself neither counted nor
    throttled; a throttled request gets ADLS's own answer over HTTP, without
    ``Retry-After`` when none is asked for; an unknown field is refused."""
    import aiohttp

    from aiocommit.stores.adls import AdlsStore
    from aiocommit_testing.adls_emulator import AdlsEmulatorServer
    from aiocommit_testing.chaos_proxy import ChaosProxyServer
    from aiocommit_testing.child_server import run_child_server

    async with (
        run_child_server(AdlsEmulatorServer("fs")) as adls,
        run_child_server(
            ChaosProxyServer(adls.account_endpoint, "adls", Chaos(seed=7, retry_after_share=0))
        ) as proxy,
    ):
        through = proxy.url(adls.account_endpoint)
        store = AdlsStore(adls.account, "fs", endpoint=through, account_key=adls.key)
        try:
            await store.write_bytes("/a/f", b"x")
            assert (await proxy.counts())["throttled"] == 0
            settings = await proxy.update(throttle=1.0)
            assert (settings.throttle, settings.seed) == (1.0, 7)
            await proxy.clear_counts()
            async with aiohttp.ClientSession() as session, session.get(through + "/fs/a/f") as r:
                assert r.status == 503
                assert r.headers["x-ms-error-code"] == "ServerBusy"
                assert "Retry-After" not in r.headers
            with pytest.raises(Throttled):
                await store.stat("/a/f")
            assert await proxy.counts() == {"requests": 2, "throttled": 2}
            await proxy.update(throttle=0.0)
            assert await store.read_bytes("/a/f") == b"x"
        finally:
            await store.aclose()
        with pytest.raises(ValueError, match="throttel"):
            await proxy.update(throttel=0.5)
        assert (await proxy.settings()).throttle == 0.0


# -- whole jobs through the proxy --------------------------------------------------------------
