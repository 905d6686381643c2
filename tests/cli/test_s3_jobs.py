"""``aiocommit jobs / show / abort / cleanup`` on S3 jobs (through moto): pending sets count
as the job's manifests, outstanding multipart uploads are listed, abort and cleanup leave
none behind."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from aiocommit import commit_job, setup_job
from aiocommit.cli.exits import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_USAGE
from aiocommit.committers.common.lease import LEASE_NAME
from aiocommit.errors import CommitError
from aiocommit.options import CommitOptions
from aiocommit.protocol.success import decode_success
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.s3 import S3Store
from aiocommit_testing.s3_emulator import create_bucket
from tests.cli.conftest import Cli
from tests.cli.test_subprocess import aiocommit
from tests.engine.test_job_states import part_way_commit
from tests.helpers import output, run_tasks, task_files
from tests.s3.helpers import MAGIC, outstanding, s3_task

T = TypeVar("T")
_buckets = itertools.count(1)


@pytest.fixture
def s3_dest(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(bucket, endpoint); ``s3://`` URLs opened by the CLI reach moto (botocore reads
    ``AWS_ENDPOINT_URL_S3``)."""
    bucket = f"cli-{os.getpid()}-{next(_buckets)}"
    anyio.run(create_bucket, s3_endpoint, bucket)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    return bucket, s3_endpoint


def prepare(bucket: str, endpoint: str, tmp: Path) -> str:
    """A magic job: one committed task, one uncommitted attempt (3 uploads)."""

    async def go() -> str:
        store = S3Store(bucket, endpoint_url=endpoint)
        try:
            job_id: str = await setup_job("/out", store=store, options=MAGIC)
            await s3_task(store, "/out", job_id, 0, 0, task_files(0, 2))
            await s3_task(store, "/out", job_id, 1, 0, task_files(1, 1), commit=False)
            return job_id
        finally:
            await store.aclose()

    return anyio.run(go)


def open_uploads(bucket: str, endpoint: str) -> int:
    async def go() -> int:
        store = S3Store(bucket, endpoint_url=endpoint)
        try:
            return len(await outstanding(store, "/out"))
        finally:
            await store.aclose()

    return anyio.run(go)


def test_jobs_show_and_abort(cli: Cli, s3_dest: tuple[str, str], tmp_path: Path) -> None:
    bucket, endpoint = s3_dest
    job_id = prepare(bucket, endpoint, tmp_path)
    url = f"s3://{bucket}/out"
    listed = cli("jobs", url, "--json")
    assert listed.exit_code == 0, listed.output
    (job,) = json.loads(listed.stdout)
    assert job["job_id"] == job_id
    assert job["pendingsets"] == 1 and job["pending_files"] == 3
    assert job["outstanding_uploads"] == 3
    table = aiocommit("jobs", url)  # the real process
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if job_id in line).split()
    # job, attempts, pending sets, files, size, age, uploads, state
    assert row[2:5] == ["1", "pending", "set(s)"] and row[5] == "3", row
    assert row[6:8] != ["0", "B"], row
    assert "0 manifests" not in table.stdout
    header = next(line for line in table.stdout.splitlines() if "uploads" in line)
    assert header.split().index("uploads") == 6
    assert row[9] == "3", row  # its 3 outstanding uploads (after size, age)
    pendingset = f"{url}/_temporary/{job_id}/00/pendingsets/task_{job_id[4:]}_m_000000.pendingset"
    shown = cli("show", pendingset, "--json")
    assert shown.exit_code == 0, shown.output
    facts = json.loads(shown.stdout)
    assert facts["kind"] == "pendingset" and facts["files"] == 2
    assert "S3A pending set" in cli("show", pendingset).stdout
    aborted = cli("abort", url, "--job-id", job_id)
    assert aborted.exit_code == 0, aborted.output
    assert open_uploads(bucket, endpoint) == 0
    assert json.loads(cli("jobs", url, "--json").stdout) == []


def test_cleanup_after_a_dead_driver(cli: Cli, s3_dest: tuple[str, str], tmp_path: Path) -> None:
    bucket, endpoint = s3_dest
    prepare(bucket, endpoint, tmp_path)
    assert open_uploads(bucket, endpoint) == 3
    result = cli("cleanup", f"s3://{bucket}/out", "--all", "--min-age", "0s")
    assert result.exit_code == 0, result.output
    assert open_uploads(bucket, endpoint) == 0


