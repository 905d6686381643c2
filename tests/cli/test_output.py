"""Output people read: stage labels, counts and rates in bars for every stage that takes
time, a short commit summary (the full table with -v), the job's log line at -v, the
Ctrl-C hint, show's figures, help defaults that match, and exit codes."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from aiocommit import Progress, abort_job, commit_job
from aiocommit.cli.progress import ProgressBar, count_text, rate_text, stage_label
from aiocommit.cli.units import human_bytes
from aiocommit.protocol import statistics as S
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from tests.cli.conftest import Cli, Dest
from tests.helpers import run_tasks


def test_bar_labels_counts_and_rates() -> None:
    assert stage_label(S.JOB_STAGE_RENAME_FILES) == "renaming files"
    assert stage_label(S.JOB_STAGE_LOAD_MANIFESTS) == "loading manifests"
    assert stage_label("job_stage_something_new") == "something new"
    assert count_text(5721, 20000, "files") == "5,721/20,000 files"
    assert rate_text(12000, 2.0, "files", 3 * 2**20) == "6,000 files/s  1.5 MiB/s"
    assert count_text(10, 10, "files", 1000, 1000) == "10/10 files, 1000 B/1000 B"
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=160)
    with ProgressBar(console) as bar:
        bar(Progress(S.JOB_STAGE_LOAD_MANIFESTS, 12, 40, unit="manifests"))
        bar(Progress(S.JOB_STAGE_RENAME_FILES, 5721, 20000, 2**20, 2**22))
        bar(Progress(S.JOB_STAGE_CLEANUP, 3, 9, unit="directories"))
    text = stream.getvalue()
    for shown in (
        "loading manifests",
        "12/40 manifests",
        "renaming files",
        "5,721/20,000 files",
        "files/s",
        "cleaning up",
        "3/9 directories",
    ):
        assert shown in text, shown
    assert "job_stage_" not in text
    assert bar.stages == [
        S.JOB_STAGE_LOAD_MANIFESTS,
        S.JOB_STAGE_RENAME_FILES,
        S.JOB_STAGE_CLEANUP,
    ]


async def test_every_slow_stage_reports_progress() -> None:
    store = MemoryStore("cli-output-progress")
    job_id, expected = await run_tasks(store, "/out", tasks=5, files_per_task=4)
    events: list[Progress] = []
    await commit_job("/out", job_id, store=store, progress=events.append)
    last = {(e.stage, e.unit): e for e in events}
    loading = last[(S.JOB_STAGE_LOAD_MANIFESTS, "manifests")]
    assert loading.done == loading.total == 5 and loading.fraction == 1.0
    # manifests are not files, and loading moves no file data
    assert loading.files_done == loading.files_total == 0
    assert loading.bytes_done == loading.bytes_total == 0
    renaming = last[(S.JOB_STAGE_RENAME_FILES, "files")]
    assert renaming.files_done == renaming.done == len(expected)
    assert renaming.bytes_done == renaming.bytes_total == sum(map(len, expected.values()))
    cleanup = last[(S.JOB_STAGE_CLEANUP, "directories")]
    assert cleanup.done == cleanup.total == 6  # 5 attempt dirs and the job's
    # no event anywhere has bytes done without their total (a fraction would divide by 0)
    assert all(e.bytes_total or not e.bytes_done for e in events)

    other, _ = await run_tasks(store, "/out2", tasks=2, files_per_task=3)
    aborted: list[Progress] = []
    await abort_job("/out2", other, store=store, progress=aborted.append)
    assert aborted and aborted[-1].stage == S.JOB_STAGE_ABORT
    assert aborted[-1].files_done == aborted[-1].files_total
    assert Progress(S.JOB_STAGE_RENAME_FILES).fraction is None


def test_progress_refuses_bytes_without_a_total() -> None:
    with pytest.raises(ValueError, match="bytes_done without bytes_total"):
        Progress(S.JOB_STAGE_LOAD_MANIFESTS, 1, 2, bytes_done=6, unit="manifests")


def test_commit_prints_a_short_summary_headline_last(cli: Cli, dest: Dest) -> None:
    # enough files that the rename stage takes a millisecond or more on any store: the
    # brief lists only the stages that took any time (12 renames on the memory store
    # could take under 1 ms, and the line left them out)
    job_id, size = dest.job(tasks=20, files=50)
    result = cli("commit", dest.url, "--job-id", job_id, "--no-progress")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) <= 5, result.stdout
    assert lines[-1].startswith(f"job {job_id} committed in ")
    assert f"1,000 files, {human_bytes(size)} from 20 tasks" in result.stdout
    assert "renaming files" in result.stdout
    assert "job_stage_" not in result.stdout


def test_verbose_commit_prints_the_table_and_the_job_line(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=2, files=3)
    result = cli("-v", "commit", dest.url, "--job-id", job_id, "--no-progress")
    assert result.exit_code == 0, result.output
    assert "IOStatistics" in result.stdout and "stages (ms)" in result.stdout
    job_lines = [line for line in result.stderr.splitlines() if "job commit ok" in line]
    assert len(job_lines) == 1, result.stderr
    for field in ("files=6", "tasks=2", "bytes=", "seconds=", "retries=0", "throttled=0"):
        assert field in job_lines[0], field


def test_show_has_commit_time_and_gauges(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=2, files=3)
    assert cli("commit", dest.url, "--job-id", job_id, "--processes", "1").exit_code == 0
    shown = cli("show", dest.url).stdout
    assert "commit time" in shown and " s\n" in shown.split("commit time", 1)[1]
    assert "cleanup" in shown and "summary report" in shown
    assert re.search(r"rename processes +1\n", shown), shown
    assert "peak in flight       " in shown and "store calls at once (concurrency limit " in shown


def test_help_defaults_match_what_the_command_uses(cli: Cli) -> None:
    text = " ".join(cli("commit", "--help").stdout.split())
    processes = text.split("--processes INT ", 1)[1]
    assert "[default: 0]" in processes.split("--", 1)[0]


def _aiocommit(
    *args: str, stdout: int | None = None, stderr: int | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aiocommit", *args],
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        stdout=stdout,
        stderr=stderr,
    )


@pytest.mark.slow
def test_show_cut_short_by_its_reader_exits_0(cli: Cli, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    assert cli("demo", str(dest), "--tasks", "2", "--files-per-task", "5").exit_code == 0
    for args in (["show", str(dest)], ["show", str(dest), "--json"]):
        process = _aiocommit(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader went away (`| head` after its lines)
        assert process.wait(timeout=60) == 0, process.stderr.read()
        process.stderr.close()


@pytest.mark.slow
def test_ctrl_c_says_how_to_finish_or_undo(tmp_path: Path) -> None:
    """SIGINT while renaming: exit 130 and a hint; the same command then finishes."""
    root = tmp_path / "out"
    root.mkdir()
    job_id, expected = anyio.run(lambda: run_tasks(LocalStore(), str(root), 4, 100))
    args = ["commit", str(root), "--job-id", job_id, "--no-progress", "--processes", "1"]
    # 20 store calls a second: 400 renames take 20 s, time enough to interrupt even when
    # this process is starved on a loaded machine (at 8 s it once saw the plan only after
    # the commit had finished); an interrupted run ends at once, so this costs nothing
    process = _aiocommit(*args, "--rate-limit", "20", stderr=subprocess.PIPE)
    plan = root / "_temporary" / job_id / "00" / "commit-plan.json"
    deadline = time.monotonic() + 60
    while not plan.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert plan.exists()
    assert process.poll() is None, "the commit finished before it could be interrupted"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "aiocommit: error: interrupted" in stderr
    assert "re-run the same command to finish the commit" in stderr
    assert f"aiocommit abort {root} --job-id {job_id}" in stderr
    assert "Traceback" not in stderr
    finish = _aiocommit(*args)
    assert finish.wait(timeout=120) == 0
    assert (root / "_SUCCESS").exists()
    assert all((root / name).read_bytes() == data for name, data in expected.items())


def test_option_values_are_checked_before_anything_runs(cli: Cli, dest: Dest) -> None:
    job_id, _ = dest.job(tasks=1, files=2)
    for args, words in (
        (["--retry-base-delay", "-1"], "retry_base_delay) must be >= 0"),
        (
            ["--min-concurrency", "5000"],
            "min_concurrency (5000) must not exceed limits.concurrency",
        ),
        (["--option", "retry_budget_seconds=-1"], "retry_budget_seconds) must be >= 0"),
        (["--option", "validate_output=yes please"], "not a boolean"),
    ):
        result = cli("commit", dest.url, "--job-id", job_id, *args)
        assert result.exit_code == 2, (args, result.output)
        assert words in result.stderr, (args, result.stderr)
    assert not dest.exists("_SUCCESS")


def test_demo_counts_files_renamed_not_store_renames(cli: Cli, tmp_path: Path) -> None:
    result = cli("demo", str(tmp_path / "out"), "--tasks", "2", "--files-per-task", "50")
    assert result.exit_code == 0, result.output
    assert "files renamed:    100 (and " in result.stdout
