"""Which committer a job uses: chosen once, at job setup, from the store's capabilities
and the options (as Hadoop's ``PathOutputCommitterFactory`` and ``S3ACommitterFactory``
do), and recorded with the job so that every later step picks the same one.

* ``CommitOptions.committer.name`` (Hadoop's ``fs.s3a.committer.name``) names one:
  ``manifest``, ``staging`` (Hadoop's ``directory``), ``partitioned`` or ``magic``; the
  S3A ones need a store with multipart uploads.
* Else, on a store with multipart uploads and no atomic rename (S3): ``staging``.
  Elsewhere: ``manifest``.
* The manifest committer on S3 only when asked for, with a warning: every file is copied
  and deleted there, neither atomic nor fast.

The choice is saved as ``_temporary/JOB/NN/committer.json``. A job without one (set up
by older code, or by Hadoop) is recognised by what it holds: a ``manifests`` directory
is the manifest committer's; on S3 anything else is the S3A committers' (their commit
plan records their settings).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import msgspec

from aiocommit.committers.common.commit_plan import COMMITTED, COMMITTING
from aiocommit.committers.common.committer import (
    COMMITTER_NAMES,
    AttemptFile,
    Committer,
    TaskAttempt,
    WrittenFile,
)
from aiocommit.committers.common.context import StageContext, stage
from aiocommit.committers.common.job_state import JobPresence, read_job_record, require_job
from aiocommit.committers.common.lease import register_recovery
from aiocommit.committers.common.resolve_conflicts import lost_by_abort
from aiocommit.committers.common.save_success import save_finished
from aiocommit.committers.common.session import new_statistics
from aiocommit.committers.manifest.committer import ManifestCommitter
from aiocommit.committers.s3a.magic import MagicCommitter
from aiocommit.committers.s3a.options import S3CommitterOptions
from aiocommit.committers.s3a.staging import PartitionedStagingCommitter, StagingCommitter
from aiocommit.errors import (
    AiocommitError,
    CommitError,
    InvalidInput,
    ManifestError,
    NotFound,
    UnfinishedCommit,
)
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.codec import decode_or_raise, encode_pretty
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import PendingSet
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store, join
from aiocommit.stores.multipart import supports_multipart

logger = logging.getLogger("aiocommit")

#: the job record's file name, in the job attempt directory
RECORD_NAME = "committer.json"

#: Hadoop's names for the committers (``fs.s3a.committer.name``) -> ours
ALIASES = {"directory": "staging", "file": "manifest"}


class CommitterRecord(msgspec.Struct):
    """``committer.json``: the committer a job was set up with, and its settings."""

    committer: str
    settings: dict[str, str] = msgspec.field(default_factory=dict)


_record_decoder = msgspec.json.Decoder(CommitterRecord)


def committer_name(name: str) -> str:
    """Our name of a committer (Hadoop's ``directory`` and ``file`` accepted);
    ``InvalidInput`` for an unknown one."""
    name = ALIASES.get(name, name)
    if name not in COMMITTER_NAMES:
        raise InvalidInput(f"unknown committer {name!r}: use {', '.join(COMMITTER_NAMES)}")
    return name


#: the S3A committers by name (``S3CommitterOptions.kind``)
S3A_COMMITTERS: dict[str, type[StagingCommitter] | type[MagicCommitter]] = {
    "staging": StagingCommitter,
    "partitioned": PartitionedStagingCommitter,
    "magic": MagicCommitter,
}


def s3a_committer(settings: S3CommitterOptions | None = None) -> StagingCommitter | MagicCommitter:
    """The S3A committer the settings name (by default: staging), over them."""
    settings = settings or S3CommitterOptions()
    return S3A_COMMITTERS[settings.kind](settings)


def _multipart_without_rename(store: Store) -> bool:
    return supports_multipart(store) and not store.capabilities.atomic_rename


def _asked(options: CommitOptions) -> str | None:
    name = options.committer.name
    try:
        return committer_name(name) if name else None
    except ValueError as error:
        raise InvalidInput(str(error)) from None


def choose_committer(store: Store, options: CommitOptions) -> Committer:
    """The committer for a new job on ``store`` (see the module docstring), with the
    S3A settings ``options`` give."""
    asked = _asked(options)
    if asked == "manifest":
        if _multipart_without_rename(store):
            logger.warning(
                "the manifest committer on %s renames every file by copying and deleting "
                "it: neither atomic nor fast; the staging or magic committer commits "
                "without copying",
                store.qualify("/"),
            )
        return ManifestCommitter()
    if asked is not None:
        if not supports_multipart(store):
            raise CommitError(
                f"the {asked} committer needs a store with multipart uploads (S3); "
                f"{store.qualify('/')} has none: use the manifest committer",
                stage=S.JOB_STAGE_SETUP,
            )
        return s3a_committer(S3CommitterOptions.from_options(options))
    if _multipart_without_rename(store):
        return s3a_committer(S3CommitterOptions.from_options(options))
    return ManifestCommitter()


def record_path(context: StageContext, layout: JobLayout | None = None) -> str:
    return join((layout or context.layout).job_attempt_dir, RECORD_NAME)


async def earlier_committer(context: StageContext) -> Committer | None:
    """The committer an earlier attempt of the job recorded (the latest), if any: a job
    keeps its committer across attempts."""
    layout = context.layout
    for attempt in range(layout.attempt - 1, -1, -1):
        earlier = JobLayout(layout.dest, layout.job_id, attempt)
        committer = await recorded_committer(context, earlier)
        if committer is not None:
            return committer
    return None


async def save_committer(context: StageContext, committer: Committer) -> None:
    """Record the job's committer with the job."""
    record = CommitterRecord(committer.name, committer.describe())
    await context.ops.write_bytes(record_path(context), encode_pretty(record))


def _from_record(record: CommitterRecord, path: str) -> Committer:
    name = committer_name(record.committer)
    if name == "manifest":
        return ManifestCommitter()
    settings = S3CommitterOptions.from_record(record.settings) if record.settings else None
    return s3a_committer(S3CommitterOptions.of_kind(name, settings))


async def recorded_committer(
    context: StageContext, layout: JobLayout | None = None
) -> Committer | None:
    """The committer the job attempt's record names; None without a record."""
    path = record_path(context, layout)
    try:
        data = await context.ops.read_bytes(path, statistic=S.OP_LOAD_COMMITTER)
    except NotFound:
        return None
    try:
        return _from_record(decode_or_raise(_record_decoder, data, "committer record", path), path)
    except ValueError as error:
        raise ManifestError(f"committer record: {error}", path=context.qualify(path)) from None


async def job_committer(context: StageContext, options: CommitOptions) -> Committer:
    """The committer of an existing job: the one it recorded, else the one its files
    show (see the module docstring). Asking for another one than the job uses is
    refused."""
    asked = _asked(options)
    async with stage(context, S.JOB_STAGE_FIND_COMMITTER):
        committer = await recorded_committer(context)
        if committer is None:
            committer = await _recognised(context, asked, options)
    return _refuse_another(context, asked, committer)


async def find_job(context: StageContext, operation: str) -> tuple[JobPresence, Committer | None]:
    """``require_job`` and, when the job recorded one, its committer (as ``job_committer``
    finds it), reading the committer record first: a job with a record is ``recorded``
    (the record is under ``_temporary/JOB``), so a job-side call on a job set up by this
    library reads one object before its work, not also a listing.

    pre:  none; reads only.
    post: nothing changed; the committer is None when the job recorded none (the caller
          asks ``job_committer``, which recognises it by its files).
    fail: as ``require_job``; as ``job_committer`` for a recorded committer.
    """
    async with stage(context, S.JOB_STAGE_FIND_COMMITTER):
        committer = await recorded_committer(context)
    if committer is None:
        return await require_job(context, operation), None
    return "recorded", _refuse_another(context, _asked(context.options), committer)


def _refuse_another(context: StageContext, asked: str | None, committer: Committer) -> Committer:
    staging = ("staging", "partitioned")  # one committer; the scope of its conflict mode
    if asked not in (None, committer.name) and not (asked in staging and committer.name in staging):
        raise CommitError(
            f"job {context.layout.job_id} uses the {committer.name} committer, not {asked}",
            path=context.qualify(context.layout.job_attempt_dir),
        )
    return committer


async def _recognised(
    context: StageContext, asked: str | None, options: CommitOptions
) -> Committer:
    store = context.ops.store
    if not supports_multipart(store) or asked == "manifest":
        return ManifestCommitter()
    if await context.ops.stat_or_none(context.layout.manifests_dir) is not None:
        return ManifestCommitter()
    return s3a_committer(S3CommitterOptions.from_options(options))


@dataclass(frozen=True)
class RecordedCommitter:
    """The committer a task attempt's job recorded, read from the job when the attempt
    is used: what ``task_attempt`` names when not told the committer. Its ``name`` and
    ``committed_name`` are not known before then (``setup_task`` names the attempt with
    the job's committer itself)."""

    async def of(self, context: StageContext) -> Committer:
        """The job's committer."""
        return await job_committer(context, context.options)

    @property
    def name(self) -> str:
        raise InvalidInput(
            "this task attempt was named without its job's committer, which is read when "
            "the attempt is first used: name it with setup_task (or task_attempt(committer=))"
        )

    def describe(self) -> dict[str, str]:
        return {}

    async def setup_job(self, context: StageContext) -> None:
        await (await self.of(context)).setup_job(context)

    async def commit_job(
        self,
        context: StageContext,
        committed: Sequence[str] | None,
        *,
        delivered: Mapping[str, bytes] | None = None,
    ) -> SuccessData:
        return await (await self.of(context)).commit_job(context, committed, delivered=delivered)

    async def abort_job(self, context: StageContext, *, undo: bool) -> list[str]:
        return await (await self.of(context)).abort_job(context, undo=undo)

    async def cleanup_job(self, context: StageContext) -> None:
        await (await self.of(context)).cleanup_job(context)

    async def setup_task(self, context: StageContext, attempt: TaskAttempt) -> TaskAttempt:
        committer = await self.of(context)
        return await committer.setup_task(
            context, dataclasses.replace(attempt, committer=committer)
        )

    async def write_bytes(
        self, context: StageContext, attempt: TaskAttempt, relative: str, data: bytes
    ) -> None:
        await (await self.of(context)).write_bytes(context, attempt, relative, data)

    @asynccontextmanager
    async def open(
        self, context: StageContext, attempt: TaskAttempt, relative: str
    ) -> AsyncIterator[AttemptFile]:
        committer = await self.of(context)
        async with committer.open(context, attempt, relative) as file:
            yield file

    async def write_file(
        self, context: StageContext, attempt: TaskAttempt, relative: str, local_path: str
    ) -> None:
        await (await self.of(context)).write_file(context, attempt, relative, local_path)

    async def commit_task(
        self,
        context: StageContext,
        attempt: TaskAttempt,
        *,
        per_attempt: bool,
        written: Sequence[WrittenFile] | None = None,
        save: bool = True,
    ) -> TaskManifest | PendingSet:
        committer = await self.of(context)
        return await committer.commit_task(
            context, attempt, per_attempt=per_attempt, written=written, save=save
        )

    async def abort_task(self, context: StageContext, attempt: TaskAttempt) -> None:
        await (await self.of(context)).abort_task(context, attempt)

    def committed_name(self, attempt: TaskAttempt, *, per_attempt: bool) -> str:
        return self.name  # raises: not known before the attempt is used


async def recover_unfinished_commit(context: StageContext, job_id: str) -> None:
    """Settle job ``job_id``'s commit, left unfinished by a dead or failed holder of the
    destination's lease, which the caller (of ``context``) holds: what a take-over does
    before publishing (``common.lease``), so the destination is what a serial order
    "that job, then the caller" leaves.

    * Abort it when an abort is exact: the commit never started changing the
      destination, or every change it made can be undone (renamed files moved back, a
      replace's old files moved aside come back, completed uploads deleted).
    * Finish it (roll forward, with the settings its plan recorded) when it committed,
      or when an abort would lose old files (``lost_by_abort``: a replace on a store
      without atomic rename, S3 and flat GCS, deleted them; an append with
      ``delete_target_files`` overwrote them, on any store). The finished job's summary
      is saved with it (``save_finished``): its re-run then reports it committed.
    * A job that left nothing (no directory) has nothing to settle.

    pre:  the caller holds the destination's lease (the finishing commit runs inside it
          and does not take it again).
    fail: ``UnfinishedCommit`` naming the old files no abort can restore when the commit
          cannot be finished (its staged data is gone, a store error); nothing of the
          caller's job changed.
    """
    layout = JobLayout(context.layout.dest, job_id)
    dead = dataclasses.replace(
        context,
        layout=layout,
        options=_own_settings(context.options),
        stats=new_statistics(),
        progress=None,
    )
    record = await read_job_record(dead)
    if record is None:
        # no directory: committed and cleaned up (a lease of a job that finished, e.g.
        # written by a request that landed after its holder died), or never there
        return
    lost: list[str] = []
    for attempt, plan in record.layouts(layout.dest, job_id, COMMITTING):
        attempt_context = dataclasses.replace(dead, layout=attempt)
        if lost := await lost_by_abort(attempt_context, plan):
            dead = attempt_context  # the attempt to finish
            if plan.conflicts is not None and plan.conflicts.overwritten:
                # its append overwrote old files: finishing it overwrites the rest
                dead = dataclasses.replace(
                    dead, options=dead.options.with_values(delete_target_files=True)
                )
            break
    for attempt, _ in record.layouts(layout.dest, job_id, COMMITTED)[:1]:
        dead = dataclasses.replace(dead, layout=attempt)
    committer = await job_committer(dead, dead.options)
    if record.state != "committed" and not lost:
        with contextlib.suppress(NotFound):  # its directory went meanwhile: nothing left
            await committer.abort_job(dead, undo=True)
        return
    dead.log.warning(
        "finishing job %s's unfinished commit before publishing (%s)",
        job_id,
        "it had committed" if not lost else f"an abort cannot restore {len(lost)} old file(s)",
    )
    try:
        summary = await committer.commit_job(dead, None)
    except AiocommitError as error:
        raise UnfinishedCommit(
            context.qualify(layout.dest), job_id, [context.qualify(p) for p in lost], error
        ) from error
    await save_finished(dead, summary)


def _own_settings(options: CommitOptions) -> CommitOptions:
    """The taker's options for another job's commit: its conflict mode, scope and
    committer are the ones that job recorded."""
    conflicts = dataclasses.replace(options.conflicts, mode=None, per_partition=None)
    return options.with_values(
        conflicts=conflicts, committer=dataclasses.replace(options.committer, name=None)
    )


register_recovery(recover_unfinished_commit)
