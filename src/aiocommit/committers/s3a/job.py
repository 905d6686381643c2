"""The S3A committers' job side: setup, commit, abort, cleanup.

Job commit, in the frame every committer shares (``committers.common.commit_frame``)::

    recognise an earlier success -> load pending sets (+ fix them and the settings in
    the plan) -> check uploads -> resolve conflicts (check only) -> set an older
    _SUCCESS aside -> (clear a replace's collisions) -> complete uploads -> plan state
    committed (the commit point) -> save _SUCCESS -> cleanup (abort the job's own
    uploads it did not complete) -> (summary report, always)

Re-runnable: a run that died part-way is finished by running it again (a completed
upload is recognised by its destination's etag). Abort aborts every upload the job's
own records name (pending sets, ``.pending`` files, the records task attempts save as
each upload starts), reverts any already completed, and removes the job's directories.
Neither abort nor cleanup touches another job's uploads under the destination: the
destination-wide sweep of old uploads is ``abort_old_uploads`` (``aiocommit cleanup
--uploads --older-than``), asked for explicitly (Hadoop's HADOOP-18797).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext

from aiocommit.committers.common.cleanup import cleanup_stage, remove_if_empty
from aiocommit.committers.common.commit_frame import run_job_commit
from aiocommit.committers.common.commit_plan import (
    COMMITTED,
    REFUSED,
    CommitPlan,
    encode_plan_off_loop,
    read_plan,
    save_plan,
)
from aiocommit.committers.common.context import StageContext, stage
from aiocommit.committers.common.lease import destination_lease, release_stale_lease
from aiocommit.committers.common.resolve_conflicts import (
    clear_conflicts_stage,
    finish_conflicts_stage,
    initial_record,
    resolve_conflicts_stage,
    restore_replaced_stage,
    settle_conflict_mode,
    unrestorable,
)
from aiocommit.committers.common.save_success import read_success, restore_success
from aiocommit.committers.common.session import new_statistics
from aiocommit.committers.s3a.abort_uploads import (
    abort_pending_stage,
    abort_recorded_stage,
    recorded_uploads,
)
from aiocommit.committers.s3a.complete_uploads import complete_uploads_stage
from aiocommit.committers.s3a.load_pendingsets import (
    LoadedPending,
    list_pendingset_names,
    load_pendingsets_stage,
)
from aiocommit.committers.s3a.options import S3CommitterOptions, with_options
from aiocommit.committers.s3a.walk import walk_files
from aiocommit.errors import AlreadyExists, ManifestError, NotFound, PlanMismatch
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import statistics as S
from aiocommit.protocol.ids import check_id
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.pending import (
    PENDING_SUFFIX,
    SinglePendingCommit,
    decode_pending,
    decode_pendingset,
    magic_job_dir,
    pendingsets_dir,
)
from aiocommit.protocol.success import FILENAMES_LIMIT, SuccessData
from aiocommit.stores.base import join, parent_of


async def setup_s3(context: StageContext) -> None:
    """The job side's setup: the pending sets directory (the job is then active). An
    older ``_SUCCESS`` stays until the job's commit starts changing the destination."""
    MultipartOperations(context.ops)  # refuse a store without multipart uploads early
    async with stage(context, S.JOB_STAGE_SETUP):
        await context.ops.mkdirs(pendingsets_dir(context.layout))


async def commit_s3(
    context: StageContext,
    given: S3CommitterOptions | None,
    requested: Sequence[str] | None,
    *,
    fallback: S3CommitterOptions | None = None,
) -> SuccessData:
    """Complete every committed task's uploads, then write ``_SUCCESS``. Re-runnable.

    ``requested``: commit exactly these pending sets (file names in the job's pending
    sets directory) instead of every one found there. ``given``: settings that win over
    the plan's (a different conflict mode or scope is refused); ``fallback``: the
    settings to use when neither ``given`` nor the plan has any (those the job was set up
    with). The context's options are laid over them (``with_options``).

    Raises:
        CommitError: naming the stage, operation and path; ``ManifestError`` and
            ``OutputConflict`` for bad pending sets or conflicts, before any upload
            is completed.
    """
    return await run_job_commit(context, _S3JobCommit(context, given, requested, fallback))


