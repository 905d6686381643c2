"""The zero-rename committers for S3 (Hadoop's S3A committers): staging and magic.

On S3 a rename is a copy and a delete, neither atomic nor O(1). These committers never
rename data: a task uploads each file as a multipart upload **without completing it** and
saves the uploads' IDs and part etags (its ``.pendingset``); the job commit completes every
upload (one small POST per file, no byte copied) and writes ``_SUCCESS``::

    staging  task writes local files -> commit_staging_task: upload, save pending set
    magic    task streams to S3 -> write_magic_file: upload, save .pending + marker
             -> commit_magic_task: collect .pending files into the pending set
    job      setup_s3_job -> ... -> commit_s3_job: recognise an earlier success -> load
             pending sets (+ plan) -> check uploads -> resolve conflicts -> complete
             uploads -> save _SUCCESS -> cleanup (and abort outstanding uploads)

Like ``commit_job``, ``commit_s3_job`` is re-runnable: a run that died part-way is
finished by running it again (a completed upload is recognised by its destination's
etag); ``abort_s3_job`` aborts every upload the job's pending data names, reverts any
already completed, lists and aborts outstanding uploads under the destination, and
removes the job's directories.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import shutil
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import anyio
import anyio.to_thread

from aiocommit.engine.session import new_statistics, open_context
from aiocommit.engine.summary import combined_statistics, committer_diagnostics, record_failure
from aiocommit.errors import (
    AlreadyExists,
    CommitError,
    ManifestError,
    NotEmpty,
    NotFound,
    first_error,
)
from aiocommit.io.multipart import MultipartOperations
from aiocommit.options import CONFLICT_MODES, CommitOptions, UnknownOption
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from aiocommit.protocol.ids import attempt_ids, check_id, new_job_id
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.pending import (
    MAGIC_COMMITTER,
    PARTITIONED_COMMITTER,
    PENDING_SUFFIX,
    STAGING_COMMITTER,
    SinglePendingCommit,
    decode_pending,
    decode_pendingset,
    encode_pending,
    magic_attempt_base,
    magic_job_dir,
    pendingsets_dir,
)
from aiocommit.protocol.success import FILENAMES_LIMIT, SuccessData
from aiocommit.stages.cleanup import cleanup_stage
from aiocommit.stages.commit_plan import (
    COMMITTED,
    CommitPlan,
    encode_plan,
    read_plan,
    save_plan,
)
from aiocommit.stages.context import StageContext, parallel, stage
from aiocommit.stages.pending import (
    MIN_PART_SIZE,
    LoadedPending,
    abort_outstanding_uploads,
    abort_pending_stage,
    complete_uploads_stage,
    list_pendingset_names,
    load_pendingsets_stage,
    save_pendingset_stage,
    upload_pending,
    walk_files,
)
from aiocommit.stages.resolve_conflicts import (
    finish_conflicts_stage,
    initial_record,
    resolve_conflicts_stage,
    restore_replaced_stage,
    settle_conflict_mode,
    unrestorable,
)
from aiocommit.stages.save_success import read_success, save_report, save_success_stage
from aiocommit.stores.base import Store, join, parent_of, relative_to
from aiocommit.stores.multipart import Upload, supports_multipart
from aiocommit.stores.registry import open_store

COMMITTERS = ("staging", "magic")


#: the Hadoop settings of the zero-rename committers that ``S3CommitterOptions`` reads
HADOOP_KEYS = frozenset(
    {
        "fs.s3a.committer.name",
        "fs.s3a.committer.staging.conflict-mode",
        "fs.s3a.multipart.size",
        "fs.s3a.committer.abort.pending.uploads",
    }
)


@dataclass(frozen=True)
class S3CommitterOptions:
    """Settings of the zero-rename committers (Hadoop's names in brackets).

    Attributes:
        committer: ``staging`` or ``magic`` (``fs.s3a.committer.name``).
        conflict_mode: ``fail``, ``append`` or ``replace``
            (``fs.s3a.committer.staging.conflict-mode``; Hadoop's default is ``append``
            for the partitioned committer and ``fail`` for the directory one).
        partitioned: apply the conflict mode per partition, not to the whole destination.
        part_size: bytes per uploaded part, at least 5 MiB (``fs.s3a.multipart.size``).
        abort_pending_uploads: job cleanup and abort also list and abort every outstanding
            upload under the destination (``fs.s3a.committer.abort.pending.uploads``); turn
            off when several jobs write below one destination at once.
    """

    committer: str = "staging"
    conflict_mode: str = "append"
    partitioned: bool = False
    part_size: int = 64 * 1024 * 1024
    abort_pending_uploads: bool = True

    def __post_init__(self) -> None:
        if self.committer not in COMMITTERS:
            raise ValueError(f"committer must be one of {COMMITTERS}, not {self.committer!r}")
        if self.conflict_mode not in CONFLICT_MODES:
            raise ValueError(
                f"conflict mode must be one of {CONFLICT_MODES}, not {self.conflict_mode!r}"
            )
        if self.part_size < MIN_PART_SIZE:
            raise ValueError(f"part size must be at least {MIN_PART_SIZE}, not {self.part_size}")

    @property
    def committer_name(self) -> str:
        if self.committer == "magic":
            return MAGIC_COMMITTER
        return PARTITIONED_COMMITTER if self.partitioned else STAGING_COMMITTER

    def as_record(self) -> dict[str, str]:
        """These settings as the commit plan records them (``from_record`` reads them)."""
        return {
            "committer": self.committer,
            "conflict_mode": self.conflict_mode,
            "partitioned": str(self.partitioned).lower(),
            "part_size": str(self.part_size),
            "abort_pending_uploads": str(self.abort_pending_uploads).lower(),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, str]) -> S3CommitterOptions:
        try:
            return cls(
                committer=record["committer"],
                conflict_mode=record["conflict_mode"],
                partitioned=record["partitioned"] == "true",
                part_size=int(record["part_size"]),
                abort_pending_uploads=record["abort_pending_uploads"] == "true",
            )
        except (KeyError, ValueError) as error:
            raise ManifestError(f"commit plan: bad committer settings {record}: {error}") from None

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> S3CommitterOptions | None:
        """From the ``fs.s3a.*`` keys of ``settings`` (with or without ``spark.hadoop.``),
        None when there are none. ``UnknownOption`` for an ``fs.s3a.*`` key that is not a
        committer setting (``HADOOP_KEYS``), ``ValueError`` for a bad value."""
        found: dict[str, str] = {}
        for key, value in settings.items():
            bare = key.strip().removeprefix("spark.hadoop.")
            if not bare.startswith("fs.s3a."):
                continue
            if bare not in HADOOP_KEYS:
                close = difflib.get_close_matches(bare, sorted(HADOOP_KEYS), n=1)
                raise UnknownOption(key, close[0] if close else None)
            found[bare] = value
        return cls.from_hadoop(found) if found else None

    @classmethod
    def from_hadoop(cls, settings: Mapping[str, str]) -> S3CommitterOptions:
        """From ``fs.s3a.*`` settings (unknown keys ignored)."""
        values: dict[str, object] = {}
        name = settings.get("fs.s3a.committer.name")
        if name in ("directory", "partitioned"):
            values["committer"] = "staging"
            values["partitioned"] = name == "partitioned"
        elif name:
            values["committer"] = name
        if "fs.s3a.committer.staging.conflict-mode" in settings:
            values["conflict_mode"] = settings["fs.s3a.committer.staging.conflict-mode"]
        if "fs.s3a.multipart.size" in settings:
            values["part_size"] = int(settings["fs.s3a.multipart.size"])
        if "fs.s3a.committer.abort.pending.uploads" in settings:
            values["abort_pending_uploads"] = (
                settings["fs.s3a.committer.abort.pending.uploads"].lower() == "true"
            )
        return cls(**values)  # type: ignore[arg-type]


# -- job ------------------------------------------------------------------------------


async def setup_s3_job(
    dest: str,
    job_id: str | None = None,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> str:
    """Create the job's pending sets directory and remove an old ``_SUCCESS``."""
    job_id = job_id or new_job_id()
    async with open_context(dest, job_id, attempt=attempt, store=store, options=options) as context:
        MultipartOperations(context.ops)  # refuse a store without multipart uploads early
        async with stage(context, S.JOB_STAGE_SETUP):
            await context.ops.mkdirs(pendingsets_dir(context.layout))
            await context.ops.delete(context.layout.success_path)
    return job_id


async def commit_s3_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    s3_options: S3CommitterOptions | None = None,
    pendingsets: Sequence[str] | None = None,
    job_id_source: str = "JobID",
) -> SuccessData:
    """Complete every committed task's uploads, then write ``_SUCCESS``. Re-runnable.

    ``pendingsets``: commit exactly these pending sets (file names in the job's pending
    sets directory) instead of every one found there. ``s3_options``: the committer's
    settings; a re-run of a commit that started earlier finishes it with the settings its
    plan recorded (None takes them; a different conflict mode or scope is refused).

    Raises:
        CommitError: naming the stage, operation and path; ``ManifestError`` and
            ``OutputConflict`` for bad pending sets or conflicts, before any upload
            is completed.
    """
    async with open_context(
        dest, job_id, attempt=attempt, store=store, options=options, job_id_source=job_id_source
    ) as context:
        return await _commit(context, s3_options, pendingsets)


