"""The retry policy's decisions, with an injected clock and random source."""

from __future__ import annotations

import multiprocessing
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiocommit.errors import (
    AlreadyExists,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    StoreError,
    Throttled,
    Transient,
)
from aiocommit.io.multipart import MultipartOperations
from aiocommit.io.operations import StoreOperations
from aiocommit.io.retry import RetryPolicy, process_rng
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import REQUEST_RETRY, FileStatus, Store
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.memory import MemoryStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def policy(clock: FakeClock, **kwargs: float) -> RetryPolicy:
    return RetryPolicy(clock=clock, rng=random.Random(7), **kwargs)  # type: ignore[arg-type]


def at_once(store: Store, stats: IOStatistics | None = None, **retry: float) -> StoreOperations:
    """Operations on ``store`` whose backoffs take no time: each sleep moves a fake clock."""
    clock = FakeClock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    return StoreOperations(
        store, CommitOptions(), stats or IOStatistics(), retry=policy(clock, **retry), sleep=sleep
    )


@pytest.mark.parametrize(
    "error",
    [
        NotFound("x"),
        AlreadyExists("x"),
        PreconditionFailed("x"),
        PermissionDenied("x"),
        StoreError("x"),
        ValueError("not a store error"),
    ],
)
def test_not_retried(error: BaseException) -> None:
    clock = FakeClock()
    assert policy(clock).next_delay(error, 1, 0.0, clock.now) is None


@pytest.mark.parametrize("error", [Throttled("busy"), Transient("lost")])
def test_retryable_errors_are_retried(error: StoreError) -> None:
    clock = FakeClock()
    delay = policy(clock).next_delay(error, 1, 0.0, clock.now)
    assert delay is not None and delay >= 0.05


def test_delays_are_decorrelated_jitter_within_bounds() -> None:
    clock = FakeClock()
    retry = policy(clock, base_delay=0.1, max_delay=5.0, max_attempts=100, budget_seconds=1e9)
    delay = 0.0
    seen = []
    for attempt in range(1, 60):
        next_delay = retry.next_delay(Throttled("busy"), attempt, delay, clock.now)
        assert next_delay is not None
        assert 0.1 <= next_delay <= max(0.1, delay * 3) + 1e-9
        assert next_delay <= 5.0
        seen.append(next_delay)
        delay = next_delay
    assert max(seen) > 2.0, "delays grow towards the cap"
    assert len(set(seen)) > 50, "jitter spreads retries"


def test_retry_after_is_a_floor() -> None:
    clock = FakeClock()
    retry = policy(clock, base_delay=0.01, max_delay=0.5)
    assert retry.next_delay(Throttled("busy", retry_after=3.0), 1, 0.0, clock.now) == 3.0


def test_attempts_are_bounded() -> None:
    clock = FakeClock()
    retry = policy(clock, max_attempts=3)
    assert retry.next_delay(Transient("x"), 2, 0.1, clock.now) is not None
    assert retry.next_delay(Transient("x"), 3, 0.1, clock.now) is None


def test_time_budget_is_bounded() -> None:
    clock = FakeClock()
    retry = policy(clock, budget_seconds=10.0, base_delay=1.0, max_delay=1.0)
    started = clock.now
    assert retry.next_delay(Transient("x"), 1, 0.0, started) == 1.0
    clock.now += 9.5
    assert retry.next_delay(Transient("x"), 2, 1.0, started) is None, "9.5 + 1 s would pass 10 s"
    retry_after = retry.next_delay(Throttled("x", retry_after=30.0), 1, 0.0, clock.now)
    assert retry_after is None, "a Retry-After past the budget gives up at once"


class ScriptedStore(MemoryStore):
    """Raises the scripted errors from ``stat``, one per call, then answers."""

    def __init__(self, errors: list[StoreError]):
        super().__init__("scripted")
        self.errors = errors
        self.calls = 0

    async def stat(self, path: str):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return await super().stat(path)


async def test_operations_retry_and_count_with_instant_sleep() -> None:
    clock = FakeClock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    store = ScriptedStore(
        [Throttled("busy", retry_after=2.0), Transient("reset"), Throttled("busy")]
    )
    stats = IOStatistics()
    operations = StoreOperations(
        store, CommitOptions(), stats, retry=policy(clock, base_delay=0.1), sleep=sleep
    )
    status = await operations.stat("/")
    assert status.is_dir
    assert store.calls == 4
    assert len(slept) == 3 and slept[0] == 2.0
    assert stats.counters[S.STORE_IO_RETRY] == 3
    assert stats.counters[S.STORE_IO_THROTTLED] == 2
    assert stats.counters[S.STORE_IO_TRANSIENT] == 1
    assert stats.counters[S.OP_GET_FILE_STATUS + ".failures"] == 3
    assert stats.means[S.STORE_IO_BACKOFF + ".mean"].sum == int(slept[0] * 1000) + sum(
        int(s * 1000) for s in slept[1:]
    )


