"""``aiocommit commit``: finish a job from the manifests in place, from a shell."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from aiocommit import commit_task, setup_job
from aiocommit.cli.exits import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_USAGE
from aiocommit.cli.flags import NOT_FLAGS
from aiocommit.cli.progress import ProgressBar
from aiocommit.committers.common.context import Progress
from aiocommit.options import CommitOptions
from aiocommit.protocol.success import decode_success
from tests.cli.conftest import Cli, Dest, one_error_line
from tests.helpers import MANIFEST, write_task


def test_commit(cli: Cli, dest: Dest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # stderr taken for a terminal: a bar
    job_id, size = dest.job(tasks=3, files=4)
    result = cli("-v", "commit", dest.url, "--job-id", job_id)
    assert result.exit_code == 0, result.output
    assert f"job {job_id} committed in" in result.stdout
    assert f"_SUCCESS of job {job_id}" in result.stdout  # -v: the full summary
    assert "job_stage_rename_files" in result.stdout
    assert "renaming files" in result.stderr  # the progress bar
    assert "12/12 files" in result.stderr
    assert len(dest.output()) == 12
    assert not dest.exists("_temporary")
    success = decode_success(dest.read("_SUCCESS"))
    assert success.job_id == job_id and success.success
    assert success.iostatistics.counters["committer_bytes_committed"] == size


def test_rerun_is_recognised(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=1, files=2)
    assert cli("commit", dest.url, "--job-id", job_id, "--no-progress").exit_code == 0
    result = cli("commit", dest.url, "--job-id", job_id, "--no-progress")
    assert result.exit_code == 0, result.output
    assert f"job {job_id} was already committed" in result.stdout
    data = json.loads(cli("commit", dest.url, "--job-id", job_id, "--json").stdout)
    assert data["already_committed"] is True
    assert data["files"] == 2


def test_json_summary(cli: Cli, dest: Dest) -> None:
    job_id, size = dest.job(tasks=2, files=2)
    result = cli("commit", dest.url, "--job-id", job_id, "--json", "--no-progress")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["kind"], data["job_id"], data["files"], data["bytes"]) == (
        "success",
        job_id,
        4,
        size,
    )
    assert data["already_committed"] is False
    assert data["seconds"] >= 0
    assert result.stderr == ""


def test_options_flags_and_hadoop_names(cli: Cli, dest: Dest, tmp_path: Path) -> None:
    job_id, _ = dest.job(tasks=2, files=2)
    reports = tmp_path / "reports"
    result = cli(
        "commit",
        dest.url,
        "--job-id",
        job_id,
        "--no-progress",
        "--validate-output",
        "--cleanup-skip",
        "--concurrency",
        "5",
        "-o",
        "concurrency=7",  # the flag wins
        "--option",
        f"mapreduce.manifest.committer.summary.report.directory={reports}",
        "--option",
        "spark.hadoop.mapreduce.manifest.committer.delete.target.files=true",
        "--option",
        "aiocommit.max-attempts=3",
    )
    assert result.exit_code == 0, result.output
    success = decode_success(dest.read("_SUCCESS"))
    assert success.diagnostics["mapreduce.manifest.committer.io.threads"] == "5"
    assert success.diagnostics["mapreduce.manifest.committer.validate.output"] == "true"
    assert success.diagnostics["mapreduce.manifest.committer.delete.target.files"] == "true"
    assert success.iostatistics.counters["job_stage_optional_validate_output"] == 1
    assert (reports / f"summary-{job_id}.json").is_file()
    assert dest.exists(f"_temporary/{job_id}")  # cleanup skipped


def test_failure_then_fix(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=1, files=2)
    dest.write("part=0/part-00000-0000.dat", b"an older job's file")
    result = cli("commit", dest.url, "--job-id", job_id, "--no-progress")
    assert result.exit_code == EXIT_FAILED
    line = one_error_line(result)
    # refused by the check before anything changed, the way out named as a flag
    assert "stage=job_stage_resolve_conflicts" in line
    assert "part=0/part-00000-0000.dat" in line
    assert "--delete-target-files" in line and "delete_target_files" not in line
    assert "--conflict-mode replace" in line
    assert "aiocommit: hint:" in result.stderr
    assert not dest.exists("_SUCCESS")
    jobs = json.loads(cli("jobs", dest.url, "--json").stdout)
    assert [job["state"] for job in jobs] == ["refused"]
    fixed = cli("commit", dest.url, "--job-id", job_id, "--no-progress", "--delete-target-files")
    assert fixed.exit_code == 0, fixed.output
    assert dest.read("part=0/part-00000-0000.dat") == b"task 0 n0"


def test_chosen_manifests(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=3, files=1)
    manifest = f"task_{job_id[4:]}_m_000001-manifest.json"
    result = cli("commit", dest.url, "--job-id", job_id, "--manifest", manifest, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["files"] == 1
    assert list(dest.output()) == ["part=0/part-00001-0000.dat"]


def test_unknown_job(cli: Cli, dest: Dest) -> None:
    result = cli("commit", dest.url, "--job-id", "job_202001010000_0001")
    assert result.exit_code == EXIT_NOT_FOUND
    assert "_temporary/job_202001010000_0001/00: no such job attempt" in one_error_line(result)
    job_id, _ = dest.job(tasks=1, files=1)
    result = cli("commit", dest.url, "--job-id", job_id, "--attempt", "1")
    assert result.exit_code == EXIT_NOT_FOUND


def test_a_committed_job_whose_success_a_later_job_replaced(cli: Cli, dest: Dest) -> None:
    """Two jobs append into one destination and each commits; the first one's re-run
    finds no job attempt and another job's _SUCCESS: the error says it may be done
    and must not run again (an append would write its files twice), not to run it."""
    for job_id in ("job_202001010000_0001", "job_202001010000_0002"):
        anyio.run(_one_task_job, dest, job_id)
        dest.commit(job_id, conflict_mode="append")
    result = cli("commit", dest.url, "--job-id", "job_202001010000_0001", "--no-progress")
    assert result.exit_code == EXIT_NOT_FOUND
    line = one_error_line(result)
    assert "no such job attempt" in line
    assert "_SUCCESS is job job_202001010000_0002's" in line
    assert "it is done and running it again would write its files twice" in line
    assert len(dest.output()) == 2  # nothing changed


async def _one_task_job(dest: Dest, job_id: str) -> None:
    await setup_job(dest.path, job_id, store=dest.store, options=MANIFEST)
    files = {f"{job_id}.dat": job_id.encode()}
    attempt = await write_task(dest.store, dest.path, job_id, 0, 0, files)
    await commit_task(attempt, store=dest.store)


def test_missing_destination(cli: Cli, dest: Dest) -> None:
    result = cli("commit", dest.url_at("missing"), "--job-id", "job_202001010000_0001")
    assert result.exit_code == EXIT_NOT_FOUND
    assert "missing: no such directory" in one_error_line(result)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Missing option '--job-id'"),
        (["--job-id", "a/b"], "invalid job ID"),
        (["--job-id", "j", "--concurrency", "0"], "concurrency must be >= 1"),
        (["--job-id", "j", "--concurrency", "many"], "'many' is not a valid integer"),
        (["--job-id", "j", "--option", "nope=1"], "unknown option"),
        (["--job-id", "j", "--option", "concurrency"], "expected KEY=VALUE"),
        (["--job-id", "j", "-o", "validate_output=maybe"], "not a boolean"),
        (["--job-id", "j", "--attempt", "-1"], "--attempt"),
        (["--job-id", "j", "--rate-limit", "-5"], "rate_limit must be positive"),
    ],
)
def test_bad_arguments(cli: Cli, dest: Dest, args: list[str], message: str) -> None:
    result = cli("commit", dest.url, *args)
    assert result.exit_code == EXIT_USAGE
    assert message in result.stderr


def test_progress_bar_draws_events() -> None:
    from io import StringIO

    from rich.console import Console

    stream = StringIO()
    console = Console(file=stream, width=120, force_terminal=True)
    with ProgressBar(console) as bar:
        bar(Progress("job_stage_rename_files", 5, 10, 500, 1000))
        bar(Progress("job_stage_rename_files", 10, 10, 1000, 1000))
    assert bar.events == 2
    assert "10/10" in stream.getvalue()
    assert "1000 B/1000 B" in stream.getvalue()
    quiet = StringIO()
    with ProgressBar(Console(file=quiet), enabled=False) as bar:
        bar(Progress("job_stage_rename_files", 1, 1))
    assert quiet.getvalue() == ""


def test_every_option_is_a_flag(cli: Cli) -> None:
    text = cli("commit", "--help").stdout
    for name, hadoop in CommitOptions.names().items():
        if name in NOT_FLAGS:
            continue
        assert "--" + name.replace("_", "-") in text
        if hadoop:
            assert hadoop in text.replace("\n", "").replace(" ", "")


def test_already_committed_draws_no_progress_bar(
    cli: Cli, dest: Dest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    job_id, _ = dest.job(tasks=2, files=3)
    first = cli("commit", dest.url, "--job-id", job_id)
    assert first.exit_code == 0, first.output
    assert "6/6" in first.stderr  # the bar of the commit that renamed
    again = cli("commit", dest.url, "--job-id", job_id)
    assert again.exit_code == 0, again.output
    assert f"job {job_id} was already committed" in again.stdout
    assert again.stderr == ""


def test_progress_bar_draws_nothing_without_reports() -> None:
    from io import StringIO

    from rich.console import Console

    stream = StringIO()
    with ProgressBar(Console(file=stream, width=120)) as bar:
        pass
    assert bar.events == 0 and stream.getvalue() == ""


def test_clean_commit_statistics_show_no_failures(cli: Cli, dest: Dest) -> None:
    """Probes that find nothing (no _SUCCESS, no commit plan, directories to create) are
    answers, not failures; reads are named by what they read."""
    job_id, _ = dest.job(tasks=2, files=3)
    data = json.loads(cli("commit", dest.url, "--job-id", job_id, "--json").stdout)
    rows = {row["name"]: row for row in data["statistics"]}
    assert {name: row["failures"] for name, row in rows.items() if row["failures"]} == {}
    assert rows["op_load_manifest"]["count"] == 2
    assert rows["op_load_success_marker"]["count"] == 1
    # before and in the lease: did a take-over finish this job's commit?
    assert rows["op_load_finished_record"]["count"] == 2
    assert rows["op_load_commit_plan"]["count"] == 1
    assert rows["op_get_file_status"]["count"] > 0


def test_an_option_hint_names_the_flag() -> None:
    """The CLI says an error's option hint as its flag; other ``x=y`` text stays."""
    from aiocommit.cli.exits import as_flags

    message = (
        "set delete_target_files=True to replace existing files, or "
        "conflict_mode='replace'; path='a=1/b'"
    )
    assert as_flags(message) == (
        "set --delete-target-files to replace existing files, or "
        "--conflict-mode replace; path='a=1/b'"
    )
