"""Job stage: apply the conflict mode to output already in the destination.

``fail``, ``append`` or ``replace``, for the whole destination or per partition: the
directory each upload lands in (the leaf of ``a=1/b=2/``) with everything below it, as
Hadoop's partitioned committer checks and deletes it. This job's own destinations are
ignored, so a re-run passes.

pre:  the pending sets are loaded (``load_pendingsets``); no upload is completed by
      this run yet.
post: ``append``: nothing changed. ``fail``: the destination (or each partition written)
      holds no other file. ``replace``: every other file there is deleted.
fail: ``OutputConflict`` (mode ``fail``) naming a file, before any upload completes; a
      store error part-way through ``replace`` leaves some old files deleted (a re-run
      deletes the rest).
"""

from __future__ import annotations

from collections.abc import Iterable

from aiocommit.errors import OutputConflict
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol.layout import SUCCESS, TEMPORARY
from aiocommit.protocol.pending import MAGIC
from aiocommit.stages.context import StageContext, parallel, stage
from aiocommit.stages.s3a.load_pendingsets import LoadedPending
from aiocommit.stages.s3a.walk import walk_files
from aiocommit.stores.base import is_under, parent_of

CONFLICT_MODES = ("fail", "append", "replace")


async def resolve_conflicts_stage(
    context: StageContext, loaded: LoadedPending, mode: str, *, partitioned: bool
) -> None:
    if mode not in CONFLICT_MODES:
        raise ValueError(f"conflict mode must be one of {CONFLICT_MODES}, not {mode!r}")
    if mode == "append" or not loaded.commits:
        return
    dest = context.layout.dest
    hidden = {f"{dest}/{TEMPORARY}", f"{dest}/{MAGIC}", f"{dest}/{SUCCESS}"}
    ours = loaded.destinations

    def skip(path: str) -> bool:
        return path in hidden or path in ours

    async with stage(context, S3.JOB_STAGE_RESOLVE_CONFLICTS):
        roots = _outermost({parent_of(p) for p in ours}) if partitioned else [dest]
        existing: list[str] = []

        async def scan(root: str) -> None:
            # a partition is the directory its files land in, with all below it (Hadoop's
            # PartitionedStagingCommitter: FAIL if the partition path exists, REPLACE
            # deletes it recursively); files directly in DEST make DEST a partition
            existing.extend(await walk_files(context, root, skip))

        await parallel(roots, scan, workers=context.options.concurrency)
        if not existing:
            return
        if mode == "fail":
            where = "partition" if partitioned else "destination"
            raise OutputConflict(
                f"the {where} already holds {len(existing)} file(s) and the conflict mode "
                "is 'fail'",
                operation="resolve_conflicts",
                path=context.qualify(sorted(existing)[0]),
            )

        async def remove(path: str) -> None:
            if await context.ops.delete(path):
                context.stats.increment(S3.COMMITTER_TARGET_FILES_DELETED)

        await parallel(sorted(existing), remove, workers=context.options.concurrency)


def _outermost(directories: Iterable[str]) -> list[str]:
    """The directories not below another of them, sorted: walking these covers all."""
    kept: list[str] = []
    for directory in sorted(directories):
        if not any(is_under(directory, outer) for outer in kept):
            kept.append(directory)
    return kept
