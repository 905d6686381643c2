"""aiocommit: an asyncio commit engine for the Manifest Committer protocol.

Tasks write under their own attempt directory and ``commit_task`` saves a manifest;
``commit_job`` renames every committed task's files into place and writes ``_SUCCESS``::

    job_id = await setup_job("file:///data/out")
    attempt = await setup_task("file:///data/out", job_id, 0)
    ...write files below attempt.work_dir...
    await commit_task(attempt)
    summary = await commit_job("file:///data/out", job_id)

Every error it raises is an ``AiocommitError`` (see ``aiocommit.errors``).
"""

from aiocommit.engine.job import abort_job, cleanup_job, commit_job, setup_job
from aiocommit.engine.jobs import JobInfo, job_info, list_jobs
from aiocommit.engine.summary import VERSION as __version__
from aiocommit.engine.task import TaskAttempt, abort_task, commit_task, setup_task, task_attempt
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
from aiocommit.protocol.success import SuccessData
from aiocommit.stages.context import Progress
from aiocommit.stores import FileStatus, LocalStore, MemoryStore, Store, open_store

__all__ = [
    "AiocommitError",
    "AlreadyExists",
    "CommitError",
    "CommitOptions",
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
    "PermissionDenied",
    "PreconditionFailed",
    "Progress",
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
    "job_info",
    "list_jobs",
    "new_job_id",
    "open_store",
    "setup_job",
    "setup_task",
    "task_attempt",
]
