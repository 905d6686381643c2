"""Printing summaries and job lists for people (rich), and JSON for programs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from aiocommit.cli.progress import stage_label
from aiocommit.cli.units import human_bytes, human_duration
from aiocommit.client.jobs import JobInfo
from aiocommit.committers.s3a.inspect import S3JobFacts


def verbose() -> bool:
    """Whether the command runs with ``-v`` (or a ``--log-level`` of INFO or DEBUG)."""
    context = click.get_current_context(silent=True)
    if context is None:
        return False
    params = context.find_root().params
    level = str(params.get("log_level") or "").upper()
    return bool(params.get("verbose")) or level in ("INFO", "DEBUG")


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1; the command group ends a cut-short output with 0
        raise BrokenPipeError


def console_for(*, stderr: bool = False) -> Console:
    console = _Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 200  # piped or captured: do not fold tables at 80 columns
    return console


def _print_facts(console: Console, rows: Iterable[tuple[str, object]]) -> None:
    rows = list(rows)
    width = max((len(key) for key, _ in rows), default=0)
    for key, value in rows:
        line = Text(key.ljust(width + 2), style="bold")
        line.append("-" if value is None else str(value))
        console.print(line, overflow="ignore", crop=False)


def _number(value: object) -> Text:
    if value is None:
        return Text("-")
    if isinstance(value, float):
        return Text(f"{value:,.1f}")
    return Text(f"{value:,}" if isinstance(value, int) else str(value))


def _statistics_table(title: str, rows: list[dict[str, Any]], *, total: bool) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("statistic", no_wrap=True)
    for name in ("count", "failures", "mean", "min", "max", *(["total ms"] if total else [])):
        table.add_column(name, justify="right")
    for row in rows:
        cells = [row["count"], row["failures"], row["mean"], row["min"], row["max"]]
        if total:
            cells.append(row["total"])
        table.add_row(Text(row["name"]), *(_number(cell) for cell in cells))
    return table


def render_summary(console: Console, summary: Mapping[str, Any], *, filenames: int = 10) -> None:
    """Print a summary from ``success_summary``/``manifest_summary`` for people."""
    if summary["kind"] == "success":
        console.print(Text(f"_SUCCESS of job {summary['job_id']}", style="bold"))
        facts: list[tuple[str, object]] = [
            ("path", summary["path"]),
            ("state", summary["state"]),
            ("failed stage", summary["failed_stage"]),
            ("job id source", summary["job_id_source"]),
            ("committer", _committer_text(summary)),
            ("date", summary["date"]),
            ("host", summary["hostname"]),
            ("tasks", f"{summary['tasks']:,}"),
            ("files", f"{summary['files']:,}"),
            ("bytes", f"{summary['bytes']:,} ({human_bytes(summary['bytes'])})"),
            ("commit time", _seconds_text(summary["commit_seconds"])),
            ("cleanup", _cleanup_text(summary)),
            ("rename processes", summary["rename_processes"]),
            ("peak in flight", _in_flight_text(summary)),
            ("directories created", summary["directories_created"]),
            ("task directories", summary["task_directories"]),
        ]
        if summary["failed_stage"] is None:
            facts.pop(2)
    elif summary["kind"] == "pendingset":
        console.print(Text(f"S3A pending set of {summary['task_id']}", style="bold"))
        facts = [
            ("path", summary["path"]),
            ("job", summary["job_id"]),
            ("task attempt", summary["task_attempt_id"]),
            ("uploads", f"{summary['files']:,}"),
            ("bytes", f"{summary['bytes']:,} ({human_bytes(summary['bytes'])})"),
        ]
    else:
        console.print(Text(f"task manifest of {summary['task_id']}", style="bold"))
        facts = [
            ("path", summary["path"]),
            ("job", summary["job_id"]),
            ("job attempt", summary["job_attempt"]),
            ("task attempt", summary["task_attempt_id"]),
            ("attempt dir", summary["task_attempt_dir"]),
            ("files", f"{summary['files']:,}"),
            ("bytes", f"{summary['bytes']:,} ({human_bytes(summary['bytes'])})"),
            ("directories", summary["directories"]),
            ("to create", summary["directories_to_create"]),
        ]
    _print_facts(console, facts)
    if summary["stages"]:
        console.print(_statistics_table("stages (ms)", summary["stages"], total=True))
    if summary["statistics"]:
        console.print(
            _statistics_table("IOStatistics (durations in ms)", summary["statistics"], total=False)
        )
    if summary["diagnostics"]:
        console.print(Text("diagnostics", style="bold"))
        _print_facts(console, sorted(summary["diagnostics"].items()))
    names = summary.get("filenames") or []
    if names and filenames != 0:
        if filenames < 0:  # every name
            filenames = len(names)
        console.print(Text(f"files ({len(names)} listed in the file)", style="bold"))
        for name in names[:filenames]:
            console.print(Text(f"  {name}"))
        if len(names) > filenames:
            console.print(Text(f"  ... {len(names) - filenames} more (--json lists them all)"))


def _committer_text(summary: Mapping[str, Any]) -> str | None:
    """``staging (org.apache…DirectoryStagingCommitter)``: the option's name first."""
    name, committer = summary.get("committer_name"), summary["committer"]
    return f"{name} ({committer})" if name else committer