def _with_store(bucket: str, endpoint: str, work: Callable[[S3Store], Awaitable[T]]) -> T:
    async def go() -> T:
        store = S3Store(bucket, endpoint_url=endpoint)
        try:
            return await work(store)
        finally:
            await store.aclose()

    return anyio.run(go)


def test_commit_an_s3_job_left_by_a_dead_driver(
    cli: Cli, s3_dest: tuple[str, str], tmp_path: Path
) -> None:
    """`aiocommit commit` completes an S3 job's pending sets."""
    bucket, endpoint = s3_dest

    async def tasks(store: S3Store) -> tuple[str, dict[str, bytes]]:
        job_id = await setup_job("/out", store=store)
        files = {**task_files(0, 2), **task_files(1, 2)}
        await s3_task(store, "/out", job_id, 0, 0, task_files(0, 2))
        await s3_task(store, "/out", job_id, 1, 0, task_files(1, 2))
        return job_id, files

    job_id, expected = _with_store(bucket, endpoint, tasks)
    url = f"s3://{bucket}/out"
    assert _with_store(bucket, endpoint, lambda store: output(store, "/out")) == {}
    result = cli("commit", url, "--job-id", job_id, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["success"] is True and summary["already_committed"] is False
    assert summary["tasks"] == 2
    assert summary["files"] == len(expected)
    assert _with_store(bucket, endpoint, lambda store: output(store, "/out")) == expected
    success = _with_store(bucket, endpoint, lambda store: store.read_bytes("/out/_SUCCESS"))
    assert decode_success(success).job_id == job_id
    assert open_uploads(bucket, endpoint) == 0
    assert json.loads(cli("jobs", url, "--json").stdout) == []
    again = cli("commit", url, "--job-id", job_id)
    assert again.exit_code == 0, again.output
    assert "was already committed" in again.stdout
    missing = cli("commit", url, "--job-id", "job_200001010000_0001")
    assert missing.exit_code == EXIT_NOT_FOUND, missing.output


def test_commit_rerun_finishes_with_the_settings_it_started_with(
    cli: Cli, s3_dest: tuple[str, str], tmp_path: Path
) -> None:
    """A partitioned `replace` commit dies before deleting the old partition's file (the
    new one is in: old and new side by side); the CLI's re-run (no settings given)
    finishes it as `replace`, not the default `append`; other settings are refused before
    anything changes."""
    bucket, endpoint = s3_dest
    new = {"p=1/new.dat": b"new"}
    replace = CommitOptions(conflict_mode="replace", replace_partitions=True, max_attempts=1)

    async def dying_commit(store: S3Store) -> str:
        await store.write_bytes("/out/p=1/old.dat", b"old")
        await store.write_bytes("/out/p=2/kept.dat", b"other partition")
        job_id: str = await setup_job("/out", store=store)
        await s3_task(store, "/out", job_id, 0, 0, new)
        dying = FaultyStore(
            store, Faults(fail_paths=lambda op, path: op == "delete" and path.endswith("old.dat"))
        )
        with pytest.raises(CommitError):
            await commit_job("/out", job_id, store=dying, options=replace)
        return job_id

    job_id = _with_store(bucket, endpoint, dying_commit)
    url = f"s3://{bucket}/out"
    seen = _with_store(bucket, endpoint, lambda store: output(store, "/out"))
    # and the destination's lease, left abandoned for the re-run (readers skip it)
    visible = {k: v for k, v in seen.items() if k != LEASE_NAME}
    assert visible == {"p=1/old.dat": b"old", "p=2/kept.dat": b"other partition", **new}
    other = cli(
        "commit",
        url,
        "--job-id",
        job_id,
        "--option",
        "fs.s3a.committer.staging.conflict-mode=append",
    )
    assert other.exit_code == EXIT_FAILED, other.output
    assert "started earlier with conflict mode 'replace' per partition" in other.output
    after = _with_store(bucket, endpoint, lambda store: output(store, "/out"))
    assert {k: v for k, v in after.items() if k != LEASE_NAME} == visible
    # the refused re-run leaves the lease abandoned: the half-done commit stays guarded
    assert b'"abandoned"' in after[LEASE_NAME]
    typo = cli("commit", url, "--job-id", job_id, "--option", "fs.s3a.committer.nmae=magic")
    assert typo.exit_code == 2 and "fs.s3a.committer.name" in typo.output
    result = cli("commit", url, "--job-id", job_id)
    assert result.exit_code == 0, result.output
    assert _with_store(bucket, endpoint, lambda store: output(store, "/out")) == {
        "p=2/kept.dat": b"other partition",
        **new,
    }
    assert open_uploads(bucket, endpoint) == 0


def test_a_manifest_committer_job_on_s3_is_undone_and_finished_as_one(
    cli: Cli, s3_dest: tuple[str, str]
) -> None:
    """On S3 both committers may write: a manifest committer's part-way commit is undone
    by `aiocommit abort` (its renames moved back), and `aiocommit commit` finishes one;
    neither is taken for a zero-rename job."""
    bucket, endpoint = s3_dest
    url = f"s3://{bucket}"

    async def part_way(store: S3Store, dest: str) -> tuple[str, dict[str, bytes]]:
        job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=6)
        await part_way_commit(store, dest, job_id)
        assert await output(store, dest) != {}  # some files are visible
        return job_id, expected

    job_id, _ = _with_store(bucket, endpoint, lambda store: part_way(store, "/undone"))
    aborted = cli("abort", f"{url}/undone", "--job-id", job_id)
    assert aborted.exit_code == 0, aborted.output
    assert _with_store(bucket, endpoint, lambda store: output(store, "/undone")) == {}
    job_id, expected = _with_store(bucket, endpoint, lambda store: part_way(store, "/done"))
    committed = cli("commit", f"{url}/done", "--job-id", job_id)
    assert committed.exit_code == 0, committed.output
    assert _with_store(bucket, endpoint, lambda store: output(store, "/done")) == expected


