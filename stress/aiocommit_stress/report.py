"""Reports: a live progress bar fed by ``commit_job``'s progress callback, summary tables,
the JSON file with every figure, and PNG plots for the sweeps."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from aiocommit import Progress as CommitProgress
from aiocommit.cli.progress import columns, count_text, rate_text, stage_label

#: reports and plots go here unless ``--out`` says otherwise (relative to the working directory)
DEFAULT_OUT = Path(os.environ.get("AIOCOMMIT_STRESS_OUT", "stress-out"))


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment plus ``extra``, for ``python -m aiocommit_stress`` subprocesses."""
    return {**os.environ, **extra}


class Reporter:
    """Progress on stderr (only when it is a terminal, unless forced), results on stdout."""

    def __init__(self, *, progress: bool | None = None, quiet: bool = False) -> None:
        self.out = Console(highlight=False, soft_wrap=True)
        if not self.out.is_terminal:
            self.out = Console(highlight=False, soft_wrap=True, width=160)
        self.err = Console(stderr=True, highlight=False)
        self.show_progress = self.err.is_terminal if progress is None else progress
        self.quiet = quiet
        self._progress: Progress | None = None

    def log(self, message: str) -> None:
        if not self.quiet:
            self.err.print(message)

    @contextmanager
    def live(self) -> Iterator[None]:
        """Keep one progress display for the block (bars are added by ``bar``)."""
        if not self.show_progress or self._progress is not None:
            yield
            return
        self._progress = Progress(
            *columns(),
            console=self.err,
            transient=True,
            refresh_per_second=5,
        )
        with self._progress:
            try:
                yield
            finally:
                self._progress = None

    @contextmanager
    def bar(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        """A bar; the yielded function advances it by n."""
        progress = self._progress
        if progress is None:
            yield lambda n: None
            return
        task = progress.add_task(description, total=total, count="", rate="")
        done = 0

        def advance(n: int) -> None:
            nonlocal done
            done += n
            progress.update(task, completed=done, count=count_text(done, total, "items"))

        try:
            yield advance
        finally:
            progress.remove_task(task)

    @contextmanager
    def commit_bar(self, description: str) -> Iterator[Callable[[CommitProgress], None]]:
        """A bar driven by ``commit_job(progress=...)``: the stage, files (or manifests,
        directories) done of the total, the rate; drawn as the command's bar is."""
        progress = self._progress
        if progress is None:
            yield lambda event: None
            return
        task: TaskID = progress.add_task(description, total=None, count="", rate="")
        started = time.monotonic()
        stage = ""

        def update(event: CommitProgress) -> None:
            nonlocal started, stage
            if event.stage != stage:
                stage, started = event.stage, time.monotonic()
            progress.update(
                task,
                description=f"{description}: {stage_label(event.stage)}",
                total=event.total or None,
                completed=event.done,
                count=count_text(event.done, event.total, event.unit),
                rate=rate_text(event.done, time.monotonic() - started, event.unit),
            )

        try:
            yield update
        finally:
            progress.remove_task(task)

    def table(self, table: Table) -> None:
        if not self.quiet:
            self.out.print(table)

    def figure(self, line: str) -> None:
        """The headline figure of a run: always printed, and printed last."""
        self.out.print(line)


def machine() -> dict[str, Any]:
    import psutil

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "argv": sys.argv,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2, default=str) + "\n")


def mb(value: float) -> str:
    return f"{value / 2**20:,.0f} MB"


def run_table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    return table


def grid_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    return table


def plot(
    path: Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    logx: bool = False,
    logy: bool = False,
    dashed: Sequence[str] = (),
    markers: bool = True,
    secondary: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    secondary_label: str = "",
) -> Path:
    """One PNG line plot; ``secondary`` series go on a right-hand axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure, axis = plt.subplots(figsize=(8, 5))
    for name, (xs, ys) in series.items():
        style = "--" if name in dashed else "-o" if markers else "-"
        axis.plot(xs, ys, style, label=name)
    if logx:
        axis.set_xscale("log", base=2)
    if logy:
        axis.set_yscale("log")
    axis.set_title(title)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.grid(True, alpha=0.3)
    handles, labels = axis.get_legend_handles_labels()
    if secondary:
        right = axis.twinx()
        for name, (xs, ys) in secondary.items():
            right.plot(xs, ys, ":x", label=name)
        right.set_ylabel(secondary_label)
        more_handles, more_labels = right.get_legend_handles_labels()
        handles += more_handles
        labels += more_labels
    axis.legend(handles, labels, loc="best", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
