"""The committer interface: what every committer does, job side and task side.

A committer is chosen once per job (``engine.factory``: from the store's capabilities and
the options, as Hadoop's ``PathOutputCommitterFactory`` does) and recorded with the job;
the top-level functions (``setup_job`` ... ``cleanup_job``, ``setup_task`` ...) open a
stage context and hand it to the job's committer. Each method gets an open
``StageContext`` for the job (the task methods: for the attempt's job).

====================  =====================================================
committer             how the output gets into place
====================  =====================================================
``manifest``          tasks write under their attempt directory; job commit
                      renames every file (Hadoop's ``ManifestCommitter``)
``staging``           tasks write local files, task commit uploads them as
                      uncompleted multipart uploads; job commit completes
                      them (Hadoop's ``DirectoryStagingCommitter``)
``partitioned``       staging, its conflict mode applied per partition
                      (``PartitionedStagingCommitter``)
``magic``             tasks stream each file as an uncompleted upload of its
                      final key (``MagicS3GuardCommitter``)
====================  =====================================================
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from aiocommit.committers.common.context import StageContext
from aiocommit.committers.common.session import open_context
from aiocommit.errors import CommitError
from aiocommit.options import CommitOptions
from aiocommit.protocol.ids import attempt_ids
from aiocommit.protocol.layout import JobLayout, check_output_name
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import PendingSet, magic_attempt_base
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store, join

#: the committers by name
COMMITTER_NAMES = ("manifest", "staging", "partitioned", "magic")

#: a file of a task attempt's output as its caller lists it (``commit_task``'s
#: ``written``): its path relative to the attempt's ``work_dir``, its size, and, when it
#: lands elsewhere than that same path below the destination, its path relative to the
#: destination (checked with ``check_output_name`` at task commit)
WrittenFile = tuple[str, int] | tuple[str, int, str]


def link_refused(path: str, *, operation: str | None = None) -> CommitError:
    """The error for a symbolic link in a task attempt's output (``path``): a task's
    output is the files it wrote, and a link is never followed."""
    return CommitError(
        "task output holds a symbolic link; links are refused: a task's output is the "
        "files under its attempt directory, never what a link points at",
        operation=operation,
        path=path,
    )


class AttemptFile(Protocol):
    """A file a task attempt is writing: bytes go in order; closing the ``open`` context
    finishes the file (an exception inside it discards what was written)."""

    async def write(self, data: bytes) -> None: ...


class Committer(Protocol):
    """One committer: the job side and the task side of one commit protocol."""

    @property
    def name(self) -> str:
        """``manifest``, ``staging``, ``partitioned`` or ``magic``."""
        ...

    def describe(self) -> dict[str, str]:
        """The committer's settings as the job record keeps them (``committer`` and, for
        the S3A committers, their ``fs.s3a.*`` settings)."""
        ...

    # -- job side

    async def setup_job(self, context: StageContext) -> None:
        """Create what the job's tasks need; the job is then active."""
        ...

    async def commit_job(
        self,
        context: StageContext,
        committed: Sequence[str] | None,
        *,
        delivered: Mapping[str, bytes] | None = None,
    ) -> SuccessData:
        """Put every committed task's output in place (``committed``: exactly these task
        records, manifests or pending sets, by name), write ``_SUCCESS``, clean up.
        ``delivered``: records of ``committed`` that tasks' commit messages carried
        instead of saving them (``commit_task(save=False)``; the manifest committer
        only). Re-runnable after a failure or a kill."""
        ...

    async def abort_job(self, context: StageContext, *, undo: bool) -> list[str]:
        """Undo an unfinished commit (``undo``), then remove the job's temporary data.
        Returns the old files a ``replace`` deleted that cannot be restored."""
        ...

    async def cleanup_job(self, context: StageContext) -> None:
        """Remove the job's temporary data; never committed output."""
        ...

    # -- task side

    async def setup_task(self, context: StageContext, attempt: TaskAttempt) -> TaskAttempt:
        """Prepare where the attempt writes; returns the attempt, completed."""
        ...

    async def write_bytes(
        self, context: StageContext, attempt: TaskAttempt, relative: str, data: bytes
    ) -> None:
        """Write one whole file of the attempt's output, to land at ``DEST/relative``."""
        ...

    def open(
        self, context: StageContext, attempt: TaskAttempt, relative: str
    ) -> AbstractAsyncContextManager[AttemptFile]:
        """A streaming writer of one file of the attempt's output."""
        ...

    async def write_file(
        self, context: StageContext, attempt: TaskAttempt, relative: str, local_path: str
    ) -> None:
        """Add the finished local file ``local_path`` to the attempt's output."""
        ...

    async def commit_task(
        self,
        context: StageContext,
        attempt: TaskAttempt,
        *,
        per_attempt: bool,
        written: Sequence[WrittenFile] | None = None,
        save: bool = True,
    ) -> TaskManifest | PendingSet:
        """Save the attempt's record (manifest or pending set): it is then committed.
        ``save=False`` (the manifest committer, ``per_attempt``): return it unsaved, for
        a caller that carries it to the job commit (``commit_job(delivered=...)``).
        ``per_attempt``: under the attempt's own name (``committed_name``) only, for a
        caller that picks the winning attempts itself (Spark). ``written``: every file
        of the attempt's output (``WrittenFile``: path relative to ``work_dir``, size,
        and where it lands if elsewhere), when the caller knows them: the manifest
        committer then lists nothing (the S3A committers know their uploads and ignore
        it)."""
        ...

    async def abort_task(self, context: StageContext, attempt: TaskAttempt) -> None:
        """Discard the attempt's output. Idempotent."""
        ...

    def committed_name(self, attempt: TaskAttempt, *, per_attempt: bool) -> str:
        """The name of the record ``commit_task`` saves, as ``commit_job`` takes it."""
        ...


