"""aiocommit: an asyncio commit engine for Hadoop's committers: the Manifest Committer
protocol, and on S3 the S3A staging and magic committers.

One API on every store; the job's committer is chosen at ``setup_job`` from the store
(staging on S3, the manifest committer elsewhere) or ``CommitOptions.committer``::

    job_id = await setup_job("s3a://bucket/out")
    attempt = await setup_task("s3a://bucket/out", job_id, 0)
    await attempt.write_bytes("part-00000.csv", b"a,b\n")
    await commit_task(attempt)
    summary = await commit_job("s3a://bucket/out", job_id)

Every error it raises is an ``AiocommitError`` (see ``aiocommit.errors``).
"""

from aiocommit.engine.committer import AttemptFile, Committer
from aiocommit.engine.job import abort_job, cleanup_job, commit_job, setup_job
from aiocommit.engine.jobs import JobInfo, job_info, list_jobs
from aiocommit.engine.s3a import S3CommitterOptions
from aiocommit.engine.summary import VERSION as __version__
from aiocommit.engine.task import (
    TaskAttempt,
    abort_task,
    commit_task,
    committed_name,
    setup_task,
    task_attempt,
)
from aiocommit.errors import (
    AiocommitError,
    AlreadyExists,
    CommitError,
    InvalidInput,
    ManifestError,
    MissingExtra,
    NotAFile,
    NotEmpty,
    NotFound,
    OutputConflict,
    PermissionDenied,
    PreconditionFailed,
    StoreError,
    Throttled,
    Transient,
    UnknownOption,
)
from aiocommit.options import CommitOptions
from aiocommit.protocol.ids import new_job_id
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import PendingSet
from aiocommit.protocol.success import SuccessData
from aiocommit.stages.context import Progress
from aiocommit.stores import FileStatus, LocalStore, MemoryStore, Store, open_store

__all__ = [
    "AiocommitError",
    "AlreadyExists",
    "AttemptFile",
    "CommitError",
    "CommitOptions",
    "Committer",
    "FileStatus",
    "InvalidInput",
    "JobInfo",
    "LocalStore",
    "ManifestError",
    "MemoryStore",
    "MissingExtra",
    "NotAFile",
    "NotEmpty",
    "NotFound",
    "OutputConflict",
    "PendingSet",
    "PermissionDenied",
    "PreconditionFailed",
    "Progress",
    "S3CommitterOptions",
    "Store",
    "StoreError",
    "SuccessData",
    "TaskAttempt",
    "TaskManifest",
    "Throttled",
    "Transient",
    "UnknownOption",
    "__version__",
    "abort_job",
    "abort_task",
    "cleanup_job",
    "commit_job",
    "commit_task",
    "committed_name",
    "job_info",
    "list_jobs",
    "new_job_id",
    "open_store",
    "setup_job",
    "setup_task",
    "task_attempt",
]