async def _commit(
    context: StageContext, given: S3CommitterOptions | None, requested: Sequence[str] | None
) -> SuccessData:
    layout = context.layout
    mops = MultipartOperations(context.ops)
    summary = SuccessData.now(layout.job_id, context.job_id_source)
    summary.diagnostics.update(committer_diagnostics(context.options))
    existing: SuccessData | None = None
    task_stats = new_statistics()
    try:
        async with stage(context, S.COMMITTER_COMMIT_JOB):
            existing = await read_success(context)
            if existing is not None:
                context.log.info("job %s already committed; nothing to complete", layout.job_id)
                summary = existing
                if not context.options.cleanup_skip:
                    await _cleanup(context, mops, given or await _recorded_options(context))
                return existing
            plan = await read_plan(context)
            s3_options = _with_conflict_options(
                _settled_options(context, given, plan), context.options
            )
            summary.committer = s3_options.committer_name
            summary.diagnostics["fs.s3a.committer.name"] = s3_options.committer
            summary.diagnostics["fs.s3a.committer.staging.conflict-mode"] = s3_options.conflict_mode
            names = await _pendingsets_to_load(context, requested, plan)
            loaded = await load_pendingsets_stage(context, mops, names)
            plan = await _fix_plan(context, loaded, plan, s3_options)
            if plan.state != COMMITTED:
                mode, partitioned = settle_conflict_mode(
                    context, plan, s3_options.conflict_mode, s3_options.partitioned
                )
                # ours: uploads an earlier run completed; a same-named old object is old
                await resolve_conflicts_stage(
                    context,
                    plan,
                    mode,
                    partitioned=partitioned,
                    targets=loaded.destinations.keys,
                    ours=loaded.completed,
                )
            await complete_uploads_stage(context, mops, loaded)
            await finish_conflicts_stage(context, plan)
            if plan.state != COMMITTED:
                # the commit point, recorded with the job (another job may replace
                # _SUCCESS): abort no longer reverts anything
                plan.state = COMMITTED
                await save_plan(context, plan)
            summary.filenames = [c.uri for c in loaded.commits[:FILENAMES_LIMIT]]
            task_stats = loaded.task_stats
            summary.iostatistics = combined_statistics(context, task_stats)
            if context.options.write_success:
                await save_success_stage(context, summary)
            if not context.options.cleanup_skip:
                await _cleanup(context, mops, s3_options)
        return summary
    except BaseException as raw:
        error = first_error(raw)
        record_failure(summary, error)
        raise
    finally:
        if summary is not existing:
            summary.iostatistics = combined_statistics(context, task_stats)
        with anyio.CancelScope(shield=True):
            await save_report(context, summary)


