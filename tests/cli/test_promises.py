"""Issue 37: what the docs promise a person at the terminal, through the real
``aiocommit`` process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiocommit.cli.summary import COMMITTER_NAMES
from tests.cli.conftest import Dest
from tests.cli.test_subprocess import aiocommit


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
def test_demo_refuses_no_tasks(tmp_path: Path, tasks: str) -> None:
    result = aiocommit("demo", "out", "--tasks", tasks, cwd=tmp_path)
    assert result.returncode == 2
    assert "--tasks" in one_error_line(result.stderr)
    assert not (tmp_path / "out").exists()


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    for args in (("nope",), ("commit", str(tmp_path)), ("show", "x", "--files", "-2")):
        result = aiocommit(*args)
        assert result.returncode == 2, args
        assert "--help" in one_error_line(result.stderr)


def test_help_lists_the_stress_command_once_by_package() -> None:
    result = aiocommit("--help")
    line = next(ln for ln in result.stdout.splitlines() if ln.strip().startswith("stress"))
    assert "aiocommit_stress.cli:main" not in line and "[stress]" not in line
    assert "aiocommit-stress" in line
    assert "s3://" in result.stdout  # every store's URL form is listed


def test_committer_is_no_flag() -> None:
    # the committer is chosen when a job is set up, which no command does
    for command in ("commit", "abort", "cleanup", "jobs"):
        assert "--committer" not in aiocommit(command, "--help").stdout, command


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
