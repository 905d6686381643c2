"""``Client``: one store, I/O layer and limits for every job of a destination; closed by
``async with`` however the block ends, and refusing use afterwards."""

from __future__ import annotations

import pickle
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import pytest

import aiocommit
from aiocommit import Client, CommitOptions, InvalidInput, commit_job, commit_task, setup_job
from aiocommit.runtime.runtime import current as current_runtime
from aiocommit.stores.base import Store
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.registry import OPENERS, register_scheme
from aiocommit.stores.wrapper import StoreWrapper
from aiocommit_testing.s3_emulator import create_bucket
from tests.helpers import walk
from tests.stores.gcs_fixtures import fresh_bucket_name

T = TypeVar("T")


class Counted(StoreWrapper):
    """A memory store that counts how often it was opened and closed, and the most calls
    it had in flight at once (each call takes a millisecond)."""

    opened = 0
    closed = 0

    def __init__(self, inner: Store):
        super().__init__(inner)
        Counted.opened += 1
        self.in_flight = 0
        self.peak = 0

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await anyio.sleep(0.001)
            return await call()
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        Counted.closed += 1
        await super().aclose()


def open_counted(url: str) -> tuple[Store, str]:
    """The opener of ``counted://NAME/PATH``: memory store NAME, counted."""
    parts = urlsplit(url)
    return Counted(MemoryStore.named(parts.netloc)), parts.path or "/"


