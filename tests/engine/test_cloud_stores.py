"""The engine through the real cloud SDKs over HTTP to emulators."""

from __future__ import annotations

import os

import pytest

from aiocommit import (
    CommitError,
    CommitOptions,
    ManifestError,
    OutputConflict,
    abort_job,
    commit_job,
)
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from tests.helpers import exists, output, run_tasks, task_files, write_task


async def test_job_commit(cloud_store_root: tuple[Store, str]) -> None:
    store, root = cloud_store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=6, files_per_task=20)
    await write_task(store, dest, job_id, 0, 1, task_files(0, 3, tag="-failed"))
    summary = await commit_job(
        dest, job_id, store=store, options=CommitOptions(validate_output=True)
    )
    assert await output(store, dest) == expected
    assert summary.iostatistics.counters[S.COMMITTER_FILES_COMMITTED] == 120
    assert not await exists(store, join(dest, "_temporary"))


async def test_lost_rename_responses_and_throttling(cloud_store_root: tuple[Store, str]) -> None:
    store, root = cloud_store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=4, files_per_task=10)
    faulty = FaultyStore(
        store, Faults(seed=3, throttle_probability=0.2, lost_response_probability=0.2)
    )
    options = CommitOptions(retry_base_delay=0.001, retry_max_delay=0.01, max_attempts=30)
    summary = await commit_job(dest, job_id, store=faulty, options=options)
    assert await output(store, dest) == expected
    assert summary.iostatistics.counters[S.COMMIT_FILE_RENAME_RECOVERED] > 0


async def test_copy_without_delete_is_finished_by_a_rerun(
    cloud_store_root: tuple[Store, str],
) -> None:
    """A copy-then-delete rename interrupted between the two: the destination holds a
    copy and the source is still there. The re-run of the job commit (its plan recorded,
    its conflicts decided before the first change) recognises the copy by its checksum
    and finishes the move."""
    store, root = cloud_store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=4)
    attempt_dir = JobLayout(dest, job_id).task_attempt_dir(f"attempt_{job_id[4:]}_m_000000_0")
    relative = "part=1/part-00000-0001.dat"
    # the first commit stops at its first rename of a data file, after its plan is saved
    stopping = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op == "rename" and path.endswith(".dat")),
    )
    with pytest.raises(CommitError):
        await commit_job(dest, job_id, store=stopping, options=CommitOptions(max_attempts=1))
    await store.write_bytes(join(dest, relative), expected[relative])  # the copy
    if store.capabilities.atomic_rename:
        # an atomic-rename store is never left so; the same bytes there are another
        # writer's file, and the job refuses to lose either
        with pytest.raises(OutputConflict):
            await commit_job(dest, job_id, store=store, options=CommitOptions(concurrency=1))
        assert await exists(store, join(attempt_dir, relative))
        return
    summary = await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected
    assert not await exists(store, join(attempt_dir, relative))
    assert summary.iostatistics.counters[S.COMMIT_FILE_RENAME_RECOVERED] == 1


async def test_crash_then_rerun(cloud_store_root: tuple[Store, str]) -> None:
    store, root = cloud_store_root
    probe_job, _ = await run_tasks(store, join(root, "probe"), tasks=2, files_per_task=5)
    counting = FaultyStore(store)
    await commit_job(join(root, "probe"), probe_job, store=counting)
    total = counting.counts.calls
    for crash_at in (1, total // 3, total // 2, total - 2):
        dest = join(root, f"run{crash_at}")
        job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=5)
        crashing = FaultyStore(store, Faults(fail_after_calls=crash_at))
        with pytest.raises(CommitError):
            await commit_job(dest, job_id, store=crashing, options=CommitOptions(max_attempts=1))
        await commit_job(dest, job_id, store=store)
        assert await output(store, dest) == expected, crash_at


async def test_bad_manifest_and_abort(cloud_store_root: tuple[Store, str]) -> None:
    store, root = cloud_store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=2, files_per_task=3)
    path = JobLayout(dest, job_id).manifest_path(f"task_{job_id[4:]}_m_000001")
    await store.write_bytes(path, b"{truncated")
    with pytest.raises(ManifestError):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {}
    await abort_job(dest, job_id, store=store)
    assert not await exists(store, join(dest, "_temporary"))


