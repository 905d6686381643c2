"""``aiocommit jobs``: what is pending under DEST/_temporary."""

from __future__ import annotations

import calendar
import json
import time

import pytest

from aiocommit.cli.exits import EXIT_NOT_FOUND, EXIT_USAGE
from aiocommit.cli.units import human_duration
from aiocommit.client.jobs import job_started
from tests.cli.conftest import Cli, Dest, one_error_line


def test_lists_pending_jobs(cli: Cli, dest: Dest) -> None:
    first, first_size = dest.job(tasks=3, files=4)
    second, second_size = dest.job(tasks=1, files=2, job_id="job_202001020304_0007")
    result = cli("jobs", dest.url, "--json")
    assert result.exit_code == 0, result.output
    jobs = {job["job_id"]: job for job in json.loads(result.stdout)}
    assert set(jobs) == {first, second}
    assert jobs[first]["manifests"] == 3
    assert jobs[first]["files"] == 12
    assert jobs[first]["size"] == first_size
    assert jobs[first]["attempts"] == [0]
    assert jobs[first]["state"] == "set up"
    assert 0 <= jobs[first]["age_seconds"] < 3600
    assert jobs[second]["size"] == second_size
    assert jobs[second]["age_seconds"] > 5 * 365 * 86400
    # oldest first
    assert [job["job_id"] for job in json.loads(result.stdout)] == [second, first]
    table = cli("jobs", dest.url)
    assert table.exit_code == 0
    row = next(line for line in table.stdout.splitlines() if first in line)
    assert "set up" in row and " 3 " in row and "12" in row


def test_states(cli: Cli, dest: Dest) -> None:
    committed, _ = dest.job(tasks=1, files=2)
    dest.commit(committed, cleanup_skip=True)
    jobs = json.loads(cli("jobs", dest.url, "--json").stdout)
    assert [job["state"] for job in jobs] == ["committed"]
    cli("cleanup", dest.url, "--all")
    refused, _ = dest.job(tasks=1, files=2)  # the same file names: its commit conflicts
    assert cli("commit", dest.url, "--job-id", refused, "--no-progress").exit_code == 1
    jobs = json.loads(cli("jobs", dest.url, "--json").stdout)
    # refused before anything changed: not left committing (issue 33, behaviour 2)
    assert [(job["job_id"], job["state"]) for job in jobs] == [(refused, "refused")]
    assert cli("abort", dest.url, "--job-id", refused).exit_code == 0
    assert json.loads(cli("jobs", dest.url, "--json").stdout) == []


def test_no_jobs(cli: Cli, dest: Dest) -> None:
    result = cli("jobs", dest.url)
    assert result.exit_code == 0
    assert "no jobs under" in result.stdout
    assert json.loads(cli("jobs", dest.url, "--json").stdout) == []


def test_missing_destination(cli: Cli, dest: Dest) -> None:
    result = cli("jobs", dest.url_at("missing"))
    assert result.exit_code == EXIT_NOT_FOUND
    assert "missing: no such directory" in one_error_line(result)
    assert cli("jobs").exit_code == EXIT_USAGE


def test_unreadable_manifest_is_counted(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=2, files=1)
    dest.write(f"_temporary/{job_id}/00/manifests/task_x-manifest.json", b"{not json")
    dest.write(f"_temporary/{job_id}/00/manifests/attempt_y-manifest.json.tmp", b"")
    jobs = json.loads(cli("jobs", dest.url, "--json").stdout)
    assert jobs[0]["manifests"] == 3
    assert jobs[0]["bad_manifests"] == 1
    assert jobs[0]["manifests_in_progress"] == 1
    assert "(+1 saving) (1 unreadable)" in cli("jobs", dest.url).stdout


@pytest.mark.parametrize(
    ("job_id", "expected"),
    [
        ("job_20250102030405a1b2c3d4e5f6_0001", "2025-01-02 03:04:05"),
        ("job_202501020304_0001", "2025-01-02 03:04:00"),
        ("job_20250102101112_0003", "2025-01-02 10:11:12"),
        ("job_1700000000000_0001", "2023-11-14 22:13:20"),
    ],
)
def test_job_started(job_id: str, expected: str) -> None:
    started = job_started(job_id)
    assert started == calendar.timegm(time.strptime(expected, "%Y-%m-%d %H:%M:%S"))


@pytest.mark.parametrize(
    "job_id", ["3f1c2a9e-0000-4000-8000-00000000abcd", "job_x_1", "job_999999999999_1", "job_1_2"]
)
def test_job_started_unknown(job_id: str) -> None:
    assert job_started(job_id) is None


def test_human_duration() -> None:
    assert human_duration(None) == "-"
    assert human_duration(0) == "0s"
    assert human_duration(59) == "59s"
    assert human_duration(3600 + 120 + 5) == "1h 2m"
    assert human_duration(86400 * 3 + 7200) == "3d 2h"