def _seconds_text(seconds: float | None) -> str | None:
    return None if seconds is None else f"{seconds:,.3f} s"


def _cleanup_text(summary: Mapping[str, Any]) -> str:
    if summary["cleanup_seconds"] is not None:
        return f"{summary['cleanup_seconds']:,.3f} s"
    return "after _SUCCESS was written (timed in the summary report, --report-dir)"


def _in_flight_text(summary: Mapping[str, Any]) -> str | None:
    peak, limit = summary["peak_in_flight"], summary["concurrency_limit"]
    if peak is None:
        return None
    # the most store requests the commit had outstanding at once, and the ceiling the
    # adaptive limiter allowed (the concurrency option, lowered while the store throttles)
    return f"{peak:,} store calls at once" + (f" (concurrency limit {limit:,})" if limit else "")


def _rate(count: int, seconds: float, unit: str) -> str:
    """``61 files/s``."""
    return f"{count / seconds:,.0f} {unit}/s" if seconds > 0 else f"- {unit}/s"


def render_brief(console: Console, summary: Mapping[str, Any], headline: str) -> None:
    """A commit's outcome in a few lines, the headline last so it stays on screen:
    files, bytes, tasks and rates; the time of each stage that took any. The full table:
    ``render_summary`` (``-v``) or ``--json``."""
    seconds = summary.get("seconds") or summary.get("commit_seconds") or 0.0
    files, size = summary["files"], summary["bytes"]
    console.print(
        Text(
            f"  {files:,} files, {human_bytes(size)} from {summary['tasks']:,} tasks; "
            f"{_rate(files, seconds, 'files')}, "
            f"{human_bytes(int(size / seconds)) + '/s' if seconds else '- B/s'}"
        )
    )
    stages = [
        f"{stage_label(row['name'])} {row['total'] / 1000:,.2f} s"
        for row in summary["stages"]
        if row["name"].startswith("job_stage_") and row["total"]
    ]
    if stages:
        console.print(Text("  " + ", ".join(stages)))
    console.print(Text(f"  {summary['path']}  (-v or --json: every statistic)"))
    console.print(Text(headline, style="bold"))


def echo_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2))


def render_jobs(
    console: Console,
    found: Sequence[JobInfo],
    now: float,
    s3: Mapping[str, S3JobFacts] | None = None,
    outstanding: frozenset[str] = frozenset(),
) -> None:
    """Print a table of jobs: attempts, manifests, files, size, age and state. ``s3``:
    the S3A committers' facts by job (their pending sets count as the job's manifests,
    their files and bytes as its files and size), with an ``uploads`` column of the
    ``outstanding`` multipart uploads each job names."""
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("job", no_wrap=True)
    for name in ("attempts", "manifests", "files", "size", "age"):
        table.add_column(name, justify="right")
    if s3 is not None:
        table.add_column("uploads", justify="right")
    table.add_column("state")
    for job in found:
        facts = None if s3 is None else s3.get(job.job_id)
        manifests = str(job.manifests)
        files, size = job.files, job.size
        if facts is not None and (facts.pendingsets or facts.files):
            manifests = f"{facts.pendingsets} pending set(s)"
            files, size = facts.files, facts.size
        if job.pending_manifests:
            manifests += f" (+{job.pending_manifests} saving)"
        if job.bad_manifests:
            manifests += f" ({job.bad_manifests} unreadable)"
        cells = [
            Text(job.job_id),
            Text(",".join(f"{a:02d}" for a in job.attempts) or "-"),
            Text(manifests),
            Text(f"{files:,}"),
            Text(human_bytes(size)),
            Text(human_duration(job.age(now))),
        ]
        if s3 is not None:
            named = facts.upload_ids & outstanding if facts is not None else frozenset()
            cells.append(Text(f"{len(named):,}"))
        table.add_row(*cells, Text(job.state))
    console.print(table)


def report_unrestorable(lost: list[str], qualify: Callable[[str], str]) -> None:
    """Name, on stderr, every old file an aborted ``replace`` deleted and could not
    restore (stores without atomic rename delete the old output, they cannot move it)."""
    if not lost:
        return
    click.echo(
        f"aiocommit: warning: the aborted commit had replaced the destination's old output; "
        f"{len(lost)} old file(s) were deleted (this store has no atomic rename to move them "
        "aside) and cannot be restored:",
        err=True,
    )
    for path in lost:
        click.echo(f"  {qualify(path)}", err=True)
