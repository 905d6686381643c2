"""The S3A committers' shared job side behind the ``Committer`` interface (Hadoop's
``AbstractS3ACommitter``); the task sides are ``staging.StagingCommitter``,
``staging.PartitionedStagingCommitter`` and ``magic.MagicCommitter``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aiocommit.committers.common.committer import TaskAttempt
from aiocommit.committers.common.context import StageContext
from aiocommit.committers.s3a.job import abort_s3, cleanup_s3, commit_s3, setup_s3
from aiocommit.committers.s3a.options import S3CommitterOptions, with_options
from aiocommit.errors import InvalidInput
from aiocommit.protocol.pending import PENDINGSET_SUFFIX
from aiocommit.protocol.success import SuccessData


@dataclass(frozen=True)
class S3ACommitter:
    """The job side the S3A committers share (Hadoop's ``AbstractS3ACommitter``): setup,
    commit, abort and cleanup of a job whose tasks save pending sets. Its subclasses
    (``StagingCommitter``, ``PartitionedStagingCommitter``, ``MagicCommitter``) are the
    task sides; ``committers.factory.s3a_committer`` picks one for a job's settings.

    ``settings``: the job's, as chosen at setup and recorded with it. Each step runs
    with them, overlaid by what the step's ``CommitOptions`` set (``with_options``); a
    job commit started earlier finishes with the settings its plan recorded."""

    settings: S3CommitterOptions = field(default_factory=S3CommitterOptions)

    @property
    def name(self) -> str:
        return self.settings.kind

    def describe(self) -> dict[str, str]:
        return {"committer": self.name, **self.settings.as_record()}

    def settings_for(self, context: StageContext) -> S3CommitterOptions:
        """The job's settings with what the context's options set over them."""
        return with_options(self.settings, context.options)

    async def setup_job(self, context: StageContext) -> None:
        await setup_s3(context)

    async def commit_job(
        self,
        context: StageContext,
        committed: Sequence[str] | None,
        *,
        delivered: Mapping[str, bytes] | None = None,
    ) -> SuccessData:
        if delivered:
            raise InvalidInput(f"the {self.name} committer takes no delivered task records")
        return await commit_s3(context, None, committed, fallback=self.settings)

    async def abort_job(self, context: StageContext, *, undo: bool) -> list[str]:
        return await abort_s3(context, None, revert=undo, fallback=self.settings)

    async def cleanup_job(self, context: StageContext) -> None:
        await cleanup_s3(context, None, fallback=self.settings)

    def committed_name(self, attempt: TaskAttempt, *, per_attempt: bool) -> str:
        return (attempt.task_attempt_id if per_attempt else attempt.task_id) + PENDINGSET_SUFFIX


def refuse_unsaved(committer: str, save: bool) -> None:
    """``InvalidInput`` unless ``save``: an S3A task commit always saves its pending set."""
    if not save:
        raise InvalidInput(f"the {committer} committer's task commit always saves its pending set")
