"""Create target directories.

pre:  manifests loaded; ``directories`` maps each destination directory to whether some
      task did not see it as an existing directory.
post: every such directory exists, its parents too (``mkdirs`` makes parents, so only
      leaves are asked for); a file that stood where one of them must go is deleted.
fail: a store error names the directory; no file has been renamed yet. Re-runnable.

``remove_created_directories`` undoes it: for abort, and (best effort) after a failed
commit, so a name that could not be committed leaves no empty directory behind.
"""

from __future__ import annotations

import anyio

from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.common.directories import remove_empty_directories
from aiocommit.errors import AlreadyExists, first_error
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import is_under, parent_of

#: the longest a failed commit spends removing the empty directories it made
REMOVE_SECONDS = 30


def leaf_directories(directories: dict[str, bool]) -> list[str]:
    """The directories to create that are not a parent of another one to create."""
    wanted = sorted(d for d, needed in directories.items() if needed)
    leaves = []
    for index, directory in enumerate(wanted):
        following = wanted[index + 1] if index + 1 < len(wanted) else ""
        if not following.startswith(directory + "/"):
            leaves.append(directory)
    return leaves


async def create_directories_stage(context: StageContext, directories: dict[str, bool]) -> int:
    """Returns how many leaf directories were asked for."""
    ops = context.ops
    dest_root = context.layout.dest.rstrip("/")

    async def clear_files_in_the_way(directory: str) -> None:
        """Delete files at ``directory`` or its ancestors below the destination."""
        current = directory
        chain = []
        while is_under(current, dest_root) and current != dest_root:
            chain.append(current)
            current = parent_of(current)
        for path in reversed(chain):
            status = await ops.stat_or_none(path)
            if status is None:
                return
            if not status.is_dir:
                context.log.info("deleting file %s where a directory must go", path)
                await ops.delete(path)
                context.stats.increment(S.COMMITTER_FILES_DELETED_IN_THE_WAY)
                return

    async def create(directory: str) -> None:
        with context.stats.track(S.OP_CREATE_ONE_DIRECTORY):
            try:
                await ops.mkdirs(directory)
            except AlreadyExists:
                await clear_files_in_the_way(directory)
                await ops.mkdirs(directory)
        context.stats.increment(S.COMMITTER_DIRECTORIES_CREATED)

    leaves = leaf_directories(directories)
    if not ops.capabilities.directories:
        return 0
    async with stage(context, S.JOB_STAGE_CREATE_TARGET_DIRS):
        await parallel(leaves, create, workers=context.loop_workers)
    return len(leaves)


async def remove_created_directories(context: StageContext, directories: dict[str, bool]) -> None:
    """Remove, deepest first, the empty destination directories that no task saw as
    existing directories (so the commit created them). Store errors are raised (abort is
    re-run until it finishes)."""
    root = context.layout.dest.rstrip("/") or "/"
    await remove_empty_directories(
        context,
        [d for d, needed in directories.items() if needed and d != root and is_under(d, root)],
    )


async def remove_created_directories_after_failure(
    context: StageContext, directories: dict[str, bool]
) -> None:
    """``remove_created_directories`` for a job commit that failed, so a name that could
    not be committed (its source is gone, it is refused) leaves no empty directory behind.
    Best effort and at most ``REMOVE_SECONDS`` long (a struggling store must not hold back
    the failure): a store error or the time limit is logged, the rest left as it is."""
    try:
        with anyio.move_on_after(REMOVE_SECONDS) as scope:
            await remove_created_directories(context, directories)
        if scope.cancelled_caught:
            context.log.warning(
                "stopped removing the empty directories of a failed commit after %d s",
                REMOVE_SECONDS,
            )
    except Exception as error:  # the commit's own failure is what matters
        context.log.warning(
            "could not remove the empty directories of a failed commit: %s", first_error(error)
        )