class _S3JobCommit:
    """The S3A committers' steps of one job commit (``commit_frame``)."""

    def __init__(
        self,
        context: StageContext,
        given: S3CommitterOptions | None,
        requested: Sequence[str] | None,
        fallback: S3CommitterOptions | None,
    ) -> None:
        self.fallback = fallback
        self.mops = MultipartOperations(context.ops)
        self.given = given
        self.requested = requested
        self.s3_options: S3CommitterOptions | None = None
        self.loaded: LoadedPending | None = None
        self.plan: CommitPlan | None = None

    @property
    def task_stats(self) -> IOStatistics:
        return self.loaded.task_stats if self.loaded is not None else new_statistics()

    def running(self, context: StageContext) -> AbstractAsyncContextManager[object]:
        return nullcontext()

    @property
    def committing(self) -> bool:
        return self.plan is not None and self.plan.state != COMMITTED

    async def load(self, context: StageContext, summary: SuccessData) -> None:
        plan = await read_plan(context)
        s3_options = self.s3_options = with_options(
            _settled_options(
                context, self.given or self.fallback, plan, explicit=self.given is not None
            ),
            context.options,
        )
        summary.committer = s3_options.committer_name
        summary.diagnostics["fs.s3a.committer.name"] = s3_options.committer
        summary.diagnostics["fs.s3a.committer.staging.conflict-mode"] = s3_options.conflict_mode
        names = await _pendingsets_to_load(context, self.requested, plan)
        self.loaded = await load_pendingsets_stage(context, self.mops, names)
        self.plan = await _fix_plan(context, self.loaded, plan, s3_options)

    async def resolve_conflicts(self, context: StageContext) -> None:
        loaded, plan, s3_options = self.loaded, self.plan, self.s3_options
        assert loaded is not None and plan is not None and s3_options is not None
        if plan.state == COMMITTED:
            return
        mode, partitioned = settle_conflict_mode(
            context, plan, s3_options.conflict_mode, s3_options.partitioned
        )
        if plan.state == REFUSED:  # checked again, with the settings of this run
            plan.committer = s3_options.as_record()
        # ours: uploads an earlier run completed; a same-named old object is old
        await resolve_conflicts_stage(
            context,
            plan,
            mode,
            partitioned=partitioned,
            targets=loaded.destinations.keys,
            ours=loaded.completed,
        )

    async def publish(self, context: StageContext, summary: SuccessData) -> None:
        loaded, plan = self.loaded, self.plan
        assert loaded is not None and plan is not None
        await clear_conflicts_stage(context, plan)
        await complete_uploads_stage(context, self.mops, loaded)
        await finish_conflicts_stage(context, plan)
        if plan.state != COMMITTED:
            # the commit point, recorded with the job (another job may replace
            # _SUCCESS): abort no longer reverts anything
            plan.state = COMMITTED
            await save_plan(context, plan)
        summary.filenames = [c.uri for c in loaded.commits[:FILENAMES_LIMIT]]

    async def cleanup(self, context: StageContext) -> None:
        s3_options = self.s3_options or with_options(
            self.given or await _recorded_options(context, self.fallback), context.options
        )
        loaded = self.loaded
        completed = None if loaded is None else {c.upload_id for c in loaded.commits}
        await _cleanup(context, self.mops, s3_options, completed=completed)

    async def after_failure(self, context: StageContext, error: BaseException) -> None:
        """Nothing: the uploads stay outstanding for a re-run, or an abort."""

    def close(self) -> None:
        pass


def _settled_options(
    context: StageContext,
    given: S3CommitterOptions | None,
    plan: CommitPlan | None,
    *,
    explicit: bool = True,
) -> S3CommitterOptions:
    """The settings a commit runs with: those its plan recorded when an earlier run
    started it (a ``given`` conflict mode or scope that differs is refused), else
    ``given``, else the defaults."""
    if plan is None or not plan.committer:
        return given or S3CommitterOptions()
    recorded = S3CommitterOptions.from_record(plan.committer)
    if given is None or not explicit:
        return recorded
    if plan.state == REFUSED:  # the refusal changed nothing: a new decision
        return given
    if (given.conflict_mode, given.partitioned) != (recorded.conflict_mode, recorded.partitioned):
        scope = "per partition" if recorded.partitioned else "for the whole destination"
        raise ManifestError(
            "this job's commit was started earlier with conflict mode "
            f"'{recorded.conflict_mode}' {scope}; finish it with the same settings "
            "(or give none)",
            path=context.qualify(context.layout.commit_plan_path),
        )
    return given


