"""aiocommit: an asyncio commit engine for Hadoop's committers: the Manifest Committer
protocol, and on S3 the S3A staging and magic committers.

One API on every store; the job's committer is chosen at ``setup_job`` from the store
(staging on S3, the manifest committer elsewhere) or ``CommitOptions.committer.name``. A
``Client`` opens the store once for all its jobs::

    async with Client("s3a://bucket/out") as client:
        job = await client.setup_job()
        attempt = await job.setup_task(0)
        await attempt.write_bytes("part-00000.csv", b"a,b\n")
        await job.commit_task(attempt)
        summary = await job.commit()

and the module's functions are shortcuts over a client made for one call::

    job_id = await setup_job("s3a://bucket/out")
    attempt = await setup_task("s3a://bucket/out", job_id, 0)
    await attempt.write_bytes("part-00000.csv", b"a,b\n")
    await commit_task(attempt)
    summary = await commit_job("s3a://bucket/out", job_id)

Every error it raises is an ``AiocommitError`` (see ``aiocommit.errors``).

The public names are loaded when first asked for (PEP 562), so ``import aiocommit``
(a rename worker, a Spark executor's Python worker, a service at start) costs only the
modules it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiocommit._version import VERSION as __version__
    from aiocommit.client.client import Client, Job
    from aiocommit.client.job import abort_job, cleanup_job, commit_job, setup_job
    from aiocommit.client.jobs import JobInfo, job_info, list_jobs
    from aiocommit.client.task import (
        TaskAttempt,
        abort_task,
        commit_task,
        committed_name,
        setup_task,
        task_attempt,
    )
    from aiocommit.committers.common.committer import AttemptFile, Committer
    from aiocommit.committers.common.context import Progress
    from aiocommit.errors import (
        AiocommitError,
        AlreadyExists,
        CommitError,
        ContainerNotFound,
        InvalidInput,
        JobNotFound,
        LeaseError,
        ManifestError,
        MissingExtra,
        NotAFile,
        NotEmpty,
        NotFound,
        OutputConflict,
        PermissionDenied,
        PreconditionFailed,
        ReservedName,
        StoreError,
        Throttled,
        Transient,
        UnknownOption,
        Unsupported,
    )
    from aiocommit.io.limits import Limits
    from aiocommit.options import CommitOptions
    from aiocommit.protocol.ids import new_job_id
    from aiocommit.protocol.manifest import TaskManifest
    from aiocommit.protocol.pending import PendingSet
    from aiocommit.protocol.success import SuccessData
    from aiocommit.stores import FileStatus, LocalStore, MemoryStore, Store, open_store

#: every public name: the module it comes from, and its name there
_EXPORTS: dict[str, tuple[str, str]] = {
    "AttemptFile": ("aiocommit.committers.common.committer", "AttemptFile"),
    "Committer": ("aiocommit.committers.common.committer", "Committer"),
    "Client": ("aiocommit.client.client", "Client"),
    "Job": ("aiocommit.client.client", "Job"),
    "Limits": ("aiocommit.io.limits", "Limits"),
    "abort_job": ("aiocommit.client.job", "abort_job"),
    "cleanup_job": ("aiocommit.client.job", "cleanup_job"),
    "commit_job": ("aiocommit.client.job", "commit_job"),
    "setup_job": ("aiocommit.client.job", "setup_job"),
    "JobInfo": ("aiocommit.client.jobs", "JobInfo"),
    "job_info": ("aiocommit.client.jobs", "job_info"),
    "list_jobs": ("aiocommit.client.jobs", "list_jobs"),
    "__version__": ("aiocommit._version", "VERSION"),
    "TaskAttempt": ("aiocommit.client.task", "TaskAttempt"),
    "abort_task": ("aiocommit.client.task", "abort_task"),
    "commit_task": ("aiocommit.client.task", "commit_task"),
    "committed_name": ("aiocommit.client.task", "committed_name"),
    "setup_task": ("aiocommit.client.task", "setup_task"),
    "task_attempt": ("aiocommit.client.task", "task_attempt"),
    "AiocommitError": ("aiocommit.errors", "AiocommitError"),
    "AlreadyExists": ("aiocommit.errors", "AlreadyExists"),
    "CommitError": ("aiocommit.errors", "CommitError"),
    "InvalidInput": ("aiocommit.errors", "InvalidInput"),
    "ContainerNotFound": ("aiocommit.errors", "ContainerNotFound"),
    "JobNotFound": ("aiocommit.errors", "JobNotFound"),
    "LeaseError": ("aiocommit.errors", "LeaseError"),
    "ManifestError": ("aiocommit.errors", "ManifestError"),
    "MissingExtra": ("aiocommit.errors", "MissingExtra"),
    "NotAFile": ("aiocommit.errors", "NotAFile"),
    "NotEmpty": ("aiocommit.errors", "NotEmpty"),
    "NotFound": ("aiocommit.errors", "NotFound"),
    "OutputConflict": ("aiocommit.errors", "OutputConflict"),
    "PermissionDenied": ("aiocommit.errors", "PermissionDenied"),
    "PreconditionFailed": ("aiocommit.errors", "PreconditionFailed"),
    "ReservedName": ("aiocommit.errors", "ReservedName"),
    "StoreError": ("aiocommit.errors", "StoreError"),
    "Throttled": ("aiocommit.errors", "Throttled"),
    "Transient": ("aiocommit.errors", "Transient"),
    "UnknownOption": ("aiocommit.errors", "UnknownOption"),
    "Unsupported": ("aiocommit.errors", "Unsupported"),
    "CommitOptions": ("aiocommit.options", "CommitOptions"),
    "new_job_id": ("aiocommit.protocol.ids", "new_job_id"),
    "TaskManifest": ("aiocommit.protocol.manifest", "TaskManifest"),
    "PendingSet": ("aiocommit.protocol.pending", "PendingSet"),
    "SuccessData": ("aiocommit.protocol.success", "SuccessData"),
    "Progress": ("aiocommit.committers.common.context", "Progress"),
    "FileStatus": ("aiocommit.stores", "FileStatus"),
    "LocalStore": ("aiocommit.stores", "LocalStore"),
    "MemoryStore": ("aiocommit.stores", "MemoryStore"),
    "Store": ("aiocommit.stores", "Store"),
    "open_store": ("aiocommit.stores", "open_store"),
}


if not TYPE_CHECKING:  # mypy sees the imports above, not an open-ended __getattr__

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = _EXPORTS[name]
        except KeyError:
            raise AttributeError(f"module 'aiocommit' has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """The public names and the module's own dunders (not its imports: ``Any``,
    ``TYPE_CHECKING``, ``importlib``, ``annotations``)."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


__all__ = [
    "AiocommitError",
    "AlreadyExists",
    "AttemptFile",
    "Client",
    "CommitError",
    "CommitOptions",
    "Committer",
    "ContainerNotFound",
    "FileStatus",
    "InvalidInput",
    "Job",
    "JobInfo",
    "JobNotFound",
    "LeaseError",
    "Limits",
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
    "ReservedName",
    "Store",
    "StoreError",
    "SuccessData",
    "TaskAttempt",
    "TaskManifest",
    "Throttled",
    "Transient",
    "UnknownOption",
    "Unsupported",
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
