"""The job side: ``setup_job``, ``commit_job``, ``abort_job``, ``cleanup_job``.

``commit_job`` runs the stage graph::

    recognise an earlier success -> load manifests -> save the commit plan
    -> create target directories -> rename files -> (validate) -> (copy manifests)
    -> save _SUCCESS -> cleanup -> (summary report, always)

No file is renamed until every manifest has loaded and passed its checks. Every stage
is idempotent, so a commit that died (crash, kill, cancel) is finished by running
``commit_job`` again with the same job; a job whose own ``_SUCCESS`` is in place is
recognised and nothing changes.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

import anyio
import msgspec

from aiocommit.engine.session import new_statistics, open_context
from aiocommit.errors import CommitError, ManifestError, NotFound
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.ids import new_job_id
from aiocommit.protocol.iostatistics import IOStatistics, IOStatisticsSnapshot
from aiocommit.protocol.success import SuccessData
from aiocommit.stages.cleanup import cleanup_stage
from aiocommit.stages.context import ProgressCallback, StageContext, first_error, parallel, stage
from aiocommit.stages.create_dirs import create_directories_stage, remove_empty_directories
from aiocommit.stages.load_manifests import (
    CommitPlan,
    LoadedJob,
    encode_plan,
    list_manifest_names,
    load_manifests_stage,
    read_plan,
)
from aiocommit.stages.rename_files import Entry, holds, rename_files_stage
from aiocommit.stages.save_success import (
    copy_manifests_for_diagnostics,
    read_success,
    save_report,
    save_success_stage,
)
from aiocommit.stages.validate import validate_output_stage
from aiocommit.stores.base import Store, parent_of

try:
    VERSION = version("aiocommit")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    VERSION = "0+unknown"


async def setup_job(
    dest: str,
    job_id: str | None = None,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> str:
    """Create the job attempt and manifests directories and remove an old ``_SUCCESS``.

    Returns the job ID: ``job_id`` if given, else a new collision-free one.
    """
    job_id = job_id or new_job_id()
    async with open_context(dest, job_id, attempt=attempt, store=store, options=options) as context:
        layout = context.layout
        async with stage(context, S.JOB_STAGE_SETUP):
            await context.ops.mkdirs(layout.manifests_dir)
            await context.ops.delete(layout.success_path)
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
        async with stage(context, S.COMMITTER_COMMIT_JOB):
            existing = await read_success(context)
            if existing is not None:
                context.log.info("job %s already committed; nothing to rename", layout.job_id)
                summary = existing
                if not options.cleanup_skip:
                    await cleanup_stage(context)
                return existing
            names, plan = await _manifests_to_load(context, manifests)
            loaded = await load_manifests_stage(context, names, task_stats)
            await _fix_plan(context, loaded, plan)
            await create_directories_stage(context, loaded.directories)
            await rename_files_stage(context, loaded)
            if options.validate_output:
                await validate_output_stage(context, loaded)
            await copy_manifests_for_diagnostics(context, names)
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
                await remove_empty_directories(context, loaded.directories)
        summary.success = False
        summary.state = "FAILED"
        summary.stage = getattr(error, "stage", None) or msgspec.UNSET
        summary.diagnostics["exception"] = type(error).__name__
        summary.diagnostics["exception.message"] = str(error)
        raise
    finally:
        if summary is not existing:
            summary.iostatistics = _combined(context, task_stats)
        if loaded is not None:
            loaded.close()
        with anyio.CancelScope(shield=True):
            await save_report(context, summary)


def _combined(context: StageContext, task_stats: IOStatistics) -> IOStatisticsSnapshot:
    combined = new_statistics()
    combined.aggregate(context.stats)
    combined.aggregate(task_stats)
    limiter = context.ops.limiter
    combined.set_gauge("store_io_concurrency_limit", limiter.limit)
    combined.set_gauge("store_io_concurrency_peak", limiter.peak_in_flight)
    return combined.snapshot()


def _diagnostics(options: CommitOptions) -> dict[str, str]:
    return {
        "aiocommit.version": VERSION,
        "mapreduce.manifest.committer.io.threads": str(options.concurrency),
        "mapreduce.manifest.committer.validate.output": str(options.validate_output).lower(),
        "mapreduce.manifest.committer.delete.target.files": str(
            options.delete_target_files
        ).lower(),
    }


async def _manifests_to_load(
    context: StageContext, manifests: Sequence[str] | None
) -> tuple[list[str], CommitPlan | None]:
    """The commit plan's manifests if an earlier run saved one, else the caller's, else
    every manifest in the manifests directory."""
    layout = context.layout
    requested = (
        None if manifests is None else sorted({_manifest_name(context, m) for m in manifests})
    )
    try:
        plan = read_plan(
            await context.ops.read_bytes(layout.commit_plan_path, statistic=S.OP_LOAD_COMMIT_PLAN),
            layout.commit_plan_path,
        )
    except NotFound:
        plan = None
    if plan is not None:
        planned = sorted(plan.manifests)
        if requested is not None and requested != planned:
            raise ManifestError(
                "this job's commit was started earlier with other manifests; finish it with "
                f"the same ones ({len(planned)} planned, {len(requested)} requested)",
                path=layout.commit_plan_path,
            )
        return planned, plan
    if requested is not None:
        return requested, None
    return await list_manifest_names(context), None


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


async def _fix_plan(context: StageContext, loaded: LoadedJob, plan: CommitPlan | None) -> None:
    """Save the plan before the first rename; on a re-run, check nothing changed."""
    digests = {m.name: m.digest for m in loaded.manifests}
    if plan is not None:
        for name, digest in plan.manifests.items():
            if digests.get(name) != digest:
                raise ManifestError(
                    "manifest changed since this job's commit started (a late task attempt?); "
                    "refusing to mix two attempts' output",
                    path=context.layout.manifests_dir + "/" + name,
                )
        return
    layout = context.layout
    await context.ops.write_bytes(
        layout.commit_plan_path, encode_plan(CommitPlan(job_id=layout.job_id, manifests=digests))
    )


async def abort_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    undo_renames: bool = True,
) -> None:
    """Abort the job: remove everything under ``_temporary/JOB``. Idempotent.

    If a job commit had started renaming (its commit plan exists) and the job has no
    ``_SUCCESS`` of its own, the files it renamed are moved back first (``undo_renames``),
    so nothing of the job stays visible. A committed job is only cleaned up.
    """
    async with open_context(dest, job_id, attempt=attempt, store=store, options=options) as context:
        if undo_renames and await read_success(context) is None:
            await _undo_renames(context)
        await cleanup_stage(context, name=S.JOB_STAGE_ABORT)


async def _undo_renames(context: StageContext) -> None:
    layout = context.layout
    try:
        plan = read_plan(
            await context.ops.read_bytes(layout.commit_plan_path, statistic=S.OP_LOAD_COMMIT_PLAN),
            layout.commit_plan_path,
        )
    except NotFound:
        return
    ops = context.ops
    etags_kept = ops.capabilities.etags_preserved_in_rename
    loaded = await load_manifests_stage(context, sorted(plan.manifests), new_statistics())

    async def move_back(entry: Entry) -> None:
        source, dest, size, etag = entry
        if await ops.stat_or_none(source) is not None:
            return
        if not holds(await ops.stat_or_none(dest), size, etag, etags_kept=etags_kept):
            raise CommitError(
                "cannot undo: the file is neither at its source nor at its destination",
                operation="rename",
                path=context.qualify(source),
            )
        await ops.mkdirs(parent_of(source))
        await ops.rename(dest, source)

    try:
        async with stage(context, S.JOB_STAGE_ABORT):
            for manifest in loaded.manifests:
                await parallel(
                    list(loaded.entries(manifest, layout.dest)),
                    move_back,
                    workers=context.options.concurrency,
                )
    finally:
        loaded.close()


async def cleanup_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> None:
    """Delete the job's temporary directory tree; never touches committed output."""
    async with open_context(dest, job_id, attempt=attempt, store=store, options=options) as context:
        await cleanup_stage(context)