def _with_conflict_options(
    s3_options: S3CommitterOptions, options: CommitOptions
) -> S3CommitterOptions:
    """The conflict mode and scope of ``CommitOptions`` (every committer's), where set,
    over the S3 committers' own."""
    changes: dict[str, object] = {}
    if options.conflict_mode is not None:
        changes["conflict_mode"] = options.conflict_mode
    if options.replace_partitions is not None:
        changes["partitioned"] = options.replace_partitions
    return dataclasses.replace(s3_options, **changes) if changes else s3_options  # type: ignore[arg-type]


def _settled_options(
    context: StageContext, given: S3CommitterOptions | None, plan: CommitPlan | None
) -> S3CommitterOptions:
    """The settings a commit runs with: those its plan recorded when an earlier run
    started it (a ``given`` conflict mode or scope that differs is refused), else
    ``given``, else the defaults."""
    if plan is None or not plan.committer:
        return given or S3CommitterOptions()
    recorded = S3CommitterOptions.from_record(plan.committer)
    if given is None:
        return recorded
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
                raise ManifestError(
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
    )
    plan_bytes = encode_plan(fixed)
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
) -> None:
    await cleanup_stage(context, name=name)
    async with stage(context, name):
        await context.ops.delete(magic_job_dir(context.layout), recursive=True)
        with contextlib.suppress(NotEmpty):  # __magic itself, when no other job uses it
            await context.ops.delete(parent_of(magic_job_dir(context.layout)))
        if s3_options.abort_pending_uploads:
            await abort_outstanding_uploads(context, mops, context.layout.dest.rstrip("/") + "/")