def test_cleanup_uploads_sweeps_only_old_ones(
    cli: Cli, s3_dest: tuple[str, str], tmp_path: Path
) -> None:
    """`cleanup --uploads --older-than`: the explicit destination-wide sweep, by age."""
    bucket, endpoint = s3_dest
    prepare(bucket, endpoint, tmp_path)
    url = f"s3://{bucket}/out"
    assert cli("cleanup", url, "--uploads").exit_code == EXIT_USAGE
    assert cli("cleanup", url, "--uploads", "--older-than", "0s", "--all").exit_code == EXIT_USAGE
    young = cli("cleanup", url, "--uploads", "--older-than", "1d")
    assert young.exit_code == 0, young.output
    assert "0 upload(s) older than 1d aborted" in young.stdout
    dry = cli("cleanup", url, "--uploads", "--older-than", "0s", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.count("would abort upload of") == 3
    assert open_uploads(bucket, endpoint) == 3
    swept = cli("cleanup", url, "--uploads", "--older-than", "0s")
    assert swept.exit_code == 0, swept.output
    assert "3 upload(s) older than" in swept.stdout
    assert open_uploads(bucket, endpoint) == 0


def test_an_unknown_job_changes_nothing(cli: Cli, s3_dest: tuple[str, str], tmp_path: Path) -> None:
    """A typo in a job ID: commit is refused (exit 3), abort and cleanup find nothing to
    do; the live job's pending sets and uploads stay."""
    bucket, endpoint = s3_dest
    live = prepare(bucket, endpoint, tmp_path)
    url = f"s3://{bucket}/out"
    unknown = "job_20260101000000abcdefabcdef_0008"
    refused = cli("commit", url, "--job-id", unknown)
    assert refused.exit_code == EXIT_NOT_FOUND, refused.output
    assert cli("abort", url, "--job-id", unknown).exit_code == 0
    assert cli("cleanup", url, "--job-id", unknown).exit_code == 0
    assert open_uploads(bucket, endpoint) == 3
    (job,) = json.loads(cli("jobs", url, "--json").stdout)
    assert job["job_id"] == live and job["outstanding_uploads"] == 3