@pytest.mark.emulator  # starts its own ADLS emulator
async def test_adls_thousand_files_under_http_faults() -> None:
    """ADLS through the real SDK: 503 ServerBusy with Retry-After and renames applied
    whose responses are dropped (500 OperationTimedOut), injected by the emulator."""
    from aiocommit_testing.adls_emulator import run_adls_emulator
    from tests.stores.adls_fixtures import adls_store_factory

    async with run_adls_emulator() as emulator, adls_store_factory(emulator) as (store, root):
        dest = join(root, "out")
        job_id, expected = await run_tasks(store, dest, tasks=10, files_per_task=100)
        emulator.faults.throttle_probability = 0.1
        emulator.faults.retry_after_seconds = 0.01
        emulator.faults.drop_rename_response_probability = 0.05
        options = CommitOptions(concurrency=64, retry_base_delay=0.005, max_attempts=30)
        summary = await commit_job(dest, job_id, store=store, options=options)
        emulator.faults.throttle_probability = 0.0
        emulator.faults.drop_rename_response_probability = 0.0
        assert await output(store, dest) == expected
        counters = summary.iostatistics.counters
        assert counters[S.COMMITTER_FILES_COMMITTED] == 1000
        assert counters[S.COMMIT_FILE_RENAME_RECOVERED] > 10
        assert counters[S.STORE_IO_THROTTLED] > 50


async def test_gcs_thousand_files(gcs_endpoint: str) -> None:
    """GCS through gcloud-aio-storage to the bare fake-gcs-server (no proxy)."""
    from tests.stores.gcs_fixtures import gcs_store_factory

    async with gcs_store_factory(gcs_endpoint, enforce_preconditions=False, page_size=1000) as (
        store,
        root,
    ):
        dest = join(root, "out")
        job_id, expected = await run_tasks(store, dest, tasks=10, files_per_task=100)
        faulty = FaultyStore(store, Faults(seed=1, throttle_probability=0.1))
        options = CommitOptions(concurrency=64, retry_base_delay=0.005, max_attempts=30)
        summary = await commit_job(dest, job_id, store=faulty, options=options)
        assert await output(store, dest) == expected
        assert summary.iostatistics.counters[S.COMMITTER_FILES_COMMITTED] == 1000


@pytest.mark.emulator  # starts its own ADLS emulator
async def test_adls_source_check_costs_one_listing_per_source_directory() -> None:
    """ADLS's rename moves a directory whole, so the job commit checks its sources first
    (#12 case 9): one listing per directory holding sources (tasks x partitions), no call
    per file. Measured against the same commit without the check."""
    import msgspec

    from aiocommit.stores.base import StoreCapabilities
    from tests.stores.adls_fixtures import adls_store_factory

    def counting(store: Store, *, check: bool) -> FaultyStore:
        capabilities = msgspec.structs.replace(store.capabilities, rename_checks_source=not check)

        class Counting(FaultyStore):
            @property
            def capabilities(self) -> StoreCapabilities:
                return capabilities

        return Counting(store, Faults())

    tasks, partitions = 4, 3
    calls = {}
    async with adls_store_factory(page_size=5000) as (store, root):
        for check in (False, True):
            dest = join(root, f"out-{check}")
            job_id, expected = await run_tasks(store, dest, tasks=tasks, files_per_task=60)
            counted = counting(store, check=check)
            await commit_job(dest, job_id, store=counted)
            assert await output(store, dest) == expected
            calls[check] = dict(counted.counts.by_operation)
    assert calls[True]["list_dir"] - calls[False]["list_dir"] == tasks * partitions
    del calls[True]["list_dir"], calls[False]["list_dir"]
    assert calls[True] == calls[False]