async def abort_s3_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    s3_options: S3CommitterOptions | None = None,
) -> list[str]:
    """Abort the job: abort every upload its pending sets and ``.pending`` files name,
    delete any it had completed (unless the job committed, as its plan records: then only
    clean up), abort outstanding uploads under the destination, remove its directories.
    Idempotent.
    ``s3_options`` None: the settings the job's commit plan recorded, else the defaults.

    Returns the store paths of the old files a ``replace`` had deleted, which no abort
    can restore (S3 has no rename to move them aside); empty when none are gone."""
    async with open_context(dest, job_id, attempt=attempt, store=store, options=options) as context:
        s3_options = s3_options or await _recorded_options(context)
        mops = MultipartOperations(context.ops)
        lost: list[str] = []
        if not await _committed(context):
            async with stage(context, S.JOB_STAGE_ABORT):
                commits = await _readable_pending(context)
                await abort_pending_stage(context, mops, commits, revert=True)
                plan = await read_plan(context)
                if plan is not None:  # the job's output is gone: the old output back
                    await restore_replaced_stage(context, plan)
                    lost = await unrestorable(context, plan)
        await _cleanup(context, mops, s3_options, name=S.JOB_STAGE_ABORT)
        return lost


async def cleanup_s3_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    s3_options: S3CommitterOptions | None = None,
) -> None:
    """Remove the job's directories and abort outstanding uploads under the destination
    (``abort_pending_uploads``); never touches completed output. ``s3_options`` None: the
    settings the job's commit plan recorded, else the defaults."""
    async with open_context(dest, job_id, attempt=attempt, store=store, options=options) as context:
        s3_options = s3_options or await _recorded_options(context)
        await _cleanup(context, MultipartOperations(context.ops), s3_options)


async def _committed(context: StageContext) -> bool:
    """The job committed: its plan says so (written before ``_SUCCESS``, which a later job
    may replace), or the destination's ``_SUCCESS`` is its own."""
    plan = await read_plan(context)
    if plan is not None and plan.state == COMMITTED:
        return True
    return await read_success(context) is not None


async def _recorded_options(context: StageContext) -> S3CommitterOptions:
    """The settings the job's commit plan recorded; the defaults without a readable one."""
    try:
        plan = await read_plan(context)
        if plan is not None and plan.committer:
            return S3CommitterOptions.from_record(plan.committer)
    except ManifestError as error:
        context.log.warning("commit plan unreadable, using default settings: %s", error)
    return S3CommitterOptions()


async def _readable_pending(context: StageContext) -> list[SinglePendingCommit]:
    """Every commit a pending set or ``.pending`` file of this job names; unreadable files
    are logged and skipped (the listing of outstanding uploads catches their uploads)."""
    commits: list[SinglePendingCommit] = []
    directory = pendingsets_dir(context.layout)
    for name in await list_pendingset_names(context):
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


async def is_zero_rename_job(dest: str, job_id: str, *, store: Store, attempt: int = 0) -> bool:
    """Whether job ``job_id`` in ``dest`` is the zero-rename committers': on a store with
    multipart uploads (S3), any job but the manifest committer's (whose attempt holds a
    manifests directory); never elsewhere. On S3 both committers may write, and commit
    and abort must run the job's own."""
    if not supports_multipart(store):
        return False
    async with open_context(dest, job_id, attempt=attempt, store=store) as context:
        return await context.ops.stat_or_none(context.layout.manifests_dir) is None


