"""A progress bar for the engine's ``Progress`` reports."""

from __future__ import annotations

from rich import progress as rich_progress
from rich.console import Console

from aiocommit.cli.units import human_bytes
from aiocommit.stages.context import Progress


class ProgressBar:
    """Draws the engine's ``Progress`` reports with rich, on stderr."""

    def __init__(self, console: Console, *, enabled: bool = True):
        self.enabled = enabled
        self.events = 0
        self._bar = rich_progress.Progress(
            rich_progress.TextColumn("{task.description}"),
            rich_progress.BarColumn(),
            rich_progress.MofNCompleteColumn(),
            rich_progress.TextColumn("files {task.fields[bytes]}"),
            rich_progress.TimeElapsedColumn(),
            rich_progress.TimeRemainingColumn(),
            console=console,
            disable=not enabled,
        )
        self._task: rich_progress.TaskID | None = None

    def __enter__(self) -> ProgressBar:
        self._bar.start()
        self._task = self._bar.add_task("starting", total=None, bytes="")
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def __call__(self, event: Progress) -> None:
        self.events += 1
        if self._task is None:
            return
        sizes = human_bytes(event.bytes_done)
        if event.bytes_total:
            sizes += f"/{human_bytes(event.bytes_total)}"
        self._bar.update(
            self._task,
            description=event.stage,
            total=event.files_total or None,
            completed=event.files_done,
            bytes=sizes,
        )
