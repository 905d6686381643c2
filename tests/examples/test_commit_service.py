"""The example service (examples/commit_service.py), started as documented on loopback
and driven over HTTP: a job committed on request with its progress, bad input refused
with the library's error, an abort undoing a job."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from aiocommit import LocalStore
from tests.helpers import run_tasks

SERVICE = Path(__file__).resolve().parents[2] / "examples" / "commit_service.py"


@pytest.fixture
def service() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``python examples/commit_service.py --port 0``; its URL from the line it prints."""
    process = subprocess.Popen(
        [sys.executable, str(SERVICE), "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:"), line
        yield line.split()[-1], process
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout:
            process.stdout.close()
        if process.stderr:
            process.stderr.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def call(
    http: aiohttp.ClientSession, method: str, url: str, body: Any = None
) -> tuple[int, Any]:
    async with http.request(method, url, json=body) as response:
        return response.status, await response.json()


async def wait_done(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    with anyio.fail_after(60):
        while True:
            status, job = await call(http, "GET", url)
            assert status == 200
            if job["state"] != "committing":
                return dict(job)
            await anyio.sleep(0.05)


async def test_commit_service(
    service: tuple[str, subprocess.Popen[str]], http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    base, process = service
    store = LocalStore()
    dest = str(tmp_path / "out")
    await anyio.Path(dest).mkdir()
    job_id, expected = await run_tasks(store, dest, tasks=4, files_per_task=25)

    status, body = await call(
        http, "POST", f"{base}/jobs", {"dest": f"file://{dest}", "job_id": job_id}
    )
    assert (status, body) == (202, {"job_id": job_id, "state": "committing"})
    job = await wait_done(http, f"{base}/jobs/{job_id}")
    assert job["state"] == "committed", job
    assert job["error"] is None
    assert job["success"] == {
        "files": 100,
        "bytes": sum(len(d) for d in expected.values()),
        "tasks": 4,
        "filenames": 100,
    }
    assert job["files_done"] == job["files_total"] == 100
    assert job["stages"]["job_stage_load_manifests"] == {
        "done": 4,
        "total": 4,
        "unit": "manifests",
    }
    assert job["stage"] == "job_stage_cleanup"  # the last
    for relative, data in expected.items():
        assert (tmp_path / "out" / relative).read_bytes() == data
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert await call(http, "GET", f"{base}/health") == (200, {"jobs": 1, "committing": 0})

    # bad input: the library's error, one except in the service
    for bad, words in (
        ({"dest": "foo://bucket/out", "job_id": job_id}, "no store adapter"),
        ({"dest": f"file://{dest}", "job_id": "../../etc"}, "invalid job ID"),
        ({"dest": dest, "job_id": job_id, "options": {"concurrency": "lots"}}, "concurrency"),
        ({"dest": dest, "job_id": job_id, "options": {"aiocommit.concurency": 4}}, "did you"),
        ({"dest": dest, "job_id": job_id, "options": {"min_concurrency": 5000}}, "exceed"),
        ({"dest": dest}, "give dest"),
    ):
        status, body = await call(http, "POST", f"{base}/jobs", bad)
        assert status == 400 and words in body["error"], (bad, body)
        assert body["error"].startswith(("InvalidInput", "UnknownOption")), body
    assert (await call(http, "GET", f"{base}/jobs/job_none_1"))[0] == 404
    status, body = await call(http, "POST", f"{base}/jobs", {"dest": dest, "job_id": "job_1_1"})
    assert status == 404 and "no job job_1_1" in body["error"]

    # abort undoes a job that was never committed
    second = str(tmp_path / "out2")
    await anyio.Path(second).mkdir()
    other, _ = await run_tasks(store, second, tasks=1, files_per_task=3)
    status, _ = await call(
        http,
        "POST",
        f"{base}/jobs",
        {"dest": second, "job_id": other, "options": {"write_success": "false"}},
    )
    assert status == 202
    await wait_done(http, f"{base}/jobs/{other}")
    status, body = await call(http, "POST", f"{base}/jobs/{other}/abort")
    assert status == 200 and body["state"] == "aborted"
    assert not (tmp_path / "out2" / "_temporary").exists()
    await store.aclose()
    assert process.poll() is None  # still serving
