"""The installed ``aiocommit`` console script, run as a separate process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import HADOOP_SUCCESS, Dest

SCRIPT = Path(sys.executable).parent / "aiocommit"


def aiocommit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    executable = str(SCRIPT) if SCRIPT.exists() else shutil.which("aiocommit")
    if executable is None:
        pytest.skip("the aiocommit console script is not installed")  # pragma: no cover
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("AIOCOMMIT_LOG_LEVEL", None)
    return subprocess.run(
        [executable, *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd
    )


def test_help_and_version() -> None:
    result = aiocommit("--help")
    assert result.returncode == 0
    for command in ("demo", "show", "jobs", "commit", "abort", "cleanup", "stress"):
        assert command in result.stdout
    assert "Exit codes" in result.stdout
    version = aiocommit("--version")
    assert version.returncode == 0 and "version" in version.stdout


def test_show_json() -> None:
    result = aiocommit("show", str(HADOOP_SUCCESS), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"] == 12


def test_jobs_commit_show(local: Dest) -> None:
    job_id, _ = local.job(tasks=2, files=3)
    listed = aiocommit("jobs", "file://" + local.path, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [job["job_id"] for job in json.loads(listed.stdout)] == [job_id]
    committed = aiocommit("-vv", "commit", local.path, "--job-id", job_id)
    assert committed.returncode == 0, committed.stderr
    assert f"job {job_id} committed in" in committed.stdout
    # -vv: DEBUG records on stderr, each naming the job
    assert f"[job={job_id} " in committed.stderr
    assert len(local.output()) == 6
    shown = aiocommit("show", local.path)
    assert shown.returncode == 0 and f"_SUCCESS of job {job_id}" in shown.stdout


def test_errors(tmp_path: Path) -> None:
    missing = aiocommit("show", str(tmp_path / "nothing"))
    assert missing.returncode == 3
    assert missing.stderr.strip().splitlines() == [
        f"aiocommit: error: {tmp_path / 'nothing'}: no such file or directory"
    ]
    # usage errors (exit 2, one line): test_promises.test_usage_errors_are_one_line


def test_stress_outside_a_checkout(tmp_path: Path) -> None:
    # the harness is part of the package: it runs from any directory
    result = aiocommit("stress", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Usage: aiocommit stress" in result.stdout


def test_demo(tmp_path: Path) -> None:
    result = aiocommit("demo", str(tmp_path / "demo"), "--tasks", "2", "--files-per-task", "3")
    assert result.returncode == 0, result.stderr
    assert "committed job job_" in result.stdout
    assert "files committed:  6" in result.stdout
    assert (tmp_path / "demo" / "_SUCCESS").is_file()