@dataclass(frozen=True)
class TaskAttempt:
    """One attempt of one task: where it writes, and the IDs its record carries.

    ``dest`` is the destination's URL (so the attempt can be committed from another
    process); ``dest_path`` the same directory as a path of its store. Write the output
    with ``write_bytes`` or ``open``, whatever the committer; or, for tools that write
    files themselves, below ``work_dir``.
    """

    dest: str
    dest_path: str
    job_id: str
    task_id: str
    task_attempt_id: str
    job_attempt: int = 0
    #: the staging committer: the local directory holding the attempt's output; the
    #: manifest committer: a directory of the store its output shares with other
    #: attempts', each file under a name of its own (``Client``'s ``setup_task(
    #: shared_dir=...)``: the caller makes it, lists the files at commit and deletes
    #: them on abort)
    local_dir: str | None = None
    committer: Committer = field(kw_only=True, compare=False, repr=False)
    #: opens the attempt's stage context on the client that set it up (``Client``): its
    #: store, I/O layer and limits; None: each call opens its own. Not pickled: a client
    #: lives in its process
    session: AttemptSession | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["session"] = None
        return state

    @property
    def committer_name(self) -> str:
        return self.committer.name

    @property
    def layout(self) -> JobLayout:
        """The layout of the attempt's job, made at its first use (the attempt is
        immutable; its paths are asked for at every step)."""
        layout: JobLayout | None = self.__dict__.get("_layout")
        if layout is None:
            layout = JobLayout(self.dest_path, self.job_id, self.job_attempt)
            object.__setattr__(self, "_layout", layout)
        return layout

    @property
    def work_dir(self) -> str:
        """Where the attempt's output goes, with the layout it must have under the
        destination: the staging committer's local directory, else the attempt's
        directory in the store (a store path)."""
        if self.local_dir is not None:
            return self.local_dir
        return self.layout.task_attempt_dir(self.task_attempt_id)

    @property
    def magic_base(self) -> str:
        """Magic: the store directory whose ``REL`` lands at ``DEST/REL``."""
        return magic_attempt_base(self.layout, self.task_attempt_id)

    def path(self, relative: str) -> str:
        """The path (in the store, or local for staging) for output that will land at
        ``DEST/relative``. ``ReservedName`` for a name the protocol keeps
        (``_SUCCESS``, ``_temporary``, ``__magic...``)."""
        return join(self.work_dir, check_output_name(relative))

    async def write_bytes(
        self,
        relative: str,
        data: bytes,
        *,
        store: Store | None = None,
        options: CommitOptions | None = None,
    ) -> None:
        """Write a file of the attempt's output, to land at ``DEST/relative`` when the
        job commits (``store``: a client to use, not close; by default one is opened).
        ``ReservedName`` for a name the protocol keeps (``_SUCCESS``, ``_temporary``,
        ``__magic...``), before anything is written."""
        check_output_name(relative)
        async with open_attempt(self, store, options) as context:
            await self.committer.write_bytes(context, self, relative, data)

    async def write_file(
        self,
        relative: str,
        local_path: str,
        *,
        store: Store | None = None,
        options: CommitOptions | None = None,
    ) -> None:
        """Add a finished local file to the attempt's output, to land at
        ``DEST/relative`` (uploaded, or linked into a staging attempt's directory).
        ``ReservedName`` for a name the protocol keeps, before anything is written."""
        check_output_name(relative)
        async with open_attempt(self, store, options) as context:
            await self.committer.write_file(context, self, relative, local_path)

    @asynccontextmanager
    async def open(
        self,
        relative: str,
        *,
        store: Store | None = None,
        options: CommitOptions | None = None,
    ) -> AsyncIterator[AttemptFile]:
        """Stream a file of the attempt's output: ``async with attempt.open(rel) as f:
        await f.write(chunk)``. The file is finished when the block ends; an exception
        discards it. ``ReservedName`` for a name the protocol keeps, before anything is
        written."""
        check_output_name(relative)
        async with (
            open_attempt(self, store, options) as context,
            self.committer.open(context, self, relative) as file,
        ):
            yield file


def name_attempt(
    dest: str,
    dest_path: str,
    job_id: str,
    task: str | int,
    attempt: int | str,
    *,
    job_attempt: int,
    committer: Committer,
) -> TaskAttempt:
    """Name a task attempt of ``committer``'s job (``task``: a task ID or a partition
    number, giving a Hadoop style ID; ``attempt``: a number or a full attempt ID)."""
    task_id, attempt_id = attempt_ids(job_id, task, attempt)
    return TaskAttempt(
        dest, dest_path, job_id, task_id, attempt_id, job_attempt, committer=committer
    )


#: opens an attempt's stage context with these options (None: the opener's own)
AttemptSession = Callable[
    [TaskAttempt, CommitOptions | None], AbstractAsyncContextManager[StageContext]
]


def open_attempt(
    attempt: TaskAttempt, store: Store | None, options: CommitOptions | None
) -> AbstractAsyncContextManager[StageContext]:
    """The stage context of an attempt's job, for the attempt: on ``store`` when given,
    else on the attempt's client (``session``), else on a store opened from its URL."""
    if store is None and attempt.session is not None:
        return attempt.session(attempt, options)
    return open_context(
        attempt.dest if store is None else attempt.dest_path,
        attempt.job_id,
        attempt=attempt.job_attempt,
        store=store,
        options=options,
        task_attempt_id=attempt.task_attempt_id,
    )
