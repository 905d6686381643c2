"""Cleanup and abort: remove the job's temporary tree.

pre:  none (idempotent; safe after a partial commit, a crash or an earlier cleanup).
post: ``_temporary/JOB`` is gone: on stores whose directory delete is O(files), task
      attempt directories first and in parallel, to spread the work; on stores with a
      cheap tree delete (ADLS with HNS, memory), in one call; ``_temporary`` itself is
      removed only when empty, never by a recursive delete: another job's directory
      there (even one being created while this runs) stays, and another cleanup
      removing it first is no failure. Attempt directories that no loaded manifest
      named (failed, aborted or losing attempts) are counted.
fail: raised unless ``cleanup_ignore_failures``; then logged and counted.
"""

from __future__ import annotations

from collections.abc import Collection

from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.errors import NotEmpty, NotFound
from aiocommit.protocol import statistics as S


async def cleanup_stage(
    context: StageContext,
    committed_attempt_dirs: Collection[str] = (),
    *,
    name: str = S.JOB_STAGE_CLEANUP,
) -> None:
    layout = context.layout
    ops = context.ops
    try:
        async with stage(context, name):
            attempt_dirs: list[str] = []
            try:
                async for page in ops.list_dir(layout.tasks_dir):
                    attempt_dirs.extend(s.path for s in page if s.is_dir)
            except NotFound:
                pass
            uncommitted = sum(1 for d in attempt_dirs if d not in committed_attempt_dirs)
            context.stats.increment(S.COMMITTER_UNCOMMITTED_TASK_ATTEMPTS_DELETED, uncommitted)
            context.stats.increment(S.COMMITTER_TASK_ATTEMPT_DIRECTORIES_DELETED, len(attempt_dirs))
            progress = context.counter(name, len(attempt_dirs) + 1, unit="directories")
            if (
                context.options.cleanup_parallel_delete
                and not ops.capabilities.fast_directory_delete
            ):

                async def remove(path: str) -> None:
                    await ops.delete(path, recursive=True)
                    progress.add()

                await parallel(attempt_dirs, remove, workers=context.loop_workers)
            await ops.delete(layout.job_dir, recursive=True)
            progress.done = progress.total
            progress.finish()
            await remove_if_empty(context, layout.temporary_dir)
    except Exception as error:
        if not context.options.cleanup_ignore_failures:
            raise
        context.stats.increment(S.JOB_STAGE_CLEANUP + ".ignored_failures")
        context.log.warning("cleanup failed, ignored: %s", error)


async def remove_if_empty(context: StageContext, directory: str) -> None:
    """Delete ``directory`` (``_temporary``, ``__magic``) only if it is empty.

    pre:  none.
    post: ``directory`` is gone if it held nothing; a directory holding another job's
          data (or already removed by another job's cleanup) is left as it is.
    """
    try:
        await context.ops.delete(directory, recursive=False)
    except (NotEmpty, NotFound):
        pass  # another job's directory is there, or another cleanup removed it first
