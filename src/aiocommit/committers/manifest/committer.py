"""The manifest committer (Hadoop's ``ManifestCommitter``): tasks write under their
attempt directory, task commit saves a manifest, job commit renames.

Its job commit, in the frame every committer shares (``engine.commit_frame``)::

    recognise an earlier success -> load manifests (copying them beside the plan)
    -> save the commit plan (state committing) -> resolve conflicts (check only)
    -> set an older _SUCCESS aside -> (clear a replace's collisions)
    -> create target directories -> rename files
    -> (validate) -> (copy manifests) -> plan state committed (the commit point)
    -> save _SUCCESS -> cleanup -> (summary report, always)

No file is renamed until every manifest has loaded and passed its checks. Every stage
is idempotent, so a commit that died (crash, kill, cancel) is finished by running the
commit again with the same job; a job whose own ``_SUCCESS`` is in place is recognised
and nothing changes. An older ``_SUCCESS`` stays until this job's commit starts
renaming (or a replace moves its first old file): until then the destination still holds
that job's complete output; an abort puts it back.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from aiocommit.committers.common.cleanup import cleanup_stage
from aiocommit.committers.common.commit_frame import run_job_commit
from aiocommit.committers.common.commit_plan import (
    ABORTED,
    COMMITTED,
    COMMITTING,
    REFUSED,
    CommitPlan,
    check_unchanged,
    copies_reader,
    encode_plan_off_loop,
    read_plan,
    save_plan,
)
from aiocommit.committers.common.committer import AttemptFile, TaskAttempt, WrittenFile
from aiocommit.committers.common.context import StageContext, stage
from aiocommit.committers.common.job_state import read_job_record
from aiocommit.committers.common.lease import destination_lease, release_stale_lease
from aiocommit.committers.common.resolve_conflicts import (
    clear_conflicts_stage,
    finish_conflicts_stage,
    initial_record,
    resolve_conflicts_stage,
    settle_conflict_mode,
    unrestorable,
)
from aiocommit.committers.common.save_success import (
    copy_manifests_for_diagnostics,
    restore_success_of_attempts,
)
from aiocommit.committers.common.session import new_statistics
from aiocommit.committers.manifest.abort import undo_commit_stage
from aiocommit.committers.manifest.check_sources import check_sources_stage
from aiocommit.committers.manifest.create_dirs import (
    create_directories_stage,
    remove_created_directories_after_failure,
)
from aiocommit.committers.manifest.load_manifests import (
    LoadedCallback,
    LoadedJob,
    list_manifest_names,
    load_manifests_stage,
)
from aiocommit.committers.manifest.plan_copies import save_copies
from aiocommit.committers.manifest.rename_files import rename_files_stage
from aiocommit.committers.manifest.rename_workers import RenameWorkers, job_commit_collections
from aiocommit.committers.manifest.swap_partitions import swap_partitions_stage, swapping_store
from aiocommit.committers.manifest.task import abort_task_stage, commit_task_stage, setup_task_stage
from aiocommit.committers.manifest.validate import validate_output_stage
from aiocommit.errors import CommitError, InvalidInput, ManifestError
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.layout import ATTEMPT_MANIFEST_SUFFIX, MANIFEST_SUFFIX
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import PendingSet
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import join, parent_of

__all__ = ["ATTEMPT_MANIFEST_SUFFIX", "ManifestCommitter"]


@dataclass(frozen=True)
class ManifestCommitter:
    """The manifest committer; see the module docstring."""

    @property
    def name(self) -> str:
        return "manifest"

    def describe(self) -> dict[str, str]:
        return {"committer": self.name}

    async def setup_job(self, context: StageContext) -> None:
        async with stage(context, S.JOB_STAGE_SETUP):
            await context.ops.mkdirs(context.layout.manifests_dir)

    async def commit_job(
        self,
        context: StageContext,
        committed: Sequence[str] | None,
        *,
        delivered: Mapping[str, bytes] | None = None,
    ) -> SuccessData:
        """``delivered``: manifests carried by tasks' commit messages (``commit_task(
        save=False)``), by name; each name is one of ``committed`` too."""
        if delivered and (committed is None or not set(delivered) <= set(committed)):
            raise InvalidInput("every delivered manifest must be one of the task records")
        with job_commit_collections(context.options):
            return await run_job_commit(context, _ManifestJobCommit(committed, delivered or {}))

    async def abort_job(self, context: StageContext, *, undo: bool) -> list[str]:
        """Every attempt whose commit plan says ``committing`` has its renamed files moved
        back first (``undo``), and the old output a ``replace`` moved aside, and the older
        ``_SUCCESS`` the commit set aside, so nothing of the job stays visible. A
        committed job (its plan says so, or ``_SUCCESS`` is its own) is only cleaned
        up."""
        record = await read_job_record(context)
        if record is None:
            context.log.info("job %s has no directory: nothing to abort", context.layout.job_id)
            return []
        if undo and record.state == "committing":
            job_id = context.layout.job_id
            # undone while no other job publishes (its files could land where ours were)
            async with destination_lease(context):
                for layout, plan in record.layouts(context.layout.dest, job_id, COMMITTING):
                    await undo_commit_stage(
                        dataclasses.replace(context, layout=layout), plan, new_statistics()
                    )
        lost: list[str] = []
        if record.state != "committed":
            for plan in record.plans.values():
                lost.extend(await unrestorable(context, plan))
            if undo:
                await restore_success_of_attempts(context, record.attempts)
        await release_stale_lease(context)  # left by an earlier run of this abort, killed
        await cleanup_stage(context, name=S.JOB_STAGE_ABORT)
        return lost

    async def cleanup_job(self, context: StageContext) -> None:
        await cleanup_stage(context)

    async def setup_task(self, context: StageContext, attempt: TaskAttempt) -> TaskAttempt:
        if await context.ops.stat_or_none(context.layout.manifests_dir) is None:
            raise CommitError(
                "job is not set up (or was committed or aborted): no manifests directory",
                stage=S.TASK_STAGE_SETUP,
                path=context.layout.manifests_dir,
            )
        if attempt.local_dir is None:  # a shared directory is its caller's to make
            await setup_task_stage(context, attempt.work_dir)
        return attempt

    async def write_bytes(
        self, context: StageContext, attempt: TaskAttempt, relative: str, data: bytes
    ) -> None:
        await context.ops.write_bytes(attempt.path(relative), data)

    def open(
        self, context: StageContext, attempt: TaskAttempt, relative: str
    ) -> AbstractAsyncContextManager[AttemptFile]:
        return _buffered(context, attempt.path(relative))

    async def write_file(
        self, context: StageContext, attempt: TaskAttempt, relative: str, local_path: str
    ) -> None:
        await context.ops.upload_file(local_path, attempt.path(relative))

    async def commit_task(
        self,
        context: StageContext,
        attempt: TaskAttempt,
        *,
        per_attempt: bool,
        written: Sequence[WrittenFile] | None = None,
        save: bool = True,
    ) -> TaskManifest | PendingSet:
        """Scan the attempt's output (or take ``written``, the caller's list of it) and
        save its manifest as the task's committed manifest, replacing an earlier
        attempt's: the last to commit wins. ``per_attempt``: save it under the
        attempt's own name instead, for a caller that picks its winners after the fact
        (a losing speculative attempt may commit after the winner) and commits exactly
        those. ``save=False`` (with ``per_attempt``): save nothing; the caller carries
        the returned manifest to the job commit (``commit_job(delivered=...)``)."""
        own = None
        if per_attempt:
            own = join(context.layout.manifests_dir, self.committed_name(attempt, per_attempt=True))
        elif not save:
            raise InvalidInput("a task record carried to the job commit must be per attempt")
        if attempt.local_dir is not None and written is None:
            raise InvalidInput(
                "an attempt whose directory other attempts share must list its files (written)"
            )
        return await commit_task_stage(
            context,
            attempt.task_id,
            attempt.task_attempt_id,
            written=written,
            save_as=own,
            attempt_dir=attempt.work_dir,
            save=save,
        )

    async def abort_task(self, context: StageContext, attempt: TaskAttempt) -> None:
        await abort_task_stage(context, attempt.task_attempt_id)

    def committed_name(self, attempt: TaskAttempt, *, per_attempt: bool) -> str:
        if per_attempt:
            return attempt.task_attempt_id + ATTEMPT_MANIFEST_SUFFIX
        return attempt.task_id + MANIFEST_SUFFIX


class _BufferedFile:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.chunks.append(bytes(data))


@asynccontextmanager
async def _buffered(context: StageContext, path: str) -> AsyncIterator[AttemptFile]:
    """A file written whole to ``path`` when the block ends (the store has no appends)."""
    file = _BufferedFile()
    yield file
    await context.ops.write_bytes(path, b"".join(file.chunks))


class _ManifestJobCommit:
    """The manifest committer's steps of one job commit (``commit_frame``)."""

    def __init__(self, committed: Sequence[str] | None, delivered: Mapping[str, bytes]) -> None:
        self.committed = committed
        self.delivered = delivered
        self.task_stats = new_statistics()
        self.loaded: LoadedJob | None = None
        self.plan: CommitPlan | None = None
        self.workers: RenameWorkers | None = None

    @asynccontextmanager
    async def running(self, context: StageContext) -> AsyncIterator[object]:
        async with RenameWorkers(context) as workers:
            self.workers = workers
            yield workers

    @property
    def committing(self) -> bool:
        return self.plan is not None and self.plan.state == COMMITTING

    async def load(self, context: StageContext, summary: SuccessData) -> None:
        assert self.workers is not None
        self.loaded, self.plan = await _load_for_plan(
            context,
            self.committed,
            self.task_stats,
            self.workers.manifests_loaded,
            self.delivered,
        )
        await check_sources_stage(context, self.loaded)

    async def resolve_conflicts(self, context: StageContext) -> None:
        loaded, plan = self.loaded, self.plan
        assert loaded is not None and plan is not None
        if plan.state not in (COMMITTING, REFUSED):
            return
        options = context.options
        mode, partitioned = settle_conflict_mode(
            context, plan, options.conflict_mode, options.replace_partitions
        )

        def targets() -> Iterator[str]:
            for manifest in loaded.manifests:
                for _, target, _, _ in loaded.entries(manifest, context.layout.dest):
                    yield target

        await resolve_conflicts_stage(
            context,
            plan,
            mode,
            partitioned=partitioned,
            targets=targets,
            target_directories=loaded.parents,
            swap=mode == "replace" and partitioned and swapping_store(context) is not None,
        )

    async def publish(self, context: StageContext, summary: SuccessData) -> None:
        loaded, plan, workers = self.loaded, self.plan, self.workers
        assert loaded is not None and plan is not None and workers is not None
        if plan.conflicts is not None and plan.conflicts.swapped:
            await swap_partitions_stage(context, plan, loaded)
        else:
            await clear_conflicts_stage(context, plan)
        await create_directories_stage(context, loaded.directories)
        await rename_files_stage(context, loaded, workers)
        if context.options.validate_output:
            await validate_output_stage(context, loaded)
        await copy_manifests_for_diagnostics(
            context,
            [m.name for m in loaded.manifests],
            read=copies_reader(context, plan) if plan.delivered else None,
        )
        await finish_conflicts_stage(context, plan)
        if plan.state != COMMITTED:
            plan.state = COMMITTED  # the commit point: abort no longer undoes anything
            await save_plan(context, plan)
        summary.filenames = loaded.filenames

    async def cleanup(self, context: StageContext) -> None:
        loaded = self.loaded
        await cleanup_stage(
            context, () if loaded is None else {m.attempt_dir for m in loaded.manifests}
        )

    async def after_failure(self, context: StageContext, error: BaseException) -> None:
        if self.loaded is not None:
            await remove_created_directories_after_failure(context, self.loaded.directories)

    def close(self) -> None:
        if self.loaded is not None:
            self.loaded.close()


