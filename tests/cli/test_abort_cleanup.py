"""``aiocommit abort`` and ``aiocommit cleanup``."""

from __future__ import annotations

import json

import anyio
import pytest

from aiocommit import CommitError, CommitOptions, commit_job
from aiocommit.cli.exits import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_USAGE
from aiocommit.cli.units import parse_duration
from aiocommit.committers.common.lease import LEASE_NAME
from aiocommit.stores.faulty import Faults, FaultyStore
from tests.cli.conftest import Cli, Dest, one_error_line


def _half_commit(cli: Cli, dest: Dest) -> str:
    """A job (beside an older file) whose commit renamed some files and then failed on
    one that could not be renamed."""
    job_id, _ = dest.job(tasks=2, files=3)
    dest.write("part=2/old.dat", b"older output")
    failing = FaultyStore(
        dest.store,
        Faults(fail_paths=lambda op, path: op == "rename" and path.endswith("part-00001-0002.dat")),
    )
    options = CommitOptions(max_attempts=1, concurrency=1)
    with pytest.raises(CommitError):
        anyio.run(lambda: commit_job(dest.path, job_id, store=failing, options=options))
    return job_id


def test_abort_undoes_renames(cli: Cli, dest: Dest) -> None:
    job_id = _half_commit(cli, dest)
    assert len(dest.output()) > 1  # some of the job's files are visible
    result = cli("abort", dest.url, "--job-id", job_id)
    assert result.exit_code == 0, result.output
    assert f"job {job_id} aborted" in result.stdout
    assert dest.output() == {"part=2/old.dat": b"older output"}
    assert not dest.exists(f"_temporary/{job_id}")
    # case 5 of #12: a finished abort's re-run succeeds, and says there was nothing left
    again = cli("abort", dest.url, "--job-id", job_id)
    assert again.exit_code == 0, again.output
    assert "nothing to abort" in again.stdout
    assert dest.output() == {"part=2/old.dat": b"older output"}


def test_abort_keep_renames(cli: Cli, dest: Dest) -> None:
    job_id = _half_commit(cli, dest)
    # the half commit left its lease abandoned; the abort removes it, keeps the renames
    visible = {k: v for k, v in dest.output().items() if k != LEASE_NAME}
    result = cli("abort", dest.url, "--job-id", job_id, "--keep-renames")
    assert result.exit_code == 0, result.output
    assert dest.output() == visible
    assert not dest.exists(f"_temporary/{job_id}")


def test_abort_of_a_committed_job_only_cleans_up(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=1, files=2)
    dest.commit(job_id, cleanup_skip=True)
    result = cli("abort", dest.url, "--job-id", job_id)
    assert result.exit_code == 0, result.output
    assert "was committed; cleaned up" in result.stdout
    assert len(dest.output()) == 2
    assert dest.exists("_SUCCESS")


def test_abort_bad_arguments(cli: Cli, dest: Dest) -> None:
    assert cli("abort", dest.url).exit_code == EXIT_USAGE
    assert cli("abort", dest.url, "--job-id", "j", "--validate-output").exit_code == EXIT_USAGE
    missing = cli("abort", dest.url_at("missing"), "--job-id", "job_1_1")
    assert missing.exit_code == EXIT_NOT_FOUND


def test_cleanup_one_job(cli: Cli, dest: Dest) -> None:
    first, _ = dest.job(tasks=1, files=1)
    second, _ = dest.job(tasks=1, files=1)
    result = cli("cleanup", dest.url, "--job-id", first)
    assert result.exit_code == 0, result.output
    assert f"removed {dest.store.qualify(dest.at('_temporary/' + first))}" in result.stdout
    assert not dest.exists(f"_temporary/{first}")
    assert dest.exists(f"_temporary/{second}")
    assert dest.output() == {}
    missing = cli("cleanup", dest.url, "--job-id", first)
    assert missing.exit_code == 0  # as abort: idempotent
    assert f"job {first}: nothing to clean up" in missing.stdout
    assert cli("abort", dest.url, "--job-id", first).exit_code == 0


