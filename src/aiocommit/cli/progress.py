"""Progress bars for the engine's ``Progress`` reports: one bar per stage that takes time
(loading manifests, renaming, cleaning up, aborting), labelled for people, with counts
and rates in thousands. ``aiocommit stress`` draws its bars with the same columns."""

from __future__ import annotations

import time
from collections.abc import Collection

from rich import progress as rich_progress
from rich.console import Console

from aiocommit.cli.units import human_bytes
from aiocommit.committers.common.context import Progress
from aiocommit.protocol import statistics as S

#: what a person reads for a stage's statistic name
STAGE_LABELS = {
    S.JOB_STAGE_SETUP: "setting up",
    S.JOB_STAGE_LOAD_MANIFESTS: "loading manifests",
    S.JOB_STAGE_CREATE_TARGET_DIRS: "creating directories",
    S.JOB_STAGE_RENAME_FILES: "renaming files",
    S.JOB_STAGE_VALIDATE_OUTPUT: "validating output",
    S.JOB_STAGE_SAVE_SUCCESS: "saving _SUCCESS",
    S.JOB_STAGE_CLEANUP: "cleaning up",
    S.JOB_STAGE_ABORT: "aborting",
    S.COMMITTER_COMMIT_JOB: "committing job",
    S.TASK_STAGE_COMMIT: "committing task",
}


def stage_label(name: str) -> str:
    """``job_stage_rename_files`` -> ``renaming files``; unknown names read as words."""
    return STAGE_LABELS.get(name) or name.removeprefix("job_stage_").replace("_", " ")


def columns() -> tuple[rich_progress.ProgressColumn, ...]:
    """The columns of every bar: label, bar, ``5,721/20,000 files``, rate, times."""
    return (
        rich_progress.TextColumn("[bold]{task.description:<20}"),
        rich_progress.BarColumn(),
        rich_progress.TextColumn("{task.fields[count]}"),
        rich_progress.TextColumn("{task.fields[rate]}"),
        rich_progress.TimeElapsedColumn(),
        rich_progress.TimeRemainingColumn(),
    )


def count_text(done: int, total: int | None, unit: str, size: int = 0, size_total: int = 0) -> str:
    """``5,721/20,000 files``, or ``5,721 files`` without a total; with sizes,
    ``5,721/20,000 files, 1.2 MiB/4.0 MiB``."""
    text = f"{done:,}/{total:,} {unit}" if total else f"{done:,} {unit}"
    if size or size_total:
        text += f", {human_bytes(size)}"
        if size_total:
            text += f"/{human_bytes(size_total)}"
    return text


def rate_text(done: int, seconds: float, unit: str, size: int = 0) -> str:
    """``1,234 files/s`` (and ``12.0 MiB/s`` when bytes moved)."""
    if seconds <= 0:
        return ""
    text = f"{done / seconds:,.0f} {unit}/s"
    if size:
        text += f"  {human_bytes(int(size / seconds))}/s"
    return text


class ProgressBar:
    """Draws the engine's ``Progress`` reports with rich, on ``console`` (stderr): a bar
    per stage, started at its first report, finished (full) when the next stage starts.
    Nothing is drawn until the first report, so a commit that does nothing prints no bar."""

    def __init__(
        self, console: Console, *, enabled: bool = True, follow_only: Collection[str] = ()
    ):
        """``follow_only``: stages drawn only after another stage was (``commit``: a
        cleanup after renaming gets a bar; the cleanup of a job committed earlier none)."""
        enabled = enabled and console.is_terminal  # no bar lines in a file or a pipe
        self.enabled = enabled
        self.follow_only = frozenset(follow_only)
        self.events = 0
        self.stages: list[str] = []
        self._bar = rich_progress.Progress(
            *columns(), console=console, disable=not enabled, refresh_per_second=5
        )
        self._task: rich_progress.TaskID | None = None
        self._stage: tuple[str, str] | None = None
        self._started = 0.0
        self._last: Progress | None = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._bar.stop()

    def so_far(self) -> str:
        """What the reports said was done, for a message after an interruption:
        ``renaming files: 192/1,000 files``, or "" before any report."""
        if self._last is None:
            return ""
        event = self._last
        return f"{stage_label(event.stage)}: {count_text(event.done, event.total, event.unit)}"

    def __call__(self, event: Progress) -> None:
        self.events += 1
        self._last = event
        if self._task is None and event.stage in self.follow_only:
            return
        if self._task is None:
            self._bar.start()
        if (event.stage, event.unit) != self._stage:
            self._stage = (event.stage, event.unit)
            self.stages.append(event.stage)
            self._started = time.monotonic()
            self._task = self._bar.add_task(stage_label(event.stage), total=None, count="", rate="")
        assert self._task is not None
        seconds = time.monotonic() - self._started
        self._bar.update(
            self._task,
            total=event.total or None,
            completed=event.done,
            count=count_text(
                event.done, event.total, event.unit, event.bytes_done, event.bytes_total
            ),
            rate=rate_text(event.done, seconds, event.unit, event.bytes_done),
        )