async def _pendingsets_to_load(
    context: StageContext, requested: Sequence[str] | None, plan: CommitPlan | None
) -> list[str]:
    wanted = None if requested is None else sorted(set(requested))
    for name in wanted or ():
        check_id("pending set name", name)
    if plan is None:
        return await list_pendingset_names(context) if wanted is None else wanted
    planned = sorted(plan.manifests)
    if wanted is not None and wanted != planned:
        raise ManifestError(
            "this job's commit was started earlier with other pending sets; finish it with "
            f"the same ones ({len(planned)} planned, {len(wanted)} requested)",
            path=context.qualify(context.layout.commit_plan_path),
        )
    return planned


async def _fix_plan(
    context: StageContext,
    loaded: LoadedPending,
    plan: CommitPlan | None,
    s3_options: S3CommitterOptions,
) -> CommitPlan:
    """Fix the pending sets and the committer settings before the first completion; a
    re-run must load the same. Returns the plan in force."""
    if plan is not None:
        for name, digest in plan.manifests.items():
            if loaded.digests.get(name) != digest:
                raise PlanMismatch(
                    "pending set changed since this job's commit started (a late task "
                    "attempt?); refusing to mix two attempts' output",
                    path=context.qualify(join(pendingsets_dir(context.layout), name)),
                )
        return plan
    layout = context.layout
    fixed = CommitPlan(
        job_id=layout.job_id,
        manifests=loaded.digests,
        committer=s3_options.as_record(),
        conflicts=initial_record(s3_options.conflict_mode, s3_options.partitioned),
        options=context.options.as_record(),
    )
    plan_bytes = await encode_plan_off_loop(fixed)
    try:  # a conditional put: of two drivers committing one job, one fixes the plan
        await context.ops.write_bytes(layout.commit_plan_path, plan_bytes, overwrite=False)
    except AlreadyExists:
        other = await read_plan(context)
        if other is None:  # an incomplete plan of an earlier write that stopped part-way
            await context.ops.write_bytes(layout.commit_plan_path, plan_bytes, overwrite=True)
            return fixed
        if (other.manifests, other.committer) != (fixed.manifests, fixed.committer):
            raise ManifestError(
                "another commit of this job fixed other pending sets or settings",
                path=context.qualify(layout.commit_plan_path),
            ) from None
        return other
    return fixed


async def _cleanup(
    context: StageContext,
    mops: MultipartOperations,
    s3_options: S3CommitterOptions,
    *,
    name: str = S.JOB_STAGE_CLEANUP,
    uploads_settled: bool = False,
    completed: Collection[str] | None = None,
) -> None:
    """Abort the job's own outstanding uploads (``abort_pending_uploads``; not when the
    caller already did: ``uploads_settled``), then remove ``__magic/JOB`` and last the
    job's directory, whose records name those uploads: a cleanup killed at any point is
    finished by a re-run. Another job's uploads are never touched. ``completed``: the
    uploads the commit completed, when it knows them (their records are not read)."""
    if s3_options.abort_pending_uploads and not uploads_settled:
        async with stage(context, name):
            await abort_own_uploads(context, mops, completed)
    async with stage(context, name):
        await context.ops.delete(magic_job_dir(context.layout), recursive=True)
        # __magic itself, only when no other job uses it
        await remove_if_empty(context, parent_of(magic_job_dir(context.layout)))
    await cleanup_stage(context, name=name)


async def abort_own_uploads(
    context: StageContext, mops: MultipartOperations, completed: Collection[str] | None = None
) -> int:
    """Abort every outstanding upload the job's records name that its commit did not
    complete: pending sets (those a committed plan took are complete: skipped), magic
    ``.pending`` files, and the records attempts save as each upload starts (an attempt
    that died before its task commit, a losing attempt). ``completed``: the upload IDs
    the commit completed, when the caller knows them. Returns how many were aborted."""
    try:
        plan = await read_plan(context)
    except ManifestError:
        plan = None
    taken = set(plan.manifests) if plan is not None and plan.state == COMMITTED else set()
    settled: set[str] = set(completed or ())
    if completed is None:
        settled = {c.upload_id for c in await readable_pending(context, only=taken)}
    commits = await readable_pending(context, skip=taken)
    await abort_pending_stage(context, mops, commits, revert=False)
    settled.update(c.upload_id for c in commits)
    recorded = await recorded_uploads(context, settled=settled)
    return await abort_recorded_stage(context, mops, recorded)


