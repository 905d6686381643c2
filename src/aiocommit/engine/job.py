"""The job side: ``setup_job``, ``commit_job``, ``abort_job``, ``cleanup_job``.

``commit_job`` runs the stage graph::

    recognise an earlier success -> load manifests (copying them beside the plan)
    -> save the commit plan (state committing) -> delete an older _SUCCESS
    -> create target directories -> rename files -> (validate) -> (copy manifests)
    -> plan state committed (the commit point) -> save _SUCCESS -> cleanup
    -> (summary report, always)

No file is renamed until every manifest has loaded and passed its checks. Every stage
is idempotent, so a commit that died (crash, kill, cancel) is finished by running
``commit_job`` again with the same job; a job whose own ``_SUCCESS`` is in place is
recognised and nothing changes.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Iterator, Sequence

import anyio

from aiocommit.engine.session import new_statistics, open_context
from aiocommit.engine.summary import combined_statistics as _combined
from aiocommit.engine.summary import committer_diagnostics as _diagnostics
from aiocommit.engine.summary import record_failure
from aiocommit.errors import CommitError, ManifestError, first_error
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.ids import new_job_id
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.success import SuccessData
from aiocommit.stages.abort import undo_commit_stage
from aiocommit.stages.check_sources import check_sources_stage
from aiocommit.stages.cleanup import cleanup_stage
from aiocommit.stages.commit_plan import (
    ABORTED,
    COMMITTED,
    COMMITTING,
    CommitPlan,
    check_unchanged,
    copies_reader,
    encode_plan,
    read_plan,
    save_copies,
    save_plan,
)
from aiocommit.stages.context import ProgressCallback, StageContext, stage
from aiocommit.stages.create_dirs import (
    create_directories_stage,
    remove_created_directories_after_failure,
)
from aiocommit.stages.job_state import read_job_record
from aiocommit.stages.load_manifests import (
    LoadedCallback,
    LoadedJob,
    list_manifest_names,
    load_manifests_stage,
)
from aiocommit.stages.rename_files import rename_files_stage
from aiocommit.stages.rename_workers import RenameWorkers, job_commit_collections
from aiocommit.stages.resolve_conflicts import (
    finish_conflicts_stage,
    initial_record,
    resolve_conflicts_stage,
    settle_conflict_mode,
    unrestorable,
)
from aiocommit.stages.save_success import (
    copy_manifests_for_diagnostics,
    read_success,
    save_report,
    save_success_stage,
)
from aiocommit.stages.validate import validate_output_stage
from aiocommit.stores.base import Store, parent_of


async def setup_job(
    dest: str,
    job_id: str | None = None,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> str:
    """Create the job attempt and manifests directories.

    An older ``_SUCCESS`` in the destination stays until this job's commit starts
    renaming: until then the destination still holds that job's complete output.
    Returns the job ID: ``job_id`` if given, else a new collision-free one.
    """
    job_id = job_id or new_job_id()
    async with open_context(dest, job_id, attempt=attempt, store=store, options=options) as context:
        layout = context.layout
        async with stage(context, S.JOB_STAGE_SETUP):
            await context.ops.mkdirs(layout.manifests_dir)
    return job_id


async def commit_job(
    dest: str,
    job_id: str,
    *,
    manifests: Sequence[str] | None = None,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    progress: ProgressCallback | None = None,
    job_id_source: str = "JobID",
) -> SuccessData:
    """Commit the job: every committed task's files into place, then ``_SUCCESS``.

    Args:
        dest: the destination directory (a URL, or a path of ``store``).
        job_id: the job's ID, as given to ``setup_job``.
        manifests: commit exactly these manifests (file names in the job's manifests
            directory, or their paths/URLs) instead of every one found there.
        store: a store client to use (and not close); by default one is opened from
            ``dest`` and closed at the end.
        progress: called with ``Progress`` reports while files are renamed.

    Returns:
        The summary written to ``_SUCCESS`` (or found there, when the job had committed).

    Raises:
        CommitError: naming the stage, operation and path; ``ManifestError`` and
            ``OutputConflict`` for bad manifests, before anything is renamed.
    """
    async with open_context(
        dest,
        job_id,
        attempt=attempt,
        store=store,
        options=options,
        progress=progress,
        job_id_source=job_id_source,
    ) as context:
        with job_commit_collections(context.options):
            return await _commit(context, manifests)


async def _commit(context: StageContext, manifests: Sequence[str] | None) -> SuccessData:
    layout = context.layout
    options = context.options
    summary = SuccessData.now(layout.job_id, context.job_id_source)
    summary.diagnostics.update(_diagnostics(options))
    task_stats = new_statistics()
    loaded: LoadedJob | None = None
    existing: SuccessData | None = None
    try:
        async with stage(context, S.COMMITTER_COMMIT_JOB), RenameWorkers(context) as workers:
            existing = await read_success(context)
            if existing is not None:
                context.log.info("job %s already committed; nothing to rename", layout.job_id)
                summary = existing
                if not options.cleanup_skip:
                    await cleanup_stage(context)
                return existing
            loaded, plan = await _load_for_plan(
                context, manifests, task_stats, workers.manifests_loaded
            )
            names = [m.name for m in loaded.manifests]
            await check_sources_stage(context, loaded)
            if plan.state == COMMITTING:
                await _resolve_conflicts(context, plan, loaded)
                # the destination changes from here on: an older job's _SUCCESS goes
                await context.ops.delete(layout.success_path)
            await create_directories_stage(context, loaded.directories)
            await rename_files_stage(context, loaded, workers)
            if options.validate_output:
                await validate_output_stage(context, loaded)
            await copy_manifests_for_diagnostics(context, names)
            await finish_conflicts_stage(context, plan)
            if plan.state != COMMITTED:
                plan.state = COMMITTED  # the commit point: abort no longer undoes anything
                await save_plan(context, plan)
            summary.filenames = loaded.filenames
            summary.iostatistics = _combined(context, task_stats)
            if options.write_success:
                await save_success_stage(context, summary)
            if not options.cleanup_skip:
                await cleanup_stage(context, {m.attempt_dir for m in loaded.manifests})
        return summary
    except BaseException as raw:
        error = first_error(raw)
        if loaded is not None and isinstance(error, Exception):
            with anyio.CancelScope(shield=True):
                await remove_created_directories_after_failure(context, loaded.directories)
        record_failure(summary, error)
        raise
    finally:
        if summary is not existing:
            summary.iostatistics = _combined(context, task_stats)
        if loaded is not None:
            loaded.close()
        with anyio.CancelScope(shield=True):
            await save_report(context, summary)


async def _resolve_conflicts(context: StageContext, plan: CommitPlan, loaded: LoadedJob) -> None:
    options = context.options
    mode, partitioned = settle_conflict_mode(
        context, plan, options.conflict_mode, options.replace_partitions
    )

    def targets() -> Iterator[str]:
        for manifest in loaded.manifests:
            for _, target, _, _ in loaded.entries(manifest, context.layout.dest):
                yield target

    await resolve_conflicts_stage(context, plan, mode, partitioned=partitioned, targets=targets)


async def _load_for_plan(
    context: StageContext,
    manifests: Sequence[str] | None,
    task_stats: IOStatistics,
    on_loaded: LoadedCallback,
) -> tuple[LoadedJob, CommitPlan]:
    """Load the manifests this commit renames and fix them in the plan.

    A first run loads the caller's manifests (else every one in ``manifests/``), keeping
    a copy of each beside the plan, and saves the plan before anything is renamed. A
    re-run loads the plan's manifests and checks they did not change; a re-run after the
    commit point loads the plan's own copies, which no late attempt can replace.
    """
    layout = context.layout
    requested = (
        None if manifests is None else sorted({_manifest_name(context, m) for m in manifests})
    )
    plan = await read_plan(context)
    if plan is None:
        names = requested if requested is not None else await list_manifest_names(context)
        loaded = await load_manifests_stage(
            context, names, task_stats, keep_bytes=True, on_loaded=on_loaded
        )
        try:
            plan = CommitPlan(
                job_id=layout.job_id,
                manifests={m.name: m.digest for m in loaded.manifests},
                copies=await save_copies(context, loaded),
                conflicts=initial_record(
                    context.options.conflict_mode or "append",
                    bool(context.options.replace_partitions),
                ),
            )
            await context.ops.write_bytes(layout.commit_plan_path, encode_plan(plan))
        except BaseException:
            loaded.close()
            raise
        return loaded, plan
    if plan.state == ABORTED:
        raise CommitError(
            "this job was aborted; it cannot be committed", path=layout.commit_plan_path
        )
    planned = sorted(plan.manifests)
    if requested is not None and requested != planned:
        raise ManifestError(
            "this job's commit was started earlier with other manifests; finish it with "
            f"the same ones ({len(planned)} planned, {len(requested)} requested)",
            path=layout.commit_plan_path,
        )
    if plan.state == COMMITTED:
        loaded = await load_manifests_stage(
            context,
            planned,
            task_stats,
            read=copies_reader(context, plan),
            digests=plan.manifests,
            on_loaded=on_loaded,
        )
        return loaded, plan
    loaded = await load_manifests_stage(context, planned, task_stats, on_loaded=on_loaded)
    try:
        check_unchanged(context, plan, {m.name: m.digest for m in loaded.manifests})
    except BaseException:
        loaded.close()
        raise
    return loaded, plan


def _manifest_name(context: StageContext, manifest: str) -> str:
    manifests_dir = context.layout.manifests_dir
    if "/" not in manifest:
        return manifest
    try:
        path = manifest if manifest.startswith("/") else context.ops.store.unqualify(manifest)
    except ValueError as error:
        raise ManifestError(f"manifest {manifest!r} is not in this store", path=manifest) from error
    if parent_of(path) != manifests_dir:
        raise ManifestError(
            f"manifest {manifest!r} is not in this job's manifests directory {manifests_dir}",
            path=manifest,
        )
    return posixpath.basename(path)


async def abort_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    undo_renames: bool = True,
    progress: ProgressCallback | None = None,
) -> list[str]:
    """Abort the job: undo its unfinished commit, then remove ``_temporary/JOB``.
    Idempotent: a re-run after a kill at any point finishes it; a finished abort's re-run
    does nothing.

    Every attempt whose commit plan says ``committing`` has its renamed files moved back
    first (``undo_renames``), whichever ``attempt`` is given, so nothing of the job stays
    visible, and the old output a ``replace`` moved aside is moved back. A committed job
    (its plan says so, or ``_SUCCESS`` is its own) is only cleaned up: its output is
    never deleted. ``progress`` gets the files moved back, then the directories
    deleted.

    Returns the store paths of old files a ``replace`` deleted (stores without atomic
    rename) that the abort cannot restore; empty when the destination is as it was.
    """
    async with open_context(
        dest, job_id, attempt=attempt, store=store, options=options, progress=progress
    ) as context:
        record = await read_job_record(context)
        if record is None:
            context.log.info("job %s has no directory: nothing to abort", job_id)
            return []
        if undo_renames and record.state == "committing":
            for layout, plan in record.layouts(context.layout.dest, job_id, COMMITTING):
                await undo_commit_stage(
                    dataclasses.replace(context, layout=layout), plan, new_statistics()
                )
        lost: list[str] = []
        if record.state != "committed":
            for plan in record.plans.values():
                lost.extend(await unrestorable(context, plan))
        await cleanup_stage(context, name=S.JOB_STAGE_ABORT)
        return lost


async def cleanup_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    progress: ProgressCallback | None = None,
) -> None:
    """Delete the job's temporary directory tree; never touches committed output.
    ``progress`` gets the directories deleted."""
    async with open_context(
        dest, job_id, attempt=attempt, store=store, options=options, progress=progress
    ) as context:
        await cleanup_stage(context)