def test_cleanup_older_than(cli: Cli, dest: Dest) -> None:
    old, _ = dest.job(tasks=1, files=1, job_id="job_202001010000_0001")
    new, _ = dest.job(tasks=1, files=1)
    dry = cli("cleanup", dest.url, "--older-than", "1d", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would remove" in dry.stdout and old in dry.stdout
    assert dest.exists(f"_temporary/{old}")
    result = cli("cleanup", dest.url, "--older-than", "1d")
    assert result.exit_code == 0, result.output
    assert f"kept {dest.store.qualify(dest.at('_temporary/' + new))}" in result.stdout
    assert not dest.exists(f"_temporary/{old}")
    assert dest.exists(f"_temporary/{new}")
    jobs = json.loads(cli("jobs", dest.url, "--json").stdout)
    assert [job["job_id"] for job in jobs] == [new]


def test_cleanup_all(cli: Cli, dest: Dest) -> None:
    old, _ = dest.job(tasks=1, files=1, job_id="job_202001010000_0001")
    first, _ = dest.job(tasks=1, files=1)
    second, _ = dest.job(tasks=1, files=1)
    # set up a moment ago: their tasks may still be writing
    kept = cli("cleanup", dest.url, "--all")
    assert kept.exit_code == 0, kept.output
    assert kept.stdout.count("removed ") == 1 and old in kept.stdout
    assert kept.stdout.count("kept ") == 2 and "--min-age 0 or --force" in kept.stdout
    assert dest.exists(f"_temporary/{first}") and dest.exists(f"_temporary/{second}")
    assert cli("cleanup", dest.url, "--all", "--min-age", "1h").stdout.count("kept ") == 2
    result = cli("cleanup", dest.url, "--all", "--min-age", "0s")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("removed ") == 2
    assert not dest.exists("_temporary")
    assert "no jobs under" in cli("cleanup", dest.url, "--all").stdout


def test_cleanup_all_removes_finished_jobs_of_any_age(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=1, files=1)
    assert cli("commit", dest.url, "--job-id", job_id, "--cleanup-skip").exit_code == 0
    result = cli("cleanup", dest.url, "--all")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("removed ") == 1
    assert not dest.exists(f"_temporary/{job_id}")


def test_cleanup_refuses_an_unfinished_commit(cli: Cli, dest: Dest) -> None:
    job_id = _half_commit(cli, dest)
    result = cli("cleanup", dest.url, "--all")
    assert result.exit_code == EXIT_FAILED
    assert "its commit started and did not finish" in one_error_line(result)
    assert dest.exists(f"_temporary/{job_id}")
    forced = cli("cleanup", dest.url, "--all", "--force")
    assert forced.exit_code == 0, forced.output
    assert not dest.exists(f"_temporary/{job_id}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give --job-id, --older-than DURATION or --all"),
        (["--all", "--job-id", "job_1_1"], "exclude each other"),
        (["--older-than", "3 fortnights"], "not a duration"),
        (["--job-id", "../x"], "invalid job ID"),
        (["--all", "--option", "nope=1"], "unknown option"),
    ],
)
def test_cleanup_bad_arguments(cli: Cli, dest: Dest, args: list[str], message: str) -> None:
    result = cli("cleanup", dest.url, *args)
    assert result.exit_code == EXIT_USAGE, result.output
    assert message in result.stderr


def test_cleanup_missing_destination(cli: Cli, dest: Dest) -> None:
    result = cli("cleanup", dest.url_at("missing"), "--all")
    assert result.exit_code == EXIT_NOT_FOUND


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("2h", 7200), ("3d", 259200), ("1w", 604800), ("1h30m", 5400)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "3", "h", "2x", "1h 30", "-1h"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_abort_of_a_committed_job_after_another_job_replaced_success(cli: Cli, dest: Dest) -> None:
    """Case 1 of #12 through the CLI: `jobs` reads the durable record, so the first job
    is still "committed" once a later job replaced _SUCCESS, and abort keeps its output."""
    first, _ = dest.job(tasks=2, files=3)
    dest.commit(first, cleanup_skip=True)
    committed = dest.output()
    second, _ = dest.job(tasks=1, files=2, job_id="job_202001020304_0009")
    dest.commit(second, delete_target_files=True)
    assert f'"jobId" : "{second}"' in dest.read("_SUCCESS").decode().replace('": "', '" : "')
    jobs = {
        job["job_id"]: job["state"] for job in json.loads(cli("jobs", dest.url, "--json").stdout)
    }
    assert jobs == {first: "committed"}
    result = cli("abort", dest.url, "--job-id", first)
    assert result.exit_code == 0, result.output
    assert "was committed; cleaned up" in result.stdout
    assert set(dest.output()) == set(committed)
    assert cli("cleanup", dest.url, "--all").exit_code == 0


def test_cleanup_uploads_needs_a_store_with_uploads(cli: Cli, local: Dest) -> None:
    local.job(tasks=1, files=1)
    result = cli("cleanup", local.url, "--uploads", "--older-than", "1d")
    assert result.exit_code == EXIT_USAGE
    assert "no multipart uploads" in result.output
