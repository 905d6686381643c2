"""Issue 37: what the docs promise a person at the terminal, through the real
``aiocommit`` process (help texts and a usage error in this process: click renders the
same text)."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from aiocommit.cli.summary import COMMITTER_NAMES
from aiocommit.stores.local import LocalStore
from tests.cli.conftest import Cli, Dest
from tests.cli.test_subprocess import aiocommit
from tests.helpers import run_tasks


def one_error_line(stderr: str) -> str:
    """The only line of ``stderr``: an ``aiocommit: error:`` line (no traceback)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("aiocommit: error: "), stderr
    return lines[0]


@pytest.mark.parametrize("dest", ["./demo-out", "rel-out", "memory://x/y"])
def test_demo_into_a_relative_path_or_any_store(tmp_path: Path, dest: str) -> None:
    result = aiocommit("demo", dest, "--tasks", "2", "--files-per-task", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "files committed:  6" in result.stdout
    if "://" not in dest:
        assert (tmp_path / dest / "_SUCCESS").is_file()
    else:
        assert f"into {dest} in " in result.stdout


@pytest.mark.parametrize("tasks", ["0", "-1"])
def test_demo_refuses_no_tasks(cli: Cli, tmp_path: Path, tasks: str) -> None:
    result = cli("demo", str(tmp_path / "out"), "--tasks", tasks)
    assert result.exit_code == 2
    assert "--tasks" in one_error_line(result.stderr)
    assert not (tmp_path / "out").exists()


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    for args in (("nope",), ("commit", str(tmp_path)), ("show", "x", "--files", "-2")):
        result = aiocommit(*args)
        assert result.returncode == 2, args
        assert "--help" in one_error_line(result.stderr)
        if args[0] == "commit":
            assert "Missing option '--job-id'" in result.stderr


def test_help_lists_the_stress_command_once_by_package() -> None:
    result = aiocommit("--help")
    line = next(ln for ln in result.stdout.splitlines() if ln.strip().startswith("stress"))
    assert "aiocommit_stress.cli:main" not in line and "[stress]" not in line
    assert "aiocommit-stress" in line
    assert "s3://" in result.stdout  # every store's URL form is listed


def test_committer_is_no_flag(cli: Cli) -> None:
    # the committer is chosen when a job is set up, which no command does
    for command in ("commit", "abort", "cleanup", "jobs"):
        shown = cli(command, "--help")
        assert shown.exit_code == 0 and "Usage:" in shown.stdout, command
        assert "--committer" not in shown.stdout, command


def test_verbose_after_the_command(local: Dest) -> None:
    job_id, _ = local.job(tasks=1, files=2)
    result = aiocommit("commit", local.path, "--job-id", job_id, "-v")
    assert result.returncode == 0, result.stderr
    assert "job commit ok" in result.stderr  # the INFO line per job


def test_abort_and_cleanup_draw_no_bar_into_a_file(local: Dest) -> None:
    job_id, _ = local.job(tasks=2, files=3)
    aborted = aiocommit("abort", local.path, "--job-id", job_id)
    assert aborted.returncode == 0, aborted.stderr
    assert aborted.stderr == ""
    other, _ = local.job(tasks=2, files=3)
    cleaned = aiocommit("cleanup", local.path, "--job-id", other, "--no-progress")
    assert cleaned.returncode == 0, cleaned.stderr
    assert cleaned.stderr == ""


def test_show_lists_every_file_with_minus_one(local: Dest) -> None:
    job_id, _ = local.job(tasks=4, files=5)
    assert aiocommit("commit", local.path, "--job-id", job_id).returncode == 0
    shown = aiocommit("show", local.path, "--files", "-1")
    assert shown.returncode == 0, shown.stderr
    assert "more (--json" not in shown.stdout
    assert shown.stdout.count("part-") >= 20
    committer = next(ln for ln in shown.stdout.splitlines() if ln.startswith("committer"))
    assert committer.split()[1] == "manifest" and "ManifestCommitter" in committer
    assert "manifest" in COMMITTER_NAMES.values()


def test_commit_summary_rates_name_their_unit(local: Dest) -> None:
    job_id, _ = local.job(tasks=2, files=3)
    result = aiocommit("commit", local.path, "--job-id", job_id)
    assert result.returncode == 0, result.stderr
    assert " files/s, " in result.stdout and "/s files" not in result.stdout
    assert result.stderr == ""  # stderr is a pipe: no progress bar lines
    assert json.loads(aiocommit("show", local.path, "--json").stdout)["committer_name"] == (
        "manifest"
    )


@pytest.mark.parametrize("report_dir", ["bogus://x", "gs://", "{file}/reports"])
def test_a_bad_report_dir_is_refused_before_the_commit(local: Dest, report_dir: str) -> None:
    job_id, _ = local.job(tasks=1, files=2)
    a_file = Path(local.path).parent / "a-file"
    a_file.write_text("x")
    result = aiocommit(
        "commit", local.path, "--job-id", job_id, "--report-dir", report_dir.format(file=a_file)
    )
    assert result.returncode == 2, result.stderr
    assert "report_dir" in one_error_line(result.stderr)
    assert not local.exists("_SUCCESS")  # refused before anything was committed


def test_report_dir_checked_when_the_options_are_built(tmp_path: Path) -> None:
    from aiocommit import CommitOptions
    from aiocommit.errors import InvalidInput

    (tmp_path / "f").write_text("x")
    for bad in ("bogus://x", "gs://", str(tmp_path / "f" / "reports")):
        with pytest.raises(InvalidInput, match="report_dir"):
            CommitOptions(report_dir=bad)
        with pytest.raises(InvalidInput, match="diagnostics_dir"):
            CommitOptions(diagnostics_dir=bad)
    assert CommitOptions(report_dir=str(tmp_path / "new" / "dir")).report_dir
    assert CommitOptions(report_dir="memory://reports/x").report_dir


def _popen(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aiocommit", *args],
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        stderr=subprocess.PIPE,
    )


def _renamed(root: Path) -> int:
    return sum(1 for p in root.rglob("*.dat") if "_temporary" not in p.parts)


def _interrupted_commit(root: Path, sent: signal.Signals) -> tuple[str, int, str]:
    """A commit of 400 files at 60 store calls a second, sent ``sent`` once 70 files are in
    place; returns (job ID, exit code, stderr)."""
    root.mkdir()
    job_id, _ = anyio.run(lambda: run_tasks(LocalStore(), str(root), 4, 100))
    process = _popen(
        "-v", "commit", str(root), "--job-id", job_id, "--processes", "1", "--rate-limit", "60"
    )
    deadline = time.monotonic() + 60
    while _renamed(root) < 70 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert process.poll() is None, "the commit finished before it could be interrupted"
    process.send_signal(sent)
    _, stderr = process.communicate(timeout=60)
    return job_id, process.returncode, stderr


@pytest.mark.slow  # a rate-limited commit in a process, interrupted, then tidied
@pytest.mark.parametrize(
    ("sent", "code", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_interrupt_and_terminate_say_what_was_done(
    tmp_path: Path, sent: signal.Signals, code: int, word: str
) -> None:
    root = tmp_path / "out"
    job_id, returncode, stderr = _interrupted_commit(root, sent)
    assert returncode == code, stderr
    assert "Traceback" not in stderr and "cancel scope" not in stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("aiocommit: error:")]
    assert len(errors) == 1, stderr
    match = re.fullmatch(
        rf"aiocommit: error: {re.escape(word)} after renaming files: (\d+)/400 files", errors[0]
    )
    assert match and int(match[1]) >= 64, errors[0]
    assert f"aiocommit abort {root} --job-id {job_id}" in stderr
    # the job's INFO line counts the files renamed before the interruption, not 0
    job_line = next(ln for ln in stderr.splitlines() if "job commit failed" in ln)
    files = int(re.search(r" files=(\d+) ", job_line)[1])  # type: ignore[index]
    assert files >= 64, job_line
    assert "WARNING" not in stderr


@pytest.mark.slow  # an interrupted rate-limited commit, as above
def test_a_manifest_changed_since_the_commit_started_is_not_re_run(tmp_path: Path) -> None:
    root = tmp_path / "out"
    job_id, returncode, _ = _interrupted_commit(root, signal.SIGINT)
    assert returncode == 130
    manifest = next((root / "_temporary" / job_id / "00" / "manifests").glob("*.json"))
    manifest.write_text(json.dumps(json.loads(manifest.read_text()), indent=3))
    again = aiocommit("commit", str(root), "--job-id", job_id, "--no-progress")
    assert again.returncode == 1, again.stderr
    error, hint = again.stderr.strip().splitlines()
    assert "manifest changed since this job's commit started" in error
    assert hint.startswith("aiocommit: hint: this commit cannot be finished")
    assert "run the same command again" not in hint
    assert f"aiocommit abort {root} --job-id {job_id}" in hint


def _corrupt_a_manifest(local: Dest) -> str:
    job_id, _ = local.job(tasks=2, files=3)
    manifest = next(Path(local.path, "_temporary", job_id, "00", "manifests").glob("*.json"))
    manifest.write_bytes(b'{"type": "manifest", "trunc')
    return job_id


def test_a_corrupt_manifest_prints_once_with_a_true_hint(local: Dest) -> None:
    job_id = _corrupt_a_manifest(local)
    result = aiocommit("commit", local.path, "--job-id", job_id, "--no-progress")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr  # no WARNING record repeating the error
    assert lines[0].startswith("aiocommit: error: ")
    assert lines[1].startswith("aiocommit: hint: re-run the task that wrote that manifest")


def test_a_library_call_that_raises_logs_no_warning(
    local: Dest, caplog: pytest.LogCaptureFixture
) -> None:
    from aiocommit import commit_job
    from aiocommit.errors import ManifestError

    job_id = _corrupt_a_manifest(local)
    with caplog.at_level(logging.INFO, logger="aiocommit"), pytest.raises(ManifestError):
        anyio.run(lambda: commit_job(local.path, job_id, store=local.store))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    failed = [r for r in caplog.records if "job commit failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].error.startswith("ManifestError: ")  # type: ignore[attr-defined]
    assert str(ManifestError) not in failed[0].getMessage()


def test_local_store_takes_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aiocommit import commit_job

    monkeypatch.chdir(tmp_path)
    store = LocalStore()
    job_id, _ = anyio.run(lambda: run_tasks(store, "rel/out", 2, 2))
    summary = anyio.run(lambda: commit_job("rel/out", job_id, store=store))
    assert summary.success
    assert (tmp_path / "rel" / "out" / "_SUCCESS").is_file()
    assert store.unqualify("rel/out") == str(tmp_path / "rel" / "out")
    with pytest.raises(Exception, match="not a local file URI"):
        store.unqualify("memory://x/y")


def test_the_command_line_renames_on_every_core_by_default(cli: Cli) -> None:
    """The command line keeps its documented default, ``processes=0`` (every core), where
    the library's is 1."""
    result = cli("commit", "--help")
    assert result.exit_code == 0
    help_text = " ".join(result.stdout.split())
    assert re.search(r"--processes INT [^[]*\[default: 0\]", help_text), help_text


@pytest.mark.slow  # 20,000 files: enough for two rename processes
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="every core is one core here")
def test_a_large_command_line_commit_uses_worker_processes(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    job_id, _ = anyio.run(lambda: run_tasks(LocalStore(), str(root), 2, 10_000))
    result = aiocommit("-v", "commit", str(root), "--job-id", job_id, "--no-progress")
    assert result.returncode == 0, result.stderr
    job_line = next(ln for ln in result.stderr.splitlines() if "job commit ok" in ln)
    assert " processes=2 " in job_line, job_line