async def _load_for_plan(
    context: StageContext,
    manifests: Sequence[str] | None,
    task_stats: IOStatistics,
    on_loaded: LoadedCallback,
    delivered: Mapping[str, bytes],
) -> tuple[LoadedJob, CommitPlan]:
    """Load the manifests this commit renames and fix them in the plan.

    A first run loads the caller's manifests (else every one in ``manifests/``; those
    in ``delivered`` from there, carried by tasks' commit messages), keeping a copy of
    each beside the plan, and saves the plan before anything is renamed. A re-run loads
    the plan's manifests and checks they did not change (the delivered ones from the
    plan's copies: they have no file); a re-run after the commit point loads the
    plan's own copies, which no late attempt can replace.
    """
    layout = context.layout
    requested = (
        None if manifests is None else sorted({_manifest_name(context, m) for m in manifests})
    )
    plan = await read_plan(context)
    if plan is None:
        names = requested if requested is not None else await list_manifest_names(context)
        loaded = await load_manifests_stage(
            context,
            names,
            task_stats,
            keep_bytes=True,
            on_loaded=on_loaded,
            read=_carried_or_saved(context, delivered, _from_messages(delivered))
            if delivered
            else None,
            delivered=delivered,
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
                options=context.options.as_record(),
                delivered=sorted(delivered),
            )
            await context.ops.write_bytes(layout.commit_plan_path, await encode_plan_off_loop(plan))
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
    carried = set(plan.delivered)
    loaded = await load_manifests_stage(
        context,
        planned,
        task_stats,
        on_loaded=on_loaded,
        read=_carried_or_saved(context, carried, copies_reader(context, plan)) if carried else None,
        delivered=carried,
    )
    try:
        check_unchanged(context, plan, {m.name: m.digest for m in loaded.manifests})
    except BaseException:
        loaded.close()
        raise
    return loaded, plan


def _from_messages(delivered: Mapping[str, bytes]) -> Callable[[str], Awaitable[bytes]]:
    """Reads a manifest a task's commit message carried."""

    async def read(name: str) -> bytes:
        return delivered[name]

    return read


def _carried_or_saved(
    context: StageContext,
    carried: Collection[str],
    read_carried: Callable[[str], Awaitable[bytes]],
) -> Callable[[str], Awaitable[bytes]]:
    """Reads a manifest a commit message carried with ``read_carried`` (the message on a
    first run, the plan's copies on a re-run: it has no file), any other from the job's
    ``manifests/``."""

    async def read(name: str) -> bytes:
        if name in carried:
            return await read_carried(name)
        return await context.ops.read_bytes(
            join(context.layout.manifests_dir, name), statistic=S.OP_LOAD_MANIFEST
        )

    return read


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