@pytest.fixture
def counted(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh ``counted://`` destination, with the counts at zero."""
    register_scheme("counted", f"{__name__}:open_counted")
    Counted.opened = Counted.closed = 0
    yield f"counted://client-{id(request.node)}/out"
    OPENERS.pop("counted", None)


async def write_tasks(job: aiocommit.Job, prefix: str, tasks: int) -> None:
    for task in range(tasks):
        attempt = await job.setup_task(task)
        await attempt.write_bytes(f"{prefix}/part-{task:05d}", prefix.encode())
        await job.commit_task(attempt)


async def test_one_client_opens_the_store_once_for_several_jobs(counted: str) -> None:
    async with Client(counted) as client:
        assert client.runtime is current_runtime()  # the loop's, shared
        first, second = await client.setup_job(), await client.setup_job()
        assert first.job_id != second.job_id
        await write_tasks(first, "a", 3)
        await write_tasks(second, "b", 2)
        listed = {info.job_id: info.manifests for info in await client.list_jobs()}
        assert listed == {first.job_id: 3, second.job_id: 2}
        info = await first.info()
        assert info is not None and info.state == "set up" and info.files == 3
        assert (await first.commit()).success
        assert (await second.commit()).success
        assert Counted.closed == 0
        store = client.store
    assert (Counted.opened, Counted.closed) == (1, 1)
    found = await walk(store, "/out")
    assert found.pop("_SUCCESS")
    assert found == {
        **{f"a/part-{t:05d}": b"a" for t in range(3)},
        **{f"b/part-{t:05d}": b"b" for t in range(2)},
    }


async def test_the_free_functions_open_the_store_per_call(counted: str) -> None:
    """What a client saves: each shortcut is a client made for one call (an attempt's
    writes and commit open its store by its URL, ``memory://`` here)."""
    job_id = await setup_job(counted)
    attempt = await aiocommit.setup_task(counted, job_id, 0)
    await attempt.write_bytes("x", b"1")
    await commit_task(attempt)
    await commit_job(counted, job_id)
    assert Counted.opened == Counted.closed == 3


async def test_two_destinations_share_limits_explicitly(tmp_path: Path) -> None:
    options = CommitOptions(concurrency=3)
    async with (
        Client(f"file://{tmp_path}/one", options=options) as one,
        Client(f"file://{tmp_path}/two", options=options, limits=one.limits) as two,
        Client(f"file://{tmp_path}/three", options=options) as three,
    ):
        assert two.limits is one.limits and three.limits is not one.limits
        async with one.operations() as ops_one, two.operations() as ops_two:
            assert ops_one.limiter is ops_two.limiter is one.limits.limiter
            assert ops_one.stats is not ops_two.stats  # each job its own statistics
        jobs = [await client.setup_job() for client in (one, two)]
        for index, job in enumerate(jobs):
            await write_tasks(job, f"p{index}", 2)
            assert (await job.commit()).success
    assert sorted(p.name for p in (tmp_path / "two" / "p1").iterdir()) == [
        "part-00000",
        "part-00001",
    ]


async def test_the_jobs_of_a_client_share_its_in_flight_limit(counted: str) -> None:
    """Two jobs committing at once stay within the client's one limit of 2 calls in
    flight; two one-call clients each have their own (4 in flight together)."""
    options = CommitOptions(concurrency=2, min_concurrency=1, adaptive_concurrency=False)

    async def commit_both(
        commit: Callable[[str], Coroutine[Any, Any, object]], ids: list[str]
    ) -> None:
        async with anyio.create_task_group() as group:
            for job_id in ids:
                group.start_soon(commit, job_id)

    async with Client(counted, options=options) as client:
        jobs = [await client.setup_job() for _ in range(2)]
        for index, job in enumerate(jobs):
            await write_tasks(job, f"s{index}", 6)
        store = client.store
        assert isinstance(store, Counted)
        store.peak = 0
        by_id = {job.job_id: job for job in jobs}
        await commit_both(lambda job_id: by_id[job_id].commit(), list(by_id))
        assert store.peak <= 2

        apart = [await setup_job("/out", store=store, options=options) for _ in range(2)]
        for index, job_id in enumerate(apart):
            await write_tasks(client.job(job_id), f"t{index}", 6)
        store.peak = 0
        await commit_both(
            lambda job_id: commit_job("/out", job_id, store=store, options=options), apart
        )
        assert store.peak > 2


async def test_a_closed_client_refuses_use(counted: str) -> None:
    async with Client(counted) as client:
        job = await client.setup_job()
        attempt = await job.setup_task(0)
    assert client.closed and "closed" in repr(client)
    for use in (
        client.setup_job,
        client.list_jobs,
        job.commit,
        lambda: job.setup_task(1),
        lambda: attempt.write_bytes("x", b"1"),
        lambda: commit_task(attempt),
    ):
        with pytest.raises(InvalidInput, match="is closed: use it inside its `async with`"):
            await use()
    with pytest.raises(InvalidInput, match="is closed"):
        async with client:
            pass
    await client.aclose()  # idempotent
    assert Counted.closed == 1


async def test_async_with_closes_what_it_opened_even_on_error(counted: str) -> None:
    client = Client(counted)

    async def fails() -> None:
        async with client:
            await client.setup_job()
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await fails()
    assert client.closed and (Counted.opened, Counted.closed) == (1, 1)

    given = Counted(MemoryStore.named("client-given"))
    client = Client("/out", store=given)
    with pytest.raises(RuntimeError, match="boom"):
        async with client:
            raise RuntimeError("boom")
    assert client.closed and Counted.closed == 1  # a store passed in is the caller's to close


async def test_an_attempt_pickles_without_its_client_and_stays_at_home(counted: str) -> None:
    async with (
        Client(counted) as client,
        Client(counted.replace("/out", "/other")) as other,
    ):
        job = await client.setup_job()
        attempt = await job.setup_task(0)
        assert attempt.session is not None
        copied = pickle.loads(pickle.dumps(attempt))
        assert copied == attempt and copied.session is None
        elsewhere = other.job(job.job_id)
        with pytest.raises(InvalidInput, match="not to this client's"):
            await elsewhere.commit_task(attempt)


@pytest.mark.parametrize("scheme", ["s3a"])
async def test_on_s3_one_aiobotocore_client_serves_every_task(
    scheme: str, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's S3 client (and its connection pool) is made once for the job's set-up,
    its tasks' set-up, writes and commits, and the job commit: through settings given
    to the client, not the environment."""
    from aiobotocore.session import AioSession

    made: list[str] = []
    create_client = AioSession.create_client

    def counting(self: AioSession, *args: Any, **kwargs: Any) -> Any:
        made.append(str(kwargs.get("endpoint_url")))
        return create_client(self, *args, **kwargs)

    monkeypatch.setenv("AIOCOMMIT_STAGING_DIR", str(tmp_path / "staging"))
    bucket = fresh_bucket_name()
    await create_bucket(s3_endpoint, bucket)
    monkeypatch.setattr(AioSession, "create_client", counting)
    settings = {
        "fs.s3a.endpoint": s3_endpoint,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.access.key": "testing",
        "fs.s3a.secret.key": "testing",
    }
    async with Client(f"{scheme}://{bucket}/table", settings=settings) as client:
        job = await client.setup_job()
        await write_tasks(job, "k=1", 3)
        summary = await job.commit()
        assert summary.success and summary.committer.endswith("StagingCommitter")
        found = await walk(client.store, "/table")
    assert made == [s3_endpoint]
    assert sorted(found) == ["_SUCCESS", *(f"k=1/part-{t:05d}" for t in range(3))]