@pytest.mark.emulator  # starts its own ADLS emulator
async def test_adls_source_check_lists_each_task_attempt_once() -> None:
    """ADLS lists a whole tree in one Path-List (``recursive=true``), so the source check
    lists each task attempt directory once instead of each partition of it: at 100,000
    files, 1,000 listings instead of 10,000, with few of them in flight at once on the
    caller's loop (``LOOP_WORKERS``). Measured against the same commit through a wrapper,
    which offers no tree listing and so lists each directory."""
    from aiocommit.stores.wrapper import StoreWrapper
    from tests.stores.adls_fixtures import adls_store_factory

    tasks, partitions = 5, 3
    lists = {}
    async with adls_store_factory(page_size=5000) as (store, root):
        for wrapped in (True, False):
            dest = join(root, f"out-{wrapped}")
            job_id, expected = await run_tasks(store, dest, tasks=tasks, files_per_task=60)
            summary = await commit_job(
                dest, job_id, store=StoreWrapper(store) if wrapped else store
            )
            assert await output(store, dest) == expected
            lists[wrapped] = summary.iostatistics.counters[S.OP_LIST_STATUS]
    assert lists[True] - lists[False] == tasks * partitions - tasks, lists


async def test_rename_workers_open_a_cloud_store_from_its_url(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename stage over worker processes on a cloud store opened from its URL: each
    worker opens its own client from the URL (the SDK over HTTP to the same moto), and
    the workers start while the manifests load."""
    from aiocommit.committers.manifest import rename_workers
    from aiocommit.stores.s3 import S3Store
    from aiocommit_testing.s3_emulator import create_bucket

    monkeypatch.setattr(rename_workers, "MIN_FILES_PER_PROCESS", 4)
    monkeypatch.setattr(rename_workers.RenameWorkers, "SAMPLE_MANIFESTS", 2)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)  # the workers inherit it
    bucket = f"workers-{os.getpid()}"
    await create_bucket(s3_endpoint, bucket)
    store = S3Store(bucket, endpoint_url=s3_endpoint)
    try:
        job_id, expected = await run_tasks(store, "/out", tasks=6, files_per_task=8)
        summary = await commit_job(f"s3://{bucket}/out", job_id, options=CommitOptions(processes=2))
        assert summary.iostatistics.gauges["job_rename_processes"] == 2
        assert summary.iostatistics.counters[S.COMMITTER_FILES_COMMITTED] == 48
        assert await output(store, "/out") == expected
        assert not await exists(store, "/out/_temporary")
    finally:
        await store.aclose()


@pytest.mark.emulator  # starts its own ADLS emulator
async def test_rename_workers_open_an_adls_store_passed_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ``AdlsStore`` passed to ``commit_job`` says how another process opens it
    (``opener``: same endpoint and key), so ``processes`` moves its renames into worker
    processes and off the caller's loop; before, it had no opener and every rename ran on
    the caller's loop whatever ``processes`` said."""
    from aiocommit.committers.manifest import rename_workers
    from aiocommit.stores.adls import AdlsStore
    from aiocommit.stores.base import opener_of
    from tests.stores.adls_fixtures import adls_store_factory

    monkeypatch.setattr(rename_workers, "MIN_FILES_PER_PROCESS", 4)
    monkeypatch.setattr(rename_workers.RenameWorkers, "SAMPLE_MANIFESTS", 2)
    async with adls_store_factory() as (store, root):
        again = opener_of(store)
        assert again is not None
        other = again()
        assert isinstance(other, AdlsStore)
        assert (other.account, other.filesystem, other.credential_kind) == (
            store.account,
            store.filesystem,
            "account key",
        )
        await other.aclose()
        job_id, expected = await run_tasks(store, f"{root}/out", tasks=6, files_per_task=8)
        summary = await commit_job(
            f"{root}/out", job_id, store=store, options=CommitOptions(processes=2)
        )
        assert summary.iostatistics.gauges["job_rename_processes"] == 2
        assert summary.iostatistics.counters[S.COMMITTER_FILES_COMMITTED] == 48
        assert await output(store, f"{root}/out") == expected
        assert not await exists(store, f"{root}/out/_temporary")
