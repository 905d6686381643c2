"""Which committer a job uses: chosen once, at job setup, from the store's capabilities
and the options (as Hadoop's ``PathOutputCommitterFactory`` and ``S3ACommitterFactory``
do), and recorded with the job so that every later step picks the same one.

* ``CommitOptions.committer`` names one: ``manifest``, ``staging`` (Hadoop's
  ``directory``), ``partitioned`` or ``magic``; the S3A ones need a store with multipart
  uploads.
* Else, on a store with multipart uploads and no atomic rename (S3): ``staging``, or the
  S3A committer ``s3a`` settings name. Elsewhere: ``manifest``.
* The manifest committer on S3 only when asked for, with a warning: every file is copied
  and deleted there, neither atomic nor fast.

The choice is saved as ``_temporary/JOB/NN/committer.json``. A job without one (set up
by older code, or by Hadoop) is recognised by what it holds: a ``manifests`` directory
is the manifest committer's; on S3 anything else is the S3A committers' (their commit
plan records their settings).
"""

from __future__ import annotations

import dataclasses
import logging

import msgspec

from aiocommit.committers.common.committer import Committer
from aiocommit.committers.common.context import StageContext, stage
from aiocommit.committers.common.lease import register_recovery
from aiocommit.committers.manifest.committer import ManifestCommitter
from aiocommit.committers.s3a.committer import S3ACommitter
from aiocommit.committers.s3a.options import S3CommitterOptions
from aiocommit.errors import CommitError, InvalidInput, ManifestError, NotFound
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.codec import decode_or_raise, encode_pretty
from aiocommit.protocol.layout import JobLayout
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
    if name not in ("manifest", "staging", "partitioned", "magic"):
        raise InvalidInput(
            f"unknown committer {name!r}: use manifest, staging, partitioned or magic"
        )
    return name


def _multipart_without_rename(store: Store) -> bool:
    return supports_multipart(store) and not store.capabilities.atomic_rename


def choose_committer(
    store: Store, options: CommitOptions, s3a: S3CommitterOptions | None = None
) -> Committer:
    """The committer for a new job on ``store`` (see the module docstring)."""
    asked = committer_name(options.committer) if options.committer else None
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
        return S3ACommitter(S3CommitterOptions.of_kind(asked, s3a))
    if _multipart_without_rename(store):
        return S3ACommitter(s3a or S3CommitterOptions())
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
    return S3ACommitter(recorded=S3CommitterOptions.of_kind(name, settings))


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


async def job_committer(
    context: StageContext, options: CommitOptions, s3a: S3CommitterOptions | None = None
) -> Committer:
    """The committer of an existing job: the one it recorded (``s3a`` settings given
    override the recorded ones), else the one its files show (see the module
    docstring). Asking for another one than the job uses is refused."""
    asked = committer_name(options.committer) if options.committer else None
    async with stage(context, S.JOB_STAGE_FIND_COMMITTER):
        committer = await recorded_committer(context)
        if committer is None:
            committer = await _recognised(context, asked, s3a)
    staging = ("staging", "partitioned")  # one committer; the scope of its conflict mode
    if asked not in (None, committer.name) and not (asked in staging and committer.name in staging):
        raise CommitError(
            f"job {context.layout.job_id} uses the {committer.name} committer, not {asked}",
            path=context.qualify(context.layout.job_attempt_dir),
        )
    if s3a is not None and isinstance(committer, S3ACommitter):
        # the caller's settings, but the job's committer: its tasks wrote for it
        kind = committer.s3_options.committer
        return S3ACommitter(dataclasses.replace(s3a, committer=kind), committer.recorded)
    return committer


async def _recognised(
    context: StageContext, asked: str | None, s3a: S3CommitterOptions | None
) -> Committer:
    store = context.ops.store
    if not supports_multipart(store) or asked == "manifest":
        return ManifestCommitter()
    if await context.ops.stat_or_none(context.layout.manifests_dir) is not None:
        return ManifestCommitter()
    if asked is not None:
        return S3ACommitter(S3CommitterOptions.of_kind(asked, s3a))
    return S3ACommitter(s3a)


async def abort_unfinished_commit(context: StageContext, job_id: str) -> None:
    """Abort job ``job_id``'s commit in the destination of ``context``: what a job that
    takes over a dead or failed holder's lease does first (``common.lease``). A job
    that left nothing has nothing to abort."""
    dead = dataclasses.replace(context, layout=JobLayout(context.layout.dest, job_id))
    try:
        committer = await job_committer(dead, dataclasses.replace(context.options, committer=None))
        await committer.abort_job(dead, undo=True)
    except NotFound:
        return  # the job is gone (cleaned up, or never set up here)


register_recovery(abort_unfinished_commit)
