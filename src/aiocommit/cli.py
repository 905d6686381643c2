"""The ``aiocommit`` command."""

from __future__ import annotations

import sys

import anyio
import click

from aiocommit.protocol import statistics as S


@click.group()
def main() -> None:
    """aiocommit: commit distributed jobs' output to object stores, safely and fast."""


@main.command()
@click.argument("dest", required=False)
@click.option("--tasks", default=8, show_default=True, help="Tasks in the demo job.")
@click.option("--files-per-task", default=25, show_default=True)
def demo(dest: str | None, tasks: int, files_per_task: int) -> None:
    """Run a demo job on the local filesystem and print its commit summary."""
    from aiocommit.demo import run_demo

    dest_dir, summary, seconds = anyio.run(
        lambda: run_demo(dest, tasks=tasks, files_per_task=files_per_task)
    )
    counters = summary.iostatistics.counters
    click.echo(f"committed job {summary.job_id} into {dest_dir} in {seconds:.3f} s")
    click.echo(f"  success:          {summary.success}")
    click.echo(f"  tasks committed:  {counters.get(S.COMMITTER_TASKS_COMPLETED, 0)}")
    click.echo(f"  files committed:  {counters.get(S.COMMITTER_FILES_COMMITTED, 0)}")
    click.echo(f"  bytes committed:  {counters.get(S.COMMITTER_BYTES_COMMITTED, 0)}")
    click.echo(f"  renames:          {counters.get(S.OP_RENAME, 0)}")
    click.echo(f"  _SUCCESS:         {dest_dir}/_SUCCESS ({len(summary.filenames)} file names)")
    if not summary.success:
        sys.exit(1)


if __name__ == "__main__":
    main()