async def abort_s3(
    context: StageContext,
    given: S3CommitterOptions | None,
    *,
    revert: bool = True,
    fallback: S3CommitterOptions | None = None,
) -> list[str]:
    """Abort the job: abort every upload its pending sets, ``.pending`` files and upload
    records name, delete any it had completed (unless the job committed, as its plan
    records: then only clean up; ``revert`` False keeps them), remove its directories; no
    other job's upload is touched. A re-run after a kill finishes it.

    Returns the store paths of the old files a ``replace`` had deleted, which no abort
    can restore (S3 has no rename to move them aside); empty when none are gone."""
    s3_options = with_options(given or await _recorded_options(context, fallback), context.options)
    mops = MultipartOperations(context.ops)
    lost: list[str] = []
    committed = await _committed(context)
    if not committed:
        plan = await read_plan(context)
        # a started commit is undone while no other job publishes
        undoing = nullcontext() if plan is None else destination_lease(context)
        async with undoing, stage(context, S.JOB_STAGE_ABORT):
            commits = await readable_pending(context)
            await abort_pending_stage(context, mops, commits, revert=revert)
            # uploads of attempts that died before their task commit named them
            settled = {c.upload_id for c in commits}
            recorded = await recorded_uploads(context, settled=settled)
            await abort_recorded_stage(context, mops, recorded)
            if plan is not None:  # the job's output is gone: the old output back
                await restore_replaced_stage(context, plan)
                lost = await unrestorable(context, plan)
            if revert:
                await restore_success(context)
    await release_stale_lease(context)  # left by an earlier run of this abort, killed
    await _cleanup(context, mops, s3_options, name=S.JOB_STAGE_ABORT, uploads_settled=not committed)
    return lost


async def cleanup_s3(
    context: StageContext,
    given: S3CommitterOptions | None,
    *,
    fallback: S3CommitterOptions | None = None,
) -> None:
    """Abort the job's own outstanding uploads (``abort_pending_uploads``), remove its
    directories; never touches completed output, nor another job's uploads."""
    s3_options = with_options(given or await _recorded_options(context, fallback), context.options)
    await _cleanup(context, MultipartOperations(context.ops), s3_options)


async def _committed(context: StageContext) -> bool:
    """The job committed: its plan says so (written before ``_SUCCESS``, which a later job
    may replace), or the destination's ``_SUCCESS`` is its own."""
    plan = await read_plan(context)
    if plan is not None and plan.state == COMMITTED:
        return True
    return await read_success(context) is not None


async def _recorded_options(
    context: StageContext, fallback: S3CommitterOptions | None = None
) -> S3CommitterOptions:
    """The settings the job's commit plan recorded; without a readable one ``fallback``,
    else the defaults."""
    try:
        plan = await read_plan(context)
        if plan is not None and plan.committer:
            return S3CommitterOptions.from_record(plan.committer)
    except ManifestError as error:
        context.log.warning("commit plan unreadable, using default settings: %s", error)
    return fallback or S3CommitterOptions()


async def readable_pending(
    context: StageContext,
    *,
    skip: Collection[str] = (),
    only: Collection[str] | None = None,
) -> list[SinglePendingCommit]:
    """Every commit a pending set (but those named in ``skip``; with ``only``, just
    those, and no ``.pending`` file) or ``.pending`` file of this job names; unreadable
    files are logged and skipped (the records saved as each upload started name their
    uploads)."""
    commits: list[SinglePendingCommit] = []
    directory = pendingsets_dir(context.layout)
    for name in await list_pendingset_names(context):
        if name in skip or (only is not None and name not in only):
            continue
        path = join(directory, name)
        try:
            pending = decode_pendingset(
                await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING_SET), path=path
            )
            for commit in pending.commits:
                commit.filename = path
        except (ManifestError, NotFound) as error:
            context.log.warning("skipping unreadable pending set %s: %s", path, error)
            continue
        if pending.job_id == context.layout.job_id:
            commits.extend(pending.commits)
    if only is not None:
        return commits
    for path in await walk_files(context, magic_job_dir(context.layout), lambda p: False):
        if not path.endswith(PENDING_SUFFIX):
            continue
        try:
            commits.append(
                decode_pending(
                    await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING), path=path
                )
            )
        except (ManifestError, NotFound) as error:
            context.log.warning("skipping unreadable pending file %s: %s", path, error)
    return commits