@dataclass(frozen=True)
class S3JobFacts:
    """What the zero-rename committers left of one job (for ``aiocommit jobs``)."""

    pendingsets: int
    pending_files: int
    files: int
    size: int
    upload_ids: frozenset[str]


async def describe_s3_job(dest: str, job_id: str, *, store: Store, attempt: int = 0) -> S3JobFacts:
    """Count a job's pending sets and magic ``.pending`` files and the uploads they name;
    unreadable files are skipped (and logged)."""
    async with open_context(dest, job_id, attempt=attempt, store=store) as context:
        pendingsets = await list_pendingset_names(context)
        commits = await _readable_pending(context)
    return S3JobFacts(
        pendingsets=len(pendingsets),
        pending_files=sum(1 for c in commits if str(c.filename or "").endswith(PENDING_SUFFIX)),
        files=len(commits),
        size=sum(c.length for c in commits),
        upload_ids=frozenset(c.upload_id for c in commits),
    )


@dataclass(frozen=True)
class S3Uploads:
    """The outstanding uploads under a destination and which jobs' pending data names
    them (for ``aiocommit jobs``)."""

    outstanding: frozenset[str]
    by_job: dict[str, S3JobFacts]

    @property
    def stray(self) -> int:
        """Outstanding uploads no job's pending data names (a task died mid-upload)."""
        named: set[str] = set()
        for facts in self.by_job.values():
            named |= facts.upload_ids
        return len(self.outstanding - named)


async def s3_uploads(dest: str, store: Store, job_ids: Sequence[str]) -> S3Uploads:
    outstanding = frozenset(u.upload_id for u in await list_outstanding_uploads(dest, store=store))
    by_job = {job: await describe_s3_job(dest, job, store=store) for job in job_ids}
    return S3Uploads(outstanding, by_job)


async def list_outstanding_uploads(
    dest: str, *, store: Store | None = None, options: CommitOptions | None = None
) -> list[Upload]:
    """Outstanding multipart uploads under ``dest`` (of any job)."""
    async with open_context(dest, "job_list", store=store, options=options) as context:
        mops = MultipartOperations(context.ops)
        prefix = context.layout.dest.rstrip("/") + "/"
        return [u async for page in mops.list_uploads(prefix) for u in page]


# -- tasks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class S3TaskAttempt:
    """One attempt of one task of a zero-rename job."""

    dest: str
    dest_path: str
    job_id: str
    task_id: str
    task_attempt_id: str
    job_attempt: int = 0
    #: staging: the local directory holding the attempt's output
    local_dir: str | None = None

    @property
    def magic_base(self) -> str:
        """Magic: the store directory whose ``REL`` lands at ``DEST/REL``."""
        layout = JobLayout(self.dest_path, self.job_id, self.job_attempt)
        return magic_attempt_base(layout, self.task_attempt_id)


def s3_task_attempt(
    dest: str,
    job_id: str,
    task: str | int,
    attempt: int | str = 0,
    *,
    job_attempt: int = 0,
    local_dir: str | None = None,
    store: Store | None = None,
) -> S3TaskAttempt:
    """Name a task attempt (``task``: an ID or partition number; ``attempt``: a number or
    an attempt ID). ``dest`` is a URL, or a path of ``store``."""
    task_id, attempt_id = attempt_ids(job_id, task, attempt)
    if store is not None and dest.startswith("/"):
        url, path = store.qualify(dest), dest
    else:
        url, path = dest, (store.unqualify(dest) if store is not None else "")
    if not path:
        _, path = open_store(dest)  # parsing only: openers connect on first use
    return S3TaskAttempt(
        url,
        path.rstrip("/") or "/",
        job_id,
        task_id,
        attempt_id,
        job_attempt,
        local_dir,
    )


def _local_files(root: str) -> list[tuple[str, str]]:
    """(relative path, local path) of every file below ``root``, sorted."""
    found: list[tuple[str, str]] = []
    for directory, _dirs, files in os.walk(root):
        for name in files:
            local = os.path.join(directory, name)
            found.append((os.path.relpath(local, root).replace(os.sep, "/"), local))
    return sorted(found)


