"""The exception tree of aiocommit.

::

    AiocommitError
    ├── InvalidInput                       (also a ValueError) a bad argument, option value,
    │   │                                   URL, job ID or path, refused before any work
    │   ├── UnknownOption(key, closest)     an option key that names no option
    │   ├── ReservedName                    a task's output path is one the layout keeps
    │   │                                   (``_SUCCESS``, ``_temporary``, ``__magic``)
    │   └── UnsupportedStore                (also a TypeError) the store lacks what the
    │                                       chosen committer needs (multipart uploads)
    ├── MissingExtra(extra)                (also an ImportError) a store adapter's packages
    │                                       are not installed; names the pip extra
    ├── StoreError(path, operation)        raised by store adapters, translated once at their edge
    │   ├── NotFound                        (also a FileNotFoundError)
    │   │   ├── JobNotFound(dest, job_id)   no such job at the destination: never set
    │   │   │                               up there (nothing was changed)
    │   │   └── ContainerNotFound(dest)     the destination's bucket (S3, GCS) or
    │   │                                   filesystem (ADLS) does not exist
    │   ├── AlreadyExists                   (also a FileExistsError): the path, or a file in the way
    │   ├── NotEmpty                        non-recursive delete of a non-empty directory
    │   ├── NotAFile                        a rename source is a directory or a link
    │   ├── PreconditionFailed              an etag / generation condition did not hold
    │   ├── PermissionDenied                (also a PermissionError)
    │   ├── Throttled(retry_after, maybe_applied) retryable: the store asked us to slow down
    │   └── Transient(maybe_applied)        retryable: the outcome of the call is unknown
    └── CommitError(stage, operation, path) a job or task commit failed; ``__cause__`` is why
        ├── ManifestError                   a manifest is malformed, of another job, or unsafe
        ├── OutputConflict                  two tasks, or an existing file, claim one destination
        └── LeaseError                      the destination's publish lease was lost, or
            │                               is unreadable
            └── UnfinishedCommit(job_id, lost)  a dead lease holder's commit can be neither
                                            finished nor undone exactly: the lease stays its

Retryability is data on the class (``retryable``), not a decision scattered through the
engine: the retry policy asks ``error.retryable`` and nothing else.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

import anyio


class AiocommitError(Exception):
    """Root of every error raised by aiocommit."""


class InvalidInput(AiocommitError, ValueError):
    """Bad input: an argument, option value, URL, job ID or path. Raised before any
    work starts, so nothing was changed."""


class ReservedName(InvalidInput):
    """A task attempt's output path names what the commit protocol keeps for itself
    (``_SUCCESS``, ``_temporary``, ``__magic``): refused at the write."""


class UnknownOption(InvalidInput):
    """A key under our prefixes that names no option; the message names the closest one."""

    def __init__(self, key: str, closest: str | None):
        hint = f"; did you mean {closest!r}?" if closest else ""
        super().__init__(f"unknown option {key!r}{hint}")
        self.key = key
        self.closest = closest


class UnsupportedStore(InvalidInput, TypeError):
    """The store lacks a capability the chosen committer needs (multipart uploads for the
    S3A committers); refused before any work."""


class MissingExtra(AiocommitError, ImportError):
    """A feature's packages are not installed; the message says which extra installs them
    (``pip install 'aiocommit[EXTRA]'``)."""

    def __init__(self, feature: str, extra: str, missing: str | None = None):
        found = f" ({missing} is not installed)" if missing else ""
        super().__init__(
            f"{feature} needs packages that are not installed{found}; install them with: "
            f"pip install 'aiocommit[{extra}]'",
            name=missing,
        )
        self.feature = feature
        self.extra = extra


class Unsupported(AiocommitError, RuntimeError):
    """The environment lacks what a feature needs (a pyspark or Hadoop version, a class on
    Spark's class path, Spark's default commit protocol); raised before any work, so
    nothing was changed. The message names what to use instead."""


class StoreError(AiocommitError):
    """A store operation failed.

    Attributes:
        path: the path the failure is about (for a rename, the path that was missing or
            in the way).
        operation: the store operation, e.g. ``"rename"``.
    """

    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, path: str | None = None, operation: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.operation = operation
        #: attempts the engine made before this error surfaced (set by the retry loop)
        self.attempts = 1
        #: seconds from the first attempt to giving up (set by the retry loop)
        self.retried_seconds = 0.0

    def __str__(self) -> str:
        where = []
        if self.operation:
            where.append(self.operation)
        if self.path:
            where.append(repr(self.path))
        text = f"{self.message} ({' '.join(where)})" if where else self.message
        return text + self.retry_note()

    def retry_note(self) -> str:
        """How the engine retried the call before this error surfaced ("" if it did not)."""
        if self.attempts <= 1:
            return ""
        if self.retryable:
            return (
                f"; retried, gave up after {self.attempts} attempts over "
                f"{self.retried_seconds:.1f} s"
            )
        return f"; on attempt {self.attempts}, {self.retried_seconds:.1f} s after the first"


class NotFound(StoreError, FileNotFoundError):
    """The path does not exist (for a rename: the source, or the destination's parent)."""


class JobNotFound(NotFound):
    """A job-side call named a job that was never set up at this destination (or that
    was aborted and cleaned up, or committed and cleaned up and then another job's
    ``_SUCCESS`` replaced its own): refused before anything changed."""

    def __init__(self, dest: str, job_id: str, *, operation: str | None = None):
        super().__init__(
            f"no job {job_id} at {dest} (never set up there, aborted and cleaned up, or "
            "committed and cleaned up before another job's _SUCCESS replaced its own): "
            f"check the job ID and the destination; `aiocommit jobs {dest}` lists its jobs",
            path=dest,
            operation=operation,
        )
        self.dest = dest
        self.job_id = job_id

    def __str__(self) -> str:
        return self.message + self.retry_note()


class ContainerNotFound(NotFound):
    """The destination's bucket (S3, GCS) or filesystem (ADLS) does not exist: the
    message names it (``bucket 'x' does not exist``); nothing was changed."""

    def __init__(self, dest: str, missing: str, *, operation: str | None = None):
        super().__init__(f"{dest}: {missing}", path=dest, operation=operation)
        self.dest = dest

    def __str__(self) -> str:
        return self.message


class AlreadyExists(StoreError, FileExistsError):
    """The path exists where it must not, or a file stands where a directory must go."""


class NotEmpty(StoreError):
    """A non-recursive delete met a directory that has children."""


class NotAFile(StoreError):
    """A rename's source is a directory or a symbolic link: only files are renamed."""


class PreconditionFailed(StoreError):
    """A conditional operation's etag or generation did not match."""


class PermissionDenied(StoreError, PermissionError):
    """The credential in use may not do this. Never retried."""


class Throttled(StoreError):
    """The store refused the call under load; retry after ``retry_after`` seconds if given.
    ``maybe_applied`` is true for an answer the store may send after doing the work (ADLS's
    ``500 OperationTimedOut``): a retry must expect it done."""

    retryable: ClassVar[bool] = True

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        operation: str | None = None,
        retry_after: float | None = None,
        maybe_applied: bool = False,
    ):
        super().__init__(message, path=path, operation=operation)
        self.retry_after = retry_after
        self.maybe_applied = maybe_applied


