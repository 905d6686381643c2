"""Remove empty directories, deepest first: what a commit made and no longer needs.

pre:  ``directories`` are destination directories (any order, any depth).
post: each of them that was an empty directory is gone; one that holds anything stays, and
      so does a file that came to stand where one was. Nothing on stores without
      directories.
fail: a store error other than NotEmpty / NotFound is raised; re-runnable.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiocommit.committers.common.context import StageContext, parallel
from aiocommit.errors import NotEmpty, NotFound


async def remove_empty_directories(context: StageContext, directories: Iterable[str]) -> None:
    """Remove those of ``directories`` that are empty, deepest first, one non-recursive
    delete each: a directory that holds anything stays, and so does a file that came to
    stand where one was. Nothing on stores without directories."""
    ops = context.ops
    if not ops.capabilities.directories:
        return
    by_depth: dict[int, list[str]] = {}
    for directory in directories:
        by_depth.setdefault(directory.count("/"), []).append(directory)

    async def remove(directory: str) -> None:
        status = await ops.stat_or_none(directory)
        if status is None or not status.is_dir:
            return  # never a file that came to stand there
        try:
            await ops.delete(directory, recursive=False)
        except (NotEmpty, NotFound):
            return

    for depth in sorted(by_depth, reverse=True):
        await parallel(by_depth[depth], remove, workers=context.loop_workers)