async def _file_chunks(local: str, part_size: int) -> AsyncIterator[bytes]:
    async with await anyio.open_file(local, "rb") as handle:
        while True:
            chunk = await handle.read(part_size)
            if not chunk:
                return
            yield chunk


async def _bytes_chunks(data: bytes, part_size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), part_size):
        yield data[start : start + part_size]


async def commit_staging_task(
    attempt: S3TaskAttempt,
    *,
    store: Store | None = None,
    options: CommitOptions | None = None,
    s3_options: S3CommitterOptions | None = None,
    files: Sequence[tuple[str, str]] | None = None,
    per_attempt: bool = False,
) -> list[SinglePendingCommit]:
    """Staging task commit: upload every file of ``attempt.local_dir`` (or ``files``:
    (path relative to the destination, local path) pairs) to its final key without
    completing it, then save the task's pending set (``per_attempt``: see
    ``save_pendingset_stage``). On failure every upload this call started is aborted and
    nothing is saved."""
    if attempt.local_dir is None and files is None:
        raise ValueError("a staging task attempt needs its local_dir or files")
    local_dir = attempt.local_dir
    s3_options = s3_options or S3CommitterOptions()
    async with _open(attempt, store, options) as context:
        mops = MultipartOperations(context.ops)
        commits: list[SinglePendingCommit] = []
        try:
            async with stage(context, S.TASK_STAGE_COMMIT):
                await _check_active(context)
                if files is None:
                    files = await anyio.to_thread.run_sync(_local_files, str(local_dir))
                async with stage(context, S3.TASK_STAGE_UPLOAD):

                    async def upload(item: tuple[str, str]) -> None:
                        relative, local = item
                        commits.append(
                            await upload_pending(
                                context,
                                mops,
                                join(context.layout.dest, relative),
                                _file_chunks(local, s3_options.part_size),
                                task_id=attempt.task_id,
                            )
                        )

                    await parallel(list(files), upload, workers=context.options.concurrency)
                commits.sort(key=lambda c: c.destination_key)
                await save_pendingset_stage(
                    context,
                    mops,
                    attempt.task_id,
                    attempt.task_attempt_id,
                    commits,
                    per_attempt=per_attempt,
                )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await abort_pending_stage(context, mops, commits, revert=False)
            raise
        return commits


async def abort_staging_task(attempt: S3TaskAttempt) -> None:
    """Staging task abort: delete the attempt's local files (no upload has started before
    task commit, and a failed task commit aborted its own)."""
    if attempt.local_dir is not None:
        await anyio.to_thread.run_sync(
            lambda: shutil.rmtree(str(attempt.local_dir), ignore_errors=True)
        )


async def setup_magic_task(
    dest: str,
    job_id: str,
    task: str | int,
    attempt: int | str = 0,
    *,
    job_attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> S3TaskAttempt:
    """Name a magic task attempt; the job must be set up."""
    named = s3_task_attempt(dest, job_id, task, attempt, job_attempt=job_attempt, store=store)
    async with _open(named, store, options) as context:
        await _check_active(context)
    return named


async def write_magic_file(
    attempt: S3TaskAttempt,
    relative: str,
    data: bytes | None = None,
    *,
    local_path: str | None = None,
    store: Store | None = None,
    options: CommitOptions | None = None,
    s3_options: S3CommitterOptions | None = None,
) -> SinglePendingCommit:
    """Magic output: upload ``data`` (or ``local_path``) as an uncompleted upload of
    ``DEST/relative``, save ``__base/relative.pending`` and a zero-byte marker at
    ``__base/relative``. Nothing is visible at the destination until job commit."""
    if (data is None) == (local_path is None):
        raise ValueError("give exactly one of data and local_path")
    s3_options = s3_options or S3CommitterOptions()
    async with _open(attempt, store, options) as context:
        mops = MultipartOperations(context.ops)
        dest_path = join(context.layout.dest, relative)
        magic_path = join(attempt.magic_base, relative)
        chunks = (
            _bytes_chunks(data, s3_options.part_size)
            if data is not None
            else _file_chunks(str(local_path), s3_options.part_size)
        )
        commit = await upload_pending(context, mops, dest_path, chunks, task_id=attempt.task_id)
        context.stats.increment(S3.COMMITTER_MAGIC_FILES_CREATED)
        commit.iostatistics = context.stats.snapshot()
        try:
            await context.ops.write_bytes(magic_path + PENDING_SUFFIX, encode_pending(commit))
            await context.ops.write_bytes(magic_path, b"")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await abort_pending_stage(context, mops, [commit], revert=False)
            raise
        return commit


async def _magic_pending(context: StageContext, base: str) -> list[SinglePendingCommit]:
    paths = [
        p for p in await walk_files(context, base, lambda p: False) if p.endswith(PENDING_SUFFIX)
    ]
    commits: list[SinglePendingCommit] = []

    async def load(path: str) -> None:
        commits.append(
            decode_pending(
                await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING), path=path
            )
        )

    await parallel(paths, load, workers=context.options.concurrency)
    for commit in commits:
        expected = join(
            context.layout.dest, relative_to(str(commit.filename)[: -len(PENDING_SUFFIX)], base)
        )
        if "/" + commit.destination_key != expected:
            raise ManifestError(
                f"pending file names {commit.destination_key!r}, not {expected!r}",
                path=commit.filename,
            )
    return sorted(commits, key=lambda c: c.destination_key)


