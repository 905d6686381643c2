"""Two S3 leftovers a kill test found, and options the S3 docs promise (issue 19, item 9):

* a SIGKILL between deleting ``_temporary/JOB/`` and the emptied ``_temporary/`` leaves a
  zero-byte ``DEST/_temporary/`` marker: ``abort`` and ``cleanup --all`` remove it;
* ``-o fs.s3a.endpoint=URL`` (the S3 client's settings) on ``commit``, ``abort``,
  ``cleanup`` and ``jobs``.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import anyio
import pytest

from aiocommit import setup_job
from aiocommit.stores.base import join
from aiocommit.stores.s3 import S3Store
from aiocommit_testing.s3_emulator import create_bucket
from tests.cli.conftest import Cli
from tests.helpers import exists, output, task_files
from tests.s3.helpers import s3_task

_buckets = itertools.count(1)


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket; the CLI reaches moto only through ``-o fs.s3a.endpoint`` (no
    ``AWS_ENDPOINT_URL*`` in the environment)."""
    name = f"left-{os.getpid()}-{next(_buckets)}"
    anyio.run(create_bucket, s3_endpoint, name)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    return name


def _store(endpoint: str, bucket: str) -> S3Store:
    return S3Store(bucket, endpoint_url=endpoint)


def _marker_left(endpoint: str, bucket: str) -> bool:
    """The state a kill leaves: no job, only the zero-byte ``out/_temporary/`` marker."""

    async def go() -> bool:
        store = _store(endpoint, bucket)
        try:
            await store.write_bytes("/out/data.csv", b"kept")
            await store.mkdirs("/out/_temporary")
            return await exists(store, "/out/_temporary")
        finally:
            await store.aclose()

    return anyio.run(go)


def _temporary_exists(endpoint: str, bucket: str) -> bool:
    async def go() -> bool:
        store = _store(endpoint, bucket)
        try:
            assert await output(store, "/out") == {"data.csv": b"kept"}
            return await exists(store, "/out/_temporary")
        finally:
            await store.aclose()

    return anyio.run(go)


@pytest.mark.parametrize("command", ["abort", "cleanup"])
def test_an_empty_temporary_marker_is_removed(
    cli: Cli, s3_endpoint: str, bucket: str, command: str
) -> None:
    assert _marker_left(s3_endpoint, bucket)
    url = f"s3a://{bucket}/out"
    endpoint = f"fs.s3a.endpoint={s3_endpoint}"
    listed = cli("jobs", url, "-o", endpoint, "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == []
    if command == "abort":
        result = cli("abort", url, "--job-id", "job_202611240000_0001", "-o", endpoint)
        assert "nothing to abort" in result.stdout
    else:
        result = cli("cleanup", url, "--all", "-o", endpoint)
        assert "(empty)" in result.stdout
    assert result.exit_code == 0, result.output
    assert not _temporary_exists(s3_endpoint, bucket)


def test_commit_takes_the_s3_clients_endpoint(
    cli: Cli, s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    files = task_files(0, 3)

    async def prepare() -> str:
        store = _store(s3_endpoint, bucket)
        try:
            job_id = await setup_job("/out", store=store)
            await s3_task(store, "/out", job_id, 0, 0, files)
            return job_id
        finally:
            await store.aclose()

    job_id = anyio.run(prepare)
    url = f"s3a://{bucket}/out"
    result = cli(
        "commit", url, "--job-id", job_id, "-o", f"fs.s3a.endpoint={s3_endpoint}", "--json"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["committer"].endswith("DirectoryStagingCommitter")

    async def landed() -> dict[str, bytes]:
        store = _store(s3_endpoint, bucket)
        try:
            return await output(store, "/out")
        finally:
            await store.aclose()

    assert anyio.run(landed) == files


def test_s3_client_settings_are_refused_elsewhere_and_typos_named(cli: Cli, tmp_path: Path) -> None:
    result = cli("jobs", str(tmp_path), "-o", "fs.s3a.endpoint=http://127.0.0.1:1")
    assert result.exit_code == 2
    assert "s3:// and s3a:// destinations only" in result.output
    typo = cli("jobs", "s3a://b/out", "-o", "fs.s3a.endpoint.regoin=x")
    assert typo.exit_code == 2
    assert "fs.s3a.endpoint.region" in typo.output


def test_setup_keeps_an_older_success_until_the_commit_changes_output(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    """One behaviour on every committer: the S3A committers, like the manifest one, keep
    the destination's ``_SUCCESS`` at job setup; the commit replaces it."""

    async def go() -> None:
        from aiocommit import CommitOptions, commit_job, commit_task, setup_task
        from aiocommit.protocol.success import SuccessData, decode_success, encode_success

        store = _store(s3_endpoint, bucket)
        try:
            older = SuccessData.now("job_202611240000_0001", "JobID")
            await store.write_bytes("/out/_SUCCESS", encode_success(older))
            for committer in ("staging", "magic"):
                options = CommitOptions(committer=committer)
                job_id = await setup_job("/out", store=store, options=options)
                kept = decode_success(await store.read_bytes("/out/_SUCCESS"))
                assert kept.job_id == older.job_id, committer
                attempt = await setup_task("/out", job_id, 0, store=store)
                await attempt.write_bytes(f"{committer}.csv", b"x", store=store)
                await commit_task(attempt, store=store)
                await commit_job("/out", job_id, store=store)
                now = decode_success(await store.read_bytes(join("/out", "_SUCCESS")))
                assert now.job_id == job_id
                older = now
        finally:
            await store.aclose()

    anyio.run(go)
