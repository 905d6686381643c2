"""One normaliser for option keys: our names and Hadoop's, unknown keys under our prefixes
refused with the closest valid key, and every option is read by the engine."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import anyio
import pytest

from aiocommit import abort_job, commit_job
from aiocommit.committers.common.commit_plan import decode_plan
from aiocommit.errors import InvalidInput
from aiocommit.options import (
    GROUPS,
    CommitOptions,
    CommitterOptions,
    LimitOptions,
    RetryOptions,
    S3AOptions,
    StoreSettings,
    UnknownOption,
    option_specs,
)
from aiocommit.protocol.layout import JobLayout
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


#: leaves read only on S3 (tests/s3 and tests/stores read them there)
S3_ONLY = ("store.", "committer.s3a.")


def recording(group: type[Any], read: set[str]) -> type[Any]:
    """A subclass of an options group that records which leaves are read."""
    leaves = frozenset(f.name for f in dataclasses.fields(group))

    def __getattribute__(self: Any, name: str) -> Any:
        if name in leaves:
            read.add(f"{group.PATH}.{name}")
        return object.__getattribute__(self, name)

    return type(f"Recording{group.__name__}", (group,), {"__getattribute__": __getattribute__})


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
    leaves = {spec.path for spec in option_specs() if not spec.path.startswith(S3_ONLY)}
    named = {spec.name for spec in option_specs() if spec.path in leaves}
    assert set(values) == named, "give every option a value here"
    read: set[str] = set()
    plain = CommitOptions(**values)
    groups = {
        name: recording(type(getattr(plain, name)), read)(**_leaf_values(getattr(plain, name)))
        for name in GROUPS
    }
    options = CommitOptions(**groups)

    async def jobs() -> None:
        read.clear()
        job_id, _ = await run_tasks(store, "/out", 2, 3, options=options)
        await commit_job("/out", job_id, store=store, options=options)
        other, _ = await run_tasks(store, "/other", 1, 2, options=options)
        # a cleanup that fails is ignored (cleanup_ignore_failures), so the abort succeeds
        failing = FaultyStore(store, Faults(fail_paths=lambda op, path: op == "delete"))
        await abort_job("/other", other, store=failing, options=options)

    anyio.run(jobs)
    assert leaves <= read, f"never read: {sorted(leaves - read)}"


def _leaf_values(group: Any) -> dict[str, Any]:
    return {f.name: getattr(group, f.name) for f in dataclasses.fields(group)}


def test_bare_names_resolve_in_any_case_and_typos_are_refused() -> None:
    assert CommitOptions.from_mapping({"Concurrency": "3"}).limits.concurrency == 3
    assert CommitOptions.from_mapping({"LIMITS.CONCURRENCY": "4"}).limits.concurrency == 4
    with pytest.raises(UnknownOption, match="did you mean 'concurrency'") as caught:
        CommitOptions.from_mapping({"concurency": "3"})
    assert caught.value.closest == "concurrency"
    with pytest.raises(UnknownOption, match="did you mean 'validate_output'"):
        CommitOptions.from_mapping({"validate_ouput": "true"})


def test_s3a_keys_resolve_into_the_tree() -> None:
    options = CommitOptions.from_mapping(
        {
            "spark.hadoop.fs.s3a.committer.name": "magic",
            "fs.s3a.committer.staging.conflict-mode": "REPLACE",
            "fs.s3a.endpoint": "http://127.0.0.1:9000",
            "fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.multipart.size": "8M",
            "fs.s3a.committer.abort.pending.uploads": "false",
            "fs.s3a.threads.max": "64",  # Hadoop's, not ours: ignored
        }
    )
    assert options.committer.name == "magic"
    assert options.conflicts.mode == "replace"
    assert options.committer.s3a == S3AOptions(
        part_size=8 * 1024 * 1024, abort_pending_uploads=False
    )
    assert options.store == StoreSettings(endpoint="http://127.0.0.1:9000", path_style_access=True)
    assert options.store.as_s3a() == {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.path.style.access": "true",
    }
    with pytest.raises(UnknownOption):
        CommitOptions.from_mapping({"fs.s3a.threads.max": "64"}, others="error")
    with pytest.raises(InvalidInput, match="credentials never go in options"):
        CommitOptions.from_mapping({"spark.hadoop.fs.s3a.secret.key": "SECRET"})


def test_tree_groups_and_flat_aliases_agree() -> None:
    tree = CommitOptions(
        limits=LimitOptions(concurrency=8),
        retry=RetryOptions(max_attempts=3),
        committer=CommitterOptions(name="staging"),
    )
    flat = CommitOptions(concurrency=8, max_attempts=3, committer="staging")
    assert tree == flat
    assert flat.concurrency == 8 and flat.committer.name == "staging"
    replaced = dataclasses.replace(flat, conflict_mode="fail")  # type: ignore[call-arg]
    assert replaced.conflicts.mode == "fail"
    assert flat.with_values(committer="magic").committer.name == "magic"
    with pytest.raises(UnknownOption, match="did you mean 'concurrency'"):
        CommitOptions(concurency=8)
    with pytest.raises(InvalidInput, match=r"limits.min_concurrency \(9\) must not exceed"):
        CommitOptions(concurrency=8, min_concurrency=9)


def test_the_record_gives_the_same_tree_back() -> None:
    options = CommitOptions.from_mapping(
        {"concurrency": "5", "fs.s3a.committer.name": "partitioned", "fs.s3a.endpoint": "http://e"}
    )
    record = options.as_record()
    assert record["limits.concurrency"] == "5"
    assert record["committer.name"] == "partitioned"
    assert "limits.rate_limit" not in record  # unset leaves are not recorded
    assert CommitOptions.from_record(record) == options


async def test_the_commit_plan_records_the_resolved_tree() -> None:
    store = MemoryStore()
    options = CommitOptions.from_mapping(
        {"Concurrency": "7", "mapreduce.fileoutputcommitter.cleanup.skipped": "true"}
    )
    job_id, _ = await run_tasks(store, "/out", 1, 2, options=options)
    await commit_job("/out", job_id, store=store, options=options)
    path = JobLayout("/out", job_id).commit_plan_path
    plan = decode_plan(await store.read_bytes(path), path)
    assert plan.options["limits.concurrency"] == "7"
    assert plan.options["cleanup.skip"] == "true"
    assert CommitOptions.from_record(plan.options) == options
