"""``aiocommit jobs / show / abort / cleanup`` on S3 jobs (through moto): pending sets count
as the job's manifests, outstanding multipart uploads are listed, abort and cleanup leave
none behind."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import anyio
import pytest

from aiocommit.engine.zero_rename import setup_s3_job
from aiocommit.stores.s3 import S3Store
from aiocommit.testing.s3_emulator import create_bucket
from tests.cli.conftest import Cli
from tests.helpers import task_files
from tests.s3.helpers import magic_task, outstanding, staging_task

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
    """A job: one committed staging task, one uncommitted magic attempt (3 uploads)."""

    async def go() -> str:
        store = S3Store(bucket, endpoint_url=endpoint)
        try:
            job_id = await setup_s3_job("/out", store=store)
            await staging_task(store, "/out", job_id, 0, 0, task_files(0, 2), tmp)
            await magic_task(store, "/out", job_id, 1, 0, task_files(1, 1), commit=False)
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
    table = cli("jobs", url)
    assert "1 pending set(s), 3 file(s), 3 outstanding upload(s)" in table.stdout
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
    result = cli("cleanup", f"s3://{bucket}/out", "--all")
    assert result.exit_code == 0, result.output
    assert open_uploads(bucket, endpoint) == 0
