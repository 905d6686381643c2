"""Abort a job attempt's part-run commit: move every file its plan renamed back.

pre:  the attempt's commit plan is ``committing`` (a commit started renaming and did not
      finish); the plan's manifest copies are in ``plan-manifests/`` (plans of older
      versions have none: the manifests themselves are used when their hashes match).
      The copies are held in memory while undoing (the job's manifests' total size).
post: every file of the plan is at its source again (a copy that an interrupted
      copy-then-delete rename left at the destination is deleted); the destination directories the
      commit created and left empty are removed (deepest first; a directory someone
      else filled stays); old output a ``replace`` moved aside is back in place
      (``restore_replaced_stage``); the plan says ``aborted``, so deleting the job's directory
      afterwards, in any order, never leaves a plan whose sources are gone.
fail: ``CommitError`` naming the file that is neither at its source nor at its
      destination; nothing is deleted, so a re-run (after the cause is fixed) resumes.
      Every prefix of this stage is re-runnable: a file already back is skipped.
"""

from __future__ import annotations

from aiocommit.committers.common.commit_plan import ABORTED, CommitPlan, copies_reader, save_plan
from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.common.resolve_conflicts import restore_replaced_stage
from aiocommit.committers.manifest.commit_file import Entry, holds, same_file
from aiocommit.committers.manifest.create_dirs import remove_created_directories
from aiocommit.committers.manifest.load_manifests import LoadedJob, load_manifests_stage
from aiocommit.errors import CommitError, ManifestError
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import parent_of


async def undo_commit_stage(context: StageContext, plan: CommitPlan, stats: IOStatistics) -> int:
    """Undo ``plan`` (of the context's job attempt); returns how many files moved back."""
    async with stage(context, S.JOB_STAGE_ABORT):
        loaded = await _load_planned(context, plan, stats)
        try:
            moved = await _move_back(context, loaded)
            await remove_created_directories(context, loaded.directories)
        finally:
            loaded.close()
        # the old output a replace moved aside goes back before the plan says aborted
        await restore_replaced_stage(context, plan)
        plan.state = ABORTED
        await save_plan(context, plan)
    context.log.info("moved %d renamed files back; plan marked aborted", moved)
    return moved


async def _load_planned(context: StageContext, plan: CommitPlan, stats: IOStatistics) -> LoadedJob:
    names = sorted(plan.manifests)
    try:
        return await load_manifests_stage(
            context,
            names,
            stats,
            read=copies_reader(context, plan) if plan.copies else None,
            digests=plan.manifests,
        )
    except ManifestError as error:
        raise ManifestError(
            f"cannot undo this commit: {error.message}; the plan's manifests are not all "
            "available unchanged",
            path=error.path,
        ) from error


async def _move_back(context: StageContext, loaded: LoadedJob) -> int:
    ops = context.ops
    etags_kept = ops.capabilities.etags_preserved_in_rename
    moved = 0
    progress = context.counter(S.JOB_STAGE_ABORT, loaded.file_count, bytes_total=loaded.total_size)

    async def move_back(entry: Entry) -> None:
        nonlocal moved
        source, dest, size, etag = entry
        try:
            await _move_one(source, dest, size, etag)
        finally:
            progress.add(1, size)

    async def _move_one(source: str, dest: str, size: int, etag: str | None) -> None:
        nonlocal moved
        source_status = await ops.stat_or_none(source)
        if source_status is not None:
            # not renamed; or a copy-then-delete rename stopped before its delete, which
            # left a copy at the destination: that copy goes, the source stays
            dest_status = await ops.stat_or_none(dest)
            if dest_status is not None and same_file(
                source_status, dest_status, etags_kept=etags_kept
            ):
                await ops.delete(dest)
            return
        if not holds(await ops.stat_or_none(dest), size, etag, etags_kept=etags_kept):
            raise CommitError(
                "cannot undo: the file is neither at its source nor at its destination",
                operation="rename",
                path=context.qualify(source),
            )
        await ops.mkdirs(parent_of(source))
        await ops.rename(dest, source)
        moved += 1

    for manifest in loaded.manifests:
        await parallel(
            list(loaded.entries(manifest, context.layout.dest)),
            move_back,
            workers=context.ops.workers,
        )
    progress.finish()
    return moved