async def test_operations_give_up_with_the_last_error() -> None:
    store = ScriptedStore([Throttled("busy")] * 5)
    with pytest.raises(Throttled) as caught:
        await at_once(store, max_attempts=3).stat("/")
    assert caught.value.attempts == 3
    assert store.calls == 3


async def test_non_retryable_error_is_not_retried() -> None:
    store = ScriptedStore([PermissionDenied("no")])
    operations = StoreOperations(store, CommitOptions(), IOStatistics())
    with pytest.raises(PermissionDenied):
        await operations.stat("/")
    assert store.calls == 1


async def listed(operations: StoreOperations, path: str) -> list[str]:
    return [status.path async for page in operations.list_dir(path) for status in page]


async def test_a_throttled_page_is_retried_alone_not_the_listing_from_the_start() -> None:
    """30 pages, 30 % of page requests throttled: each page is asked for again at its own
    place (about 43 requests), not by listing again from the first page (where 30 pages
    in a row unthrottled come once in 45,000 tries, and the retries give up)."""
    inner = MemoryStore("paged", page_size=2)
    names = [f"/d/f{i:03}" for i in range(60)]
    for name in names:
        await inner.write_bytes(name, b"x")
    faulty = FaultyStore(inner, Faults(seed=3, throttle_probability=0.3, operations=("list_dir",)))
    stats = IOStatistics()
    assert await listed(at_once(faulty, stats), "/d") == names
    requests = faulty.counts.by_operation["list_dir"]
    assert faulty.counts.throttled > 5
    assert requests == 30 + faulty.counts.throttled <= 60
    assert stats.counters[S.STORE_IO_THROTTLED] == faulty.counts.throttled


async def test_a_throttled_page_of_uploads_is_retried_alone() -> None:
    """The same for outstanding multipart uploads (30 pages). (moto answers every
    upload in one page, whatever ``MaxUploads`` asks: an in-memory store here.)"""
    inner = MemoryStore("uploads", page_size=2)
    paths = [f"/u/k{i:02}" for i in range(60)]
    for path in paths:
        await inner.create_upload(path)
    faulty = FaultyStore(
        inner, Faults(seed=4, throttle_probability=0.3, operations=("list_uploads",))
    )
    uploads = MultipartOperations(at_once(faulty))
    assert [u.path async for page in uploads.list_uploads("/u/") for u in page] == paths
    assert faulty.counts.throttled > 5
    assert faulty.counts.by_operation["list_uploads"] == 30 + faulty.counts.throttled


class FailsAfterEachNewPage(MemoryStore):
    """A listing (not one request per page in ``REQUEST_RETRY``) that fails transiently
    right after each page it had not served before: every failure restarts it."""

    def __init__(self) -> None:
        super().__init__("restarting", page_size=2)
        self.served = 0
        self.listings = 0

    async def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        self.listings += 1
        index = 0
        async for page in super().list_dir(path):
            yield page
            index += 1
            if index > self.served:
                self.served = index
                raise Transient("connection reset")


async def test_a_restarted_listing_that_progresses_starts_its_retries_again() -> None:
    """Five failures in one listing, each after a new page: with three attempts allowed
    per page the listing completes (the count starts again at each new page)."""
    store = FailsAfterEachNewPage()
    names = [f"/d/f{i}" for i in range(10)]
    for name in names:
        await store.write_bytes(name, b"x")
    assert await listed(at_once(store, max_attempts=3), "/d") == names
    assert store.listings == 6


class ThrottledRequests(MemoryStore):
    """A delete made of requests in ``REQUEST_RETRY`` (as a prefix store's), every one
    throttled."""

    def __init__(self) -> None:
        super().__init__("throttled")
        self.requests = 0

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        async def request() -> bool:
            self.requests += 1
            raise Throttled("busy")

        result: bool = await REQUEST_RETRY.get()(request)
        return result


async def test_a_request_given_up_on_is_counted_once() -> None:
    """Three throttled requests, then the request gives up: three throttles counted (the
    call around it does not count the last one again) and the call is not retried."""
    store = ThrottledRequests()
    stats = IOStatistics()
    with pytest.raises(Throttled):
        await at_once(store, stats, max_attempts=3).delete("/d", recursive=True)
    assert store.requests == 3
    assert stats.counters[S.STORE_IO_THROTTLED] == 3


def test_policies_share_the_process_jitter_source() -> None:
    """A policy is made per job operation and task attempt: none seeds a generator of
    its own (each seeding reads the OS's entropy)."""
    first, second = RetryPolicy(), RetryPolicy()
    assert first.rng is second.rng is process_rng()


def _child_draw(queue: Any) -> None:
    queue.put(process_rng().random())


def test_a_forked_process_draws_other_delays_than_its_parent() -> None:
    context = multiprocessing.get_context("fork")
    state = process_rng().getstate()
    queue = context.SimpleQueue()
    child = context.Process(target=_child_draw, args=(queue,))
    child.start()
    child.join(30)
    drawn = queue.get()
    process_rng().setstate(state)
    assert drawn != process_rng().random()  # the child reseeded: another sequence
