"""A job on its caller's event loop (``processes=1``) keeps a remote store's calls in
flight to the store's ``loop_in_flight``: beyond it they add little throughput while
their objects stay alive for the garbage collector. Worker processes, the
other ``processes`` settings and an explicit ``concurrency`` are not capped by it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aiocommit import CommitOptions, commit_job
from aiocommit.client.client import Client
from aiocommit.committers.common.session import new_statistics
from aiocommit.io.operations import StoreOperations
from aiocommit.protocol import statistics as S
from aiocommit.stores.adls import AdlsStore
from aiocommit.stores.base import REMOTE_LOOP_IN_FLIGHT, Store
from aiocommit.stores.gcs import GcsStore
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.s3 import S3Store
from aiocommit_testing.adls_emulator import run_adls_emulator
from tests.helpers import output, run_tasks
from tests.stores.adls_fixtures import adls_store_factory

#: nothing listens here: the stores are built, never called
_NOWHERE = "http://127.0.0.1:9"


def _remote_stores() -> Iterator[Store]:
    yield AdlsStore("acct", "fs", endpoint=f"{_NOWHERE}/acct", account_key="a2V5")
    yield GcsStore("bucket", api_root=_NOWHERE)
    yield S3Store("bucket", endpoint_url=_NOWHERE)


def _ceiling(store: Store, options: CommitOptions, *, host_loop: bool = True) -> int:
    return StoreOperations(store, options, new_statistics(), host_loop=host_loop).limiter.maximum


@pytest.mark.parametrize("store", list(_remote_stores()), ids=lambda s: type(s).__name__)
async def test_a_remote_store_on_the_callers_loop_keeps_to_its_loop_ceiling(
    store: Store,
) -> None:
    connections = store.capabilities.max_in_flight
    assert connections is not None and connections > REMOTE_LOOP_IN_FLIGHT
    try:
        assert _ceiling(store, CommitOptions()) == REMOTE_LOOP_IN_FLIGHT
        assert _ceiling(store, CommitOptions(processes=1)) == REMOTE_LOOP_IN_FLIGHT
        for processes in (0, 2):
            assert _ceiling(store, CommitOptions(processes=processes)) == connections
        # a rename worker's loop is its own
        assert _ceiling(store, CommitOptions(), host_loop=False) == connections
        # an explicit concurrency wins, above the cap or below it
        assert _ceiling(store, CommitOptions(concurrency=200)) == 200
        assert _ceiling(store, CommitOptions(concurrency=16)) == 16
        # a client's limits, shared by its jobs, are the same
        client = Client("/out", store=store)
        assert client.limits.limiter.maximum == REMOTE_LOOP_IN_FLIGHT
        wide = Client("/out", store=store, options=CommitOptions(processes=2))
        assert wide.limits.limiter.maximum == connections
    finally:
        await store.aclose()


async def test_local_and_memory_stores_keep_their_own_ceilings() -> None:
    memory = MemoryStore("loop-in-flight")
    assert _ceiling(memory, CommitOptions()) == memory.capabilities.max_in_flight
    local = LocalStore()
    expected = local.capabilities.max_in_flight or CommitOptions().concurrency
    assert _ceiling(local, CommitOptions()) == expected


@pytest.mark.emulator
async def test_a_job_commit_on_adls_at_processes_1_keeps_its_calls_to_the_loop_ceiling() -> None:
    async with run_adls_emulator() as emulator, adls_store_factory(emulator) as (store, root):
        jobs = [
            (dest, *await run_tasks(store, dest, tasks=2, files_per_task=50))
            for dest in (f"{root}/default", f"{root}/explicit")
        ]
        emulator.faults.latency_seconds = 0.01
        gauges = []
        for (dest, job_id, expected), options in zip(
            jobs, (CommitOptions(), CommitOptions(concurrency=256)), strict=True
        ):
            summary = await commit_job(dest, job_id, store=store, options=options)
            assert await output(store, dest) == expected
            gauges.append(summary.iostatistics.gauges)
        default, explicit = gauges
        # the default's limit never grows past the loop's ceiling, nor do its calls
        assert default[S.STORE_IO_CONCURRENCY_LIMIT] == REMOTE_LOOP_IN_FLIGHT
        assert 0 < default[S.STORE_IO_CONCURRENCY_PEAK] <= REMOTE_LOOP_IN_FLIGHT
        # with concurrency set, slow start grows the limit past it
        assert explicit[S.STORE_IO_CONCURRENCY_LIMIT] > REMOTE_LOOP_IN_FLIGHT
