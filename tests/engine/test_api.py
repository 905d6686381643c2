"""The public API around the stages: IDs, options, URLs, the parallel scan."""

from __future__ import annotations

import pickle
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from aiocommit import (
    CommitOptions,
    MemoryStore,
    commit_job,
    commit_task,
    new_job_id,
    setup_job,
    setup_task,
)
from aiocommit.committers.common.session import open_context
from aiocommit.committers.manifest.task import scan_task_attempt
from aiocommit.protocol.ids import task_attempt_id_for, task_id_for
from aiocommit.stores.base import Store
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.local import LocalStore
from aiocommit.stores.wrapper import StoreWrapper

T = TypeVar("T")


def test_job_ids_are_unique_within_a_second_and_hadoop_shaped() -> None:
    ids = {new_job_id() for _ in range(2000)}
    assert len(ids) == 2000
    for job_id in list(ids)[:20]:
        prefix, identifier, number = job_id.split("_")
        assert prefix == "job" and identifier.isalnum() and number.isdigit()
    job_id = "job_202611210000_0001"
    assert task_id_for(job_id, 3) == "task_202611210000_0001_m_000003"
    assert task_attempt_id_for(task_id_for(job_id, 3), 2) == "attempt_202611210000_0001_m_000003_2"


def test_options_from_hadoop_and_spark_names() -> None:
    options = CommitOptions.from_mapping(
        {
            "spark.hadoop.mapreduce.manifest.committer.io.threads": "64",
            "mapreduce.manifest.committer.validate.output": "true",
            "mapreduce.fileoutputcommitter.cleanup.skipped": "false",
            "mapreduce.manifest.committer.summary.report.directory": "file:///tmp/reports",
            "fs.azure.io.rate.limit": "1000",
            "aiocommit.adaptive_concurrency": "false",
            "delete_target_files": True,
            "spark.executor.memory": "4g",
        }
    )
    assert options.concurrency == 64
    assert options.validate_output is True
    assert options.cleanup_skip is False
    assert options.report_dir == "file:///tmp/reports"
    assert options.rate_limit == 1000.0
    assert options.adaptive_concurrency is False
    assert options.delete_target_files is True


@pytest.mark.parametrize(
    "settings",
    [
        {"mapreduce.manifest.committer.io.threads": "0"},
        {"mapreduce.manifest.committer.validate.output": "maybe"},
        {"fs.azure.io.rate.limit": "-3"},
    ],
)
def test_bad_option_values_are_refused(settings: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"must be|not a boolean"):
        CommitOptions.from_mapping(settings)


def test_every_option_has_documentation() -> None:
    from aiocommit.options import option_specs

    for spec in option_specs():
        assert spec.doc, spec.path


async def test_task_attempt_travels_by_url(tmp_path: Path) -> None:
    """An attempt pickled to another worker commits with no store handed over."""
    store = MemoryStore("by-url")
    job_id = await setup_job("memory://by-url/dest")
    attempt = await setup_task("memory://by-url/dest", job_id, 0)
    assert attempt.dest == "memory://by-url/dest" and attempt.dest_path == "/dest"
    await store.write_bytes(attempt.path("k=1/a.txt"), b"a")
    await commit_task(pickle.loads(pickle.dumps(attempt)))
    summary = await commit_job("memory://by-url/dest", job_id)
    assert summary.filenames == ["memory://by-url/dest/k=1/a.txt"]

    local = str(tmp_path / "local")
    job_id = await setup_job(local)
    attempt = await setup_task(f"file://{local}", job_id, 0)
    assert attempt.dest == f"file:{local}"
    await LocalStore().write_bytes(attempt.path("x.txt"), b"x")
    await commit_task(attempt)
    await commit_job(local, job_id)
    assert (tmp_path / "local" / "x.txt").read_bytes() == b"x"


class ListingsAtOnce(StoreWrapper):
    """Counts the most ``list_dir`` calls in flight at once (each waits ``latency``)."""

    def __init__(self, inner: Store, latency: float):
        super().__init__(inner)
        self.latency = latency
        self.in_flight = 0
        self.peak = 0

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        if operation != "list_dir":
            return await call()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await anyio.sleep(self.latency)
            return await call()
        finally:
            self.in_flight -= 1


async def test_task_scan_lists_directories_concurrently() -> None:
    """60 directories: a sequential walk has one listing in flight at a time. Counted
    in the store, not timed (a bound on the wall time, even at half of a sequential
    walk's, was decided by a loaded test worker's pauses)."""
    store = MemoryStore("scan")
    job_id = await setup_job("/dest", store=store)
    attempt = await setup_task("/dest", job_id, 0, store=store)
    for directory in range(60):
        for n in range(3):
            await store.write_bytes(attempt.path(f"d={directory}/f{n}"), b"x")
    counted = ListingsAtOnce(store, latency=0.02)
    slow = FaultyStore(counted, Faults())
    async with open_context("/dest", job_id, store=slow) as context:
        files, dirs = await scan_task_attempt(context, attempt.work_dir)
    assert len(files) == 180 and len(dirs) == 60
    assert counted.peak >= 10, f"at most {counted.peak} listings at once"
    listed = {path for operation, path in slow._seen if operation == "list_dir"}
    assert len(listed) == 61, "each directory listed once"
