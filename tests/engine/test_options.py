"""One normaliser for option keys: our names and Hadoop's, unknown keys under our prefixes
refused with the closest valid key, and every option is read by the engine."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, ClassVar

import anyio
import pytest

from aiocommit import abort_job, commit_job
from aiocommit.options import CommitOptions, UnknownOption
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.memory import MemoryStore
from tests.helpers import run_tasks


@pytest.mark.parametrize(
    ("key", "field", "value"),
    [
        ("validate-output", "validate_output", True),
        ("aiocommit.validate-output", "validate_output", True),
        ("validate.output", "validate_output", True),
        ("mapreduce.manifest.committer.validate.output", "validate_output", True),
        ("spark.hadoop.mapreduce.manifest.committer.io.threads", "concurrency", 7),
        ("spark.hadoop.aiocommit.max_attempts", "max_attempts", 7),
        ("fs.azure.io.rate.limit", "rate_limit", 7.0),
    ],
)
def test_every_spelling_sets_the_option(key: str, field: str, value: object) -> None:
    options = CommitOptions.from_mapping({key: "true" if value is True else str(value)})
    assert getattr(options, field) == value


@pytest.mark.parametrize(
    ("key", "closest"),
    [
        ("mapreduce.manifest.committer.io.thread", "mapreduce.manifest.committer.io.threads"),
        (
            "spark.hadoop.mapreduce.manifest.committer.validate.outputs",
            "mapreduce.manifest.committer.validate.output",
        ),
        ("aiocommit.concurency", "aiocommit.concurrency"),
        ("aiocommit.retry_max_delays", "aiocommit.retry_max_delay"),
    ],
)
def test_unknown_key_under_our_prefixes_names_the_closest(key: str, closest: str) -> None:
    with pytest.raises(UnknownOption) as caught:
        CommitOptions.from_mapping({key: "4"})
    assert caught.value.closest == closest
    assert repr(key) in str(caught.value) and repr(closest) in str(caught.value)


def test_hadoops_own_options_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="aiocommit"):
        options = CommitOptions.from_mapping(
            {"spark.hadoop.mapreduce.manifest.committer.writer.queue.capacity": "32"}
        )
    assert options == CommitOptions()
    assert "writer.queue.capacity is Hadoop's and has no effect" in caplog.text


def test_unrelated_keys_pass_through_unless_refused() -> None:
    unrelated = {"path": "/x", "fs.defaultFS": "file:///", "spark.sql.shuffle.partitions": "4"}
    assert CommitOptions.from_mapping(unrelated) == CommitOptions()
    with pytest.raises(UnknownOption, match="'path'"):
        CommitOptions.from_mapping(unrelated, others="error")
    handled = {"aiocommit.test.failPartitionAlways": "1"}
    assert CommitOptions.from_mapping(handled, handled_prefixes=("aiocommit.test.",))
    with pytest.raises(UnknownOption):
        CommitOptions.from_mapping(handled)


def test_spark_writer_refuses_a_typo() -> None:
    from aiocommit.integrations.spark.settings import WriteSettings

    with pytest.raises(UnknownOption, match="did you mean"):
        WriteSettings.from_options({"path": "/x", "mapreduce.manifest.committer.io.thread": "4"})
    settings = WriteSettings.from_options(
        {"path": "/x", "aiocommit.test.failpartitionalways": "1", "aiocommit.concurrency": "5"}
    )
    assert settings.commit.concurrency == 5 and settings.hooks.fail_partition_always == 1


class RecordingOptions(CommitOptions):
    """Options that remember which fields were read after construction."""

    read: ClassVar[set[str]] = set()
    fields: ClassVar[frozenset[str]] = frozenset(f.name for f in dataclasses.fields(CommitOptions))

    def __getattribute__(self, name: str) -> Any:
        if name in RecordingOptions.fields:
            RecordingOptions.read.add(name)
        return super().__getattribute__(name)


def test_every_option_is_read_by_the_engine() -> None:
    store = MemoryStore()
    values: dict[str, Any] = {
        "concurrency": 8,
        "adaptive_concurrency": True,
        "min_concurrency": 2,
        "rate_limit": 100_000.0,
        "delete_rate_limit": 100_000.0,
        "max_attempts": 3,
        "retry_budget_seconds": 30.0,
        "retry_base_delay": 0.001,
        "retry_max_delay": 0.01,
        "delete_target_files": True,
        "validate_output": True,
        "write_success": True,
        "cleanup_skip": False,
        "cleanup_ignore_failures": True,
        "cleanup_parallel_delete": True,
        "report_dir": "/reports",
        "diagnostics_dir": "/diagnostics",
        "use_source_etag": True,
        "conflict_mode": "append",
        "replace_partitions": False,
        "processes": 2,  # read, then the memory store stays in the caller's loop
        "committer": "manifest",
        "tune_gc": True,
        "lease_seconds": 30.0,
    }
    assert set(values) == RecordingOptions.fields, "give every option a value here"

    async def jobs() -> None:
        options = RecordingOptions(**values)
        RecordingOptions.read.clear()
        job_id, _ = await run_tasks(store, "/out", 2, 3, options=options)
        await commit_job("/out", job_id, store=store, options=options)
        other, _ = await run_tasks(store, "/other", 1, 2, options=options)
        # a cleanup that fails is ignored (cleanup_ignore_failures), so the abort succeeds
        failing = FaultyStore(store, Faults(fail_paths=lambda op, path: op == "delete"))
        await abort_job("/other", other, store=failing, options=options)

    anyio.run(jobs)
    assert RecordingOptions.read == RecordingOptions.fields, (
        f"never read: {sorted(RecordingOptions.fields - RecordingOptions.read)}"
    )
