"""Helpers for tests: run a job, read back what landed."""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiocommit import CommitOptions, TaskAttempt, commit_task, setup_job, setup_task
from aiocommit.stores.base import Store, join

#: the manifest committer, asked for: on S3 the default is the staging committer
MANIFEST = CommitOptions(committer="manifest")


async def write_task(
    store: Store, dest: str, job_id: str, task: int, attempt: int, files: dict[str, bytes]
) -> TaskAttempt:
    task_attempt = await setup_task(dest, job_id, task, attempt, store=store)
    for relative, data in files.items():
        await task_attempt.write_bytes(relative, data, store=store)
    return task_attempt


def task_files(task: int, count: int, partitions: int = 3, tag: str = "") -> dict[str, bytes]:
    return {
        f"part={n % partitions}/part-{task:05d}-{n:04d}{tag}.dat": f"task {task} n{n}{tag}".encode()
        for n in range(count)
    }


async def run_tasks(
    store: Store,
    dest: str,
    tasks: int,
    files_per_task: int,
    *,
    job_id: str | None = None,
    options: CommitOptions | None = None,
    setup: CommitOptions = MANIFEST,
) -> tuple[str, dict[str, bytes]]:
    """Set up a job (``setup``: with the manifest committer by default, whatever the
    store) and commit ``tasks`` tasks; returns (job_id, expected output)."""
    job_id = await setup_job(dest, job_id, store=store, options=setup)
    expected: dict[str, bytes] = {}
    for task in range(tasks):
        files = task_files(task, files_per_task)
        attempt = await write_task(store, dest, job_id, task, 0, files)
        await commit_task(attempt, store=store, options=options)
        expected.update(files)
    return job_id, expected


async def walk(store: Store, root: str) -> dict[str, bytes]:
    """Every file below ``root`` (relative path -> bytes)."""
    found: dict[str, bytes] = {}
    pending = [root]
    while pending:
        directory = pending.pop()
        async for page in store.list_dir(directory):
            for status in page:
                if status.is_dir:
                    pending.append(status.path)
                else:
                    found[status.path[len(root.rstrip("/")) + 1 :]] = await store.read_bytes(
                        status.path
                    )
    return found


async def visible_paths(store: Store, dest: str) -> set[str]:
    """Paths of the files a reader sees in ``dest`` now, listing only (no reads).

    Safe to call while a commit runs: ``_temporary`` is not walked and a directory that
    vanishes between its listing and ours is skipped.
    """
    found: set[str] = set()
    pending = [dest]
    while pending:
        directory = pending.pop()
        try:
            async for page in store.list_dir(directory):
                for status in page:
                    relative = status.path[len(dest.rstrip("/")) + 1 :]
                    if status.is_dir and relative != "_temporary":
                        pending.append(status.path)
                    elif not status.is_dir:
                        found.add(relative)
        except FileNotFoundError:
            continue
    return found


async def output(
    store: Store, dest: str, *, ignore: Iterable[str] = ("_SUCCESS",)
) -> dict[str, bytes]:
    """What a reader sees in ``dest``: every file, minus ``_SUCCESS`` and ``_temporary``."""
    files = await walk(store, dest)
    skip = set(ignore)
    return {p: d for p, d in files.items() if p not in skip and not p.startswith("_temporary/")}


async def exists(store: Store, path: str) -> bool:
    try:
        await store.stat(path)
    except FileNotFoundError:
        return False
    return True


def under(dest: str, relative: str) -> str:
    return join(dest, relative)


def parsed(path: Path) -> ast.Module:
    """The syntax tree of the Python source at ``path``, parsed once per test run for each
    text (the architecture and docs tests walk every module of the package). Callers
    read the tree and never change it."""
    return _parse(path.read_text(encoding="utf-8"))


@functools.cache
def _parse(text: str) -> ast.Module:
    return ast.parse(text)


@contextmanager
def counted_stats_and_mkdirs() -> Iterator[list[tuple[str, str]]]:
    """Every ``os.stat`` and ``os.mkdir`` made inside the block, in order, with its path
    (``("stat", path)``, ``("mkdir", path)``); both are restored on leaving."""
    made: list[tuple[str, str]] = []
    stat, mkdir = os.stat, os.mkdir

    def counted_stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(("stat", str(path)))
        return stat(path, *args, **kwargs)

    def counted_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        made.append(("mkdir", str(path)))
        mkdir(path, *args, **kwargs)

    os.stat, os.mkdir = counted_stat, counted_mkdir
    try:
        yield made
    finally:
        os.stat, os.mkdir = stat, mkdir
