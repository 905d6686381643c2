"""The README's Python examples (the functions, and the ``Client``), run as they are
written (only the destination URL changed) in a fresh interpreter against every store:
the local filesystem, memory, and the emulators of ADLS, GCS and S3. On S3 each must
commit with the staging committer and copy no object."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from aiocommit.committers.factory import RECORD_NAME
from aiocommit.protocol import statistics as S
from aiocommit.protocol.pending import STAGING_COMMITTER
from aiocommit.protocol.success import COMMITTER_NAME as MANIFEST_COMMITTER
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import Store, join
from aiocommit_testing.adls_emulator import run_adls_emulator
from aiocommit_testing.gcs_emulator import create_bucket as create_gcs_bucket
from aiocommit_testing.s3_emulator import DUMMY_CREDENTIALS, create_bucket
from tests.helpers import walk
from tests.stores.adls_fixtures import make_store
from tests.stores.gcs_fixtures import fresh_bucket_name

README = Path(__file__).parents[2] / "README.md"
DEST_LINE = 'dest = "file:///tmp/aiocommit-example"'
CLIENT_DEST_LINE = 'dest = "file:///tmp/aiocommit-client-example"'
EXPECTED = {f"part={task % 2}/part-{task:05d}.csv": b"a,b\n" for task in range(4)}


def readme_example(client: bool = False) -> str:
    """The README's first block under "Use it from Python", or its ``Client`` block."""
    text = README.read_text()
    section = text.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    found = [block for block in blocks if ("aiocommit.Client(" in block) == client]
    assert found, f"README has no Python example{' with a Client' if client else ''}"
    line = CLIENT_DEST_LINE if client else DEST_LINE
    assert line in found[0], "the example's destination line changed"
    return str(found[0])


async def run_example(dest_url: str, env: dict[str, str], *, client: bool = False) -> str:
    line = CLIENT_DEST_LINE if client else DEST_LINE
    code = readme_example(client).replace(line, f"dest = {dest_url!r}")
    result = await anyio.run_process(
        [sys.executable, "-c", code], env={**os.environ, **env}, check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode().strip()


@asynccontextmanager
async def destination(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, dict[str, str], Store | None, str]]:
    """(URL, environment, a store client to check the result with, path in it)."""
    staging = {"AIOCOMMIT_STAGING_DIR": str(tmp_path / "staging")}
    if kind == "file":
        from aiocommit.stores.local import LocalStore

        yield f"file://{tmp_path}/out", {}, LocalStore(), f"{tmp_path}/out"
    elif kind == "memory":
        yield "memory://readme/out", {}, None, ""
    elif kind == "s3a":
        from aiocommit.stores.s3 import S3Store

        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = fresh_bucket_name()
        await create_bucket(endpoint, bucket)
        env = {**DUMMY_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, **staging}
        env["AWS_DEFAULT_REGION"] = "us-east-1"
        store = S3Store(bucket, endpoint_url=endpoint)
        yield f"s3a://{bucket}/table", env, store, "/table"
    elif kind == "gs":
        from aiocommit.stores.gcs import GcsStore

        endpoint = request.getfixturevalue("gcs_endpoint")
        bucket = fresh_bucket_name()
        await create_gcs_bucket(endpoint, bucket)
        env = {"STORAGE_EMULATOR_HOST": endpoint.removeprefix("http://")}
        yield f"gs://{bucket}/table", env, GcsStore(bucket, api_root=endpoint), "/table"
    elif kind == "abfss":
        async with run_adls_emulator() as emulator:
            emulator.create_filesystem("data")
            env = {
                "AIOCOMMIT_ADLS_ENDPOINT": emulator.endpoint,
                "AZURE_STORAGE_ACCOUNT_KEY": emulator.key,
            }
            url = f"abfss://data@{emulator.account}.dfs.core.windows.net/table"
            yield url, env, make_store(emulator, "data"), "/table"
    else:
        raise ValueError(kind)


@pytest.mark.parametrize("client", [False, True], ids=["functions", "client"])
@pytest.mark.parametrize(
    "kind",
    [
        "file",
        "memory",
        *(pytest.param(k, marks=pytest.mark.emulator) for k in ("abfss", "gs", "s3a")),
    ],
)
async def test_readme_example_commits_on_every_store(
    kind: str, client: bool, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with destination(kind, request, tmp_path) as (url, env, store, path):
        assert await run_example(url, env, client=client) == "True 4"
        if store is None:  # memory: the output lived in the example's own process
            return
        try:
            found = await walk(store, path)
            success = decode_success(found.pop("_SUCCESS"))
            assert found == EXPECTED
            assert success.success
            counters = success.iostatistics.counters
            if kind == "s3a":
                assert success.committer == STAGING_COMMITTER
                assert counters.get(S.OP_RENAME, 0) == 0, "an object was copied"
                assert not os.listdir(tmp_path / "staging" / success.job_id)
            else:
                assert success.committer == MANIFEST_COMMITTER
                assert counters[S.OP_RENAME] >= 4  # the files (and _SUCCESS) renamed
        finally:
            await store.aclose()


async def test_the_job_records_its_committer(s3_endpoint: str, tmp_path: Path) -> None:
    """A job set up on S3 keeps the staging committer for its tasks and commit, and the
    record says so."""
    from aiocommit import commit_job, commit_task, setup_job, setup_task
    from aiocommit.protocol.layout import JobLayout
    from aiocommit.stores.s3 import S3Store

    bucket = fresh_bucket_name()
    await create_bucket(s3_endpoint, bucket)
    store = S3Store(bucket, endpoint_url=s3_endpoint)
    try:
        job_id = await setup_job("/out", store=store)
        layout = JobLayout("/out", job_id)
        record = await store.read_bytes(join(layout.job_attempt_dir, RECORD_NAME))
        assert b'"committer": "staging"' in record
        attempt = await setup_task("/out", job_id, 0, store=store)
        assert attempt.committer_name == "staging" and attempt.local_dir is not None
        await attempt.write_bytes("a/b.csv", b"1")
        async with attempt.open("a/c.csv", store=store) as file:
            await file.write(b"2")
            await file.write(b"3")
        await commit_task(attempt, store=store)
        summary = await commit_job("/out", job_id, store=store)
        assert summary.committer == STAGING_COMMITTER
        found = await walk(store, "/out")
        assert found.pop("_SUCCESS") and found == {"a/b.csv": b"1", "a/c.csv": b"23"}
    finally:
        await store.aclose()