async def commit_magic_task(
    attempt: S3TaskAttempt,
    *,
    store: Store | None = None,
    options: CommitOptions | None = None,
    per_attempt: bool = False,
) -> list[SinglePendingCommit]:
    """Magic task commit: collect the attempt's ``.pending`` files into its pending set
    (``per_attempt``: see ``save_pendingset_stage``), then delete the attempt's magic
    directory."""
    async with _open(attempt, store, options) as context:
        mops = MultipartOperations(context.ops)
        async with stage(context, S.TASK_STAGE_COMMIT):
            await _check_active(context)
            commits = await _magic_pending(context, attempt.magic_base)
            for commit in commits:  # the writers' statistics travel in their .pending files
                context.stats.aggregate(commit.iostatistics)
            await save_pendingset_stage(
                context,
                mops,
                attempt.task_id,
                attempt.task_attempt_id,
                commits,
                per_attempt=per_attempt,
            )
            await context.ops.delete(attempt.magic_base.rsplit("/", 1)[0], recursive=True)
        return commits


async def abort_magic_task(
    attempt: S3TaskAttempt,
    *,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> None:
    """Magic task abort: abort every upload the attempt's ``.pending`` files name and
    delete its magic directory. Idempotent."""
    async with _open(attempt, store, options) as context:
        mops = MultipartOperations(context.ops)
        async with stage(context, S.TASK_STAGE_ABORT_TASK):
            commits = await _magic_pending(context, attempt.magic_base)
            await abort_pending_stage(context, mops, commits, revert=False)
            await context.ops.delete(attempt.magic_base.rsplit("/", 1)[0], recursive=True)


async def _check_active(context: StageContext) -> None:
    if await context.ops.stat_or_none(pendingsets_dir(context.layout)) is None:
        raise CommitError(
            "job is not active (not set up, or already committed or aborted)",
            stage=S.TASK_STAGE_SETUP,
            path=context.qualify(pendingsets_dir(context.layout)),
        )


def _open(
    attempt: S3TaskAttempt, store: Store | None, options: CommitOptions | None
) -> AbstractAsyncContextManager[StageContext]:
    return open_context(
        attempt.dest if store is None else attempt.dest_path,
        attempt.job_id,
        attempt=attempt.job_attempt,
        store=store,
        options=options,
        task_attempt_id=attempt.task_attempt_id,
    )


__all__ = [
    "S3CommitterOptions",
    "S3TaskAttempt",
    "abort_magic_task",
    "abort_s3_job",
    "abort_staging_task",
    "cleanup_s3_job",
    "commit_magic_task",
    "commit_s3_job",
    "commit_staging_task",
    "describe_s3_job",
    "is_zero_rename_job",
    "list_outstanding_uploads",
    "s3_task_attempt",
    "setup_magic_task",
    "setup_s3_job",
    "write_magic_file",
]