class Transient(StoreError):
    """A passing failure. ``maybe_applied`` is true when the call may have taken effect
    although no response arrived (a lost response), so a retry must expect that."""

    retryable: ClassVar[bool] = True

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        operation: str | None = None,
        maybe_applied: bool = True,
    ):
        super().__init__(message, path=path, operation=operation)
        self.maybe_applied = maybe_applied


class CommitError(AiocommitError):
    """A job or task commit failed.

    Names the stage (a Hadoop statistic name such as ``job_stage_rename_files``), the
    store operation and the path where it failed. The underlying error is ``__cause__``.
    """

    def __init__(
        self,
        message: str,
        *,
        stage: str | None = None,
        operation: str | None = None,
        path: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.operation = operation
        self.path = path

    def __str__(self) -> str:
        parts = [self.message]
        if self.stage:
            parts.append(f"stage={self.stage}")
        if self.operation:
            parts.append(f"operation={self.operation}")
        if self.path:
            parts.append(f"path={self.path!r}")
        return "; ".join(parts)


class ManifestError(CommitError):
    """A manifest is not valid JSON, truncated, of an unknown type or version, of another
    job, or names a path outside where it may."""


class PlanMismatch(ManifestError):
    """A manifest or pending set differs from the one the job's commit plan fixed when
    its commit started (a late task attempt): the commit cannot be finished, only
    aborted."""


class OutputConflict(CommitError):
    """Two tasks claim the same destination file, or the destination already holds a
    different file there and deleting target files is off."""


class LeaseError(CommitError):
    """The destination's publish lease (``DEST/_aiocommit.lease``) was lost while this
    job published (another job took it over after it expired), or cannot be read."""


class UnfinishedCommit(LeaseError):
    """Taking over the destination's lease, this job found a dead holder's commit past a
    change no abort can undo (a replace's old files deleted), and could not finish it
    (``__cause__`` is why). ``lost``: the store URLs of the old files an abort of it
    cannot restore. The lease is handed back to that job: no job publishes into the
    destination until the job's re-run finishes its commit or its abort gives it up."""

    def __init__(self, dest: str, job_id: str, lost: list[str], cause: BaseException):
        shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
        why = (
            f"an abort of it cannot restore {len(lost)} old file(s) its replace deleted ({shown})"
            if lost
            else "it had reached its commit point"
        )
        super().__init__(
            f"job {job_id}'s commit, left unfinished by its dead holder, cannot be finished "
            f"({cause}); {why}: commit job {job_id} again once the cause is fixed, or "
            f"`aiocommit abort {dest} --job-id {job_id}` to give it up (any files listed "
            "stay lost); then commit this job again",
            path=dest,
        )
        self.job_id = job_id
        self.lost = lost


def first_error(error: BaseException) -> BaseException:
    """The error to report for ``error``: itself, or for an exception group (a task
    group's failure, nested or not) its first leaf that is not a cancellation (the
    cancellations are the other tasks stopped because of it). Works in and outside an
    event loop."""
    if not isinstance(error, BaseExceptionGroup):
        return error
    leaves = [first_error(inner) for inner in error.exceptions]
    cancellations = _cancellations()
    for leaf in leaves:
        if not isinstance(leaf, cancellations):
            return leaf
    return leaves[0]


def _cancellations() -> tuple[type[BaseException], ...]:
    try:
        return (asyncio.CancelledError, anyio.get_cancelled_exc_class())
    except Exception:  # no event loop here: asyncio's is the one anyio would use
        return (asyncio.CancelledError,)
