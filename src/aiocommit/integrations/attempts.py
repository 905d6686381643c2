"""Attempts that travel: a task attempt handed to another process or machine as a small
picklable ``AttemptHandle``, opened there with blocking calls (engine workers run no
event loop of their own), written through and committed.

The driver sets the job up and makes one ``AttemptHandle`` per task (``EngineJob``);
each worker opens its handle (``handle.open()``: a ``WorkerAttempt``), writes its files
through it (``write_bytes``, ``write_file``, ``open(name, "wb")`` for writers that take a
file object, ``arrow_filesystem()`` for Arrow's writers), and commits it under the
attempt's own name (``commit()``, which returns the task record's name). The driver
then commits the job over exactly the names the engine returned (``EngineJob.commit``):
a failed or killed attempt returns nothing, and whatever it wrote is never committed.

A handle holds the destination, the job ID, the task, the attempt number, the job's
committer and the commit options as text (``CommitOptions.as_record``: store settings
such as ``fs.s3a.endpoint``, never credentials, which options refuse); workers find
credentials in their own environment.

Contract: every blocking call here runs on the process's task loop (``task_loop``) and
must not be made from a thread that runs an event loop itself. The exception is an
attempt of the manifest committer on the local filesystem, whose steps (set-up, commit,
abort) are a few system calls: it runs them on the worker thread's own loop
(``run_in_thread_loop``), without a hop to the task loop's thread and back for each; its
files are written by the writer itself, straight into the directory the job attempt's
local attempts share (``tasks/shared-attempts``: no directory made per attempt), each
under a name of the attempt's own, and its commit says where each lands.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import logging
import os
import secrets
import shutil
import stat
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TypeVar

from aiocommit.client.client import Client
from aiocommit.client.task import TaskAttempt, committed_name
from aiocommit.committers.common.committer import Committer, WrittenFile, link_refused
from aiocommit.committers.factory import job_committer
from aiocommit.errors import AiocommitError, InvalidInput
from aiocommit.integrations.task_loop import run_in_task_loop, run_in_thread_loop, task_portal
from aiocommit.options import CommitOptions
from aiocommit.protocol.layout import (
    MESSAGE_RECORDS_MARKER,
    SHARED_ATTEMPTS_DIR,
    JobLayout,
    check_output_name,
    shared_file_prefix,
)
from aiocommit.protocol.manifest import TaskManifest, encode_manifest
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import join
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.registry import is_local_url

if TYPE_CHECKING:
    import pyarrow.fs

    from aiocommit.committers.common.committer import AttemptFile

T = TypeVar("T")


class Runner(Protocol):
    """Runs ``await fn()`` to its end from a blocking caller (``run_in_task_loop``,
    ``run_in_thread_loop``)."""

    def __call__(self, fn: Callable[[], Awaitable[T]], /) -> T: ...


logger = logging.getLogger(__name__)

#: the write modes of the engine integrations, and the conflict mode each commits with
#: (``replace_partitions``: the conflict mode applies to each partition directory written)
MODES: dict[str, tuple[str, bool]] = {
    "error": ("fail", False),
    "append": ("append", False),
    "overwrite": ("replace", False),
    "overwrite_partitions": ("replace", True),
}


def check_mode(mode: str) -> str:
    """``mode``, if it is one of ``MODES``; else ``InvalidInput``."""
    if mode not in MODES:
        raise InvalidInput(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


#: the option prefix of the test-only fault hooks (``WriterHooks``)
TEST_PREFIX = "aiocommit.test."
#: how many jobs' parsed options a process keeps (``AttemptHandle.commit_options``)
KEPT_PARSED_OPTIONS = 64
#: the buffer of a file object opened by ``WorkerAttempt.open`` (writes below it are
#: gathered before they cross to the task loop)
FILE_BUFFER_BYTES = 8 * 1024 * 1024
#: the largest manifest a commit message carries (``WorkerAttempt.commit_message``); a
#: larger one is saved as a file and the message names it: an engine's driver holds
#: every task's message at once, where a job commit loads files a bounded number at a time
MESSAGE_MANIFEST_BYTES = 1 << 20
#: an attempt listing more files than this saves its manifest without building it for a
#: message first (about ``MESSAGE_MANIFEST_BYTES`` of entries)
MESSAGE_MANIFEST_FILES = 2048
#: a name prefix kept for the attempt's own files (``WorkerAttempt.placed_name``): a
#: writer may not use it
PLACED_PREFIX = ".aiocommit-placed-"


@dataclass(frozen=True)
class WriterHooks:
    """TEST-ONLY fault hooks, set by options under ``aiocommit.test.`` and carried by the
    handle. Never use them on real data: they make attempts fail on purpose.

    * ``aiocommit.test.exitOnceDir=DIR`` (a local directory every worker sees): an attempt
      of task N that finds no ``DIR/N`` creates it once it wrote its files, then its
      process exits at once (``os._exit``, no ``finally`` runs), before its commit.
    * ``aiocommit.test.failOnceDir=DIR``: the same, but the attempt raises instead (for
      engines whose tasks share the test's process).
    * ``aiocommit.test.failTask=N``: every attempt of task N writes its files, then raises
      instead of committing.
    """

    __test__ = False  # not a pytest class

    exit_once_dir: str | None = None
    fail_once_dir: str | None = None
    fail_task: int | None = None

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> WriterHooks:
        lowered = {str(k).lower(): str(v) for k, v in options.items()}
        fail = lowered.get(TEST_PREFIX + "failtask")
        return cls(
            exit_once_dir=lowered.get(TEST_PREFIX + "exitoncedir"),
            fail_once_dir=lowered.get(TEST_PREFIX + "failoncedir"),
            fail_task=int(fail) if fail is not None else None,
        )

    def before_commit(self, task: int | str) -> None:
        """Run the hooks due once an attempt of ``task`` wrote its files."""
        if self.exit_once_dir is not None and _first_time(self.exit_once_dir, task):
            os._exit(17)
        if self.fail_once_dir is not None and _first_time(self.fail_once_dir, task):
            raise InjectedTaskFailure(f"task {task} fails once on purpose (failOnceDir)")
        if self.fail_task is not None and str(self.fail_task) == str(task):
            raise InjectedTaskFailure(f"task {task} fails on purpose (aiocommit.test.failTask)")


def _first_time(directory: str, task: int | str) -> bool:
    """Whether this is the first call for ``task`` (a marker file in ``directory``)."""
    try:
        os.close(os.open(os.path.join(directory, str(task)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class InjectedTaskFailure(AiocommitError):
    """A test hook failed the attempt on purpose."""


@dataclass(frozen=True)
class AttemptHandle:
    """A task attempt to open in another process: picklable, holding no credentials.

    ``attempt``: the attempt's number, unique to each execution of the task (``retry()``
    gives the next one); ``options``: the commit options as text (``as_record``)."""

    dest: str
    job_id: str
    task: int | str
    attempt: int
    committer: str
    options: Mapping[str, str] = field(default_factory=dict)
    job_attempt: int = 0
    hooks: WriterHooks = field(default_factory=WriterHooks)

    def commit_options(self) -> CommitOptions:
        """The options the attempt opens with (the job's committer named). Parsed once
        per process for each record and committer (options are immutable values)."""
        return _parsed_options(tuple(sorted(self.options.items())), self.committer)

    def retry(self) -> AttemptHandle:
        """The same task's handle for a new execution: a new random attempt number, so
        two executions never share an attempt directory."""
        return replace(self, attempt=new_attempt_number())

    def runs_in_caller_thread(self) -> bool:
        """Whether the attempt's steps run on the calling thread's own loop (the module
        docstring): the manifest committer on the local filesystem, called from a thread
        that runs no event loop."""
        if self.committer != "manifest" or not is_local_url(self.dest):
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return True
        return False

    def for_task(self, task: int | str) -> AttemptHandle:
        """The handle of another task of the same job (a new attempt number)."""
        return replace(self, task=task, attempt=new_attempt_number())

    @contextmanager
    def open(self) -> Iterator[WorkerAttempt]:
        """Set the attempt up on its store and yield it; on an exception the attempt is
        aborted (its files discarded; a failing abort is logged, the job's abort removes
        them) and the exception goes on. Blocking."""
        if self.runs_in_caller_thread():
            opened = run_in_thread_loop(_open_attempt, self, run_in_thread_loop)
        else:
            opened = run_in_task_loop(_open_attempt, self, run_in_task_loop)
        try:
            yield opened
        except BaseException:
            try:
                opened._call(opened._job_abort_task)
            except Exception:  # the task's own error is the one to raise
                logger.warning("could not abort task attempt %s", opened.attempt.task_attempt_id)
            finally:
                opened.close()
            raise
        opened.close()


@functools.lru_cache(maxsize=KEPT_PARSED_OPTIONS)
def _parsed_options(record: tuple[tuple[str, str], ...], committer: str) -> CommitOptions:
    """``CommitOptions.from_record(record)`` with ``committer`` named (parsing and
    checking every key costs about as much as a local task attempt's set-up)."""
    return CommitOptions.from_record(dict(record)).with_values(committer=committer)


def new_attempt_number() -> int:
    """A random attempt number (engines do not say which retry a task is)."""
    return secrets.randbelow(1 << 30)


#: the committers of the jobs this process's tasks wrote for, newest last: the next task
#: of a job needs not read the job's record (committers are immutable values)
_job_committers: dict[tuple[str, str, int], Committer] = {}
#: how many jobs' committers a process keeps
KEPT_COMMITTERS = 64
#: the store clients this process's task attempts write through, by event loop,
#: destination and options, newest last: an engine worker runs task after task of a
#: job, and each one opening and closing a client of its own would pay for it every time
_worker_clients: dict[
    tuple[asyncio.AbstractEventLoop, str, str, tuple[tuple[str, str], ...]], Client
] = {}
#: how many store clients a process keeps open (the oldest is closed beyond it)
KEPT_CLIENTS = 8
#: the process ``_worker_clients`` belong to: a forked child (a Spark Python worker)
#: starts a task loop of its own, where its parent's clients do not work
_clients_pid = os.getpid()
#: guards ``_worker_clients`` and ``_job_committers``: a worker's threads each run their
#: attempts on a loop of their own (``run_in_thread_loop``), at the same time
_caches_lock = threading.Lock()


def engine_client(dest: str, options: CommitOptions) -> Client:
    """A client of ``dest`` for an engine's steps (a task attempt's, the driver's job
    set-up, commit and abort). On the local filesystem its metadata calls and small
    reads and writes (manifests, records, markers) run on the event loop itself
    (``LocalStore(inline_metadata=True)``): a thread hop per call would cost more than
    the call, and a job commit reads a manifest per task. Job commit's rename workers,
    in other processes, open a plain local store."""
    if is_local_url(dest):
        return Client(
            dest, options=options, store=LocalStore(inline_metadata=True), reopen=LocalStore
        )
    return Client(dest, options=options)


async def _worker_client(handle: AttemptHandle) -> tuple[Client, bool]:
    """The process's open client for ``handle``'s destination and options, and whether
    it is kept open for the next attempts (``KEPT_CLIENTS``; not the client of a store
    that lives in this process only, such as ``memory://``, which a newer store of the
    same name replaces). On the local filesystem its metadata calls (stat, mkdirs,
    rename) run on the event loop itself (``engine_client``)."""
    global _clients_pid
    key = (
        asyncio.get_running_loop(),
        handle.dest,
        handle.committer,
        tuple(sorted(handle.options.items())),
    )
    with _caches_lock:
        if _clients_pid != os.getpid():
            _worker_clients.clear()  # the parent's, bound to the parent's loops
            _clients_pid = os.getpid()
        client = _worker_clients.pop(key, None)
    if client is None or client.closed:
        client = engine_client(handle.dest, handle.commit_options())
        if isinstance(client.store, MemoryStore):
            return client, False
    with _caches_lock:
        _worker_clients[key] = client
        evicted = [
            (oldest, _worker_clients.pop(oldest))
            for oldest in list(_worker_clients)[: len(_worker_clients) - KEPT_CLIENTS]
        ]
    for (loop, *_), old in evicted:
        if isinstance(old.store, LocalStore):
            # dropped, not closed: another thread's attempt may still write through it,
            # and closing a kept local client (its store not its own) frees nothing
            continue
        if loop is asyncio.get_running_loop():
            await old.aclose()
        elif loop.is_running():  # the task loop's client: closed there
            asyncio.run_coroutine_threadsafe(old.aclose(), loop)
    return client, True


#: the shared directories this process made or found, of its process ID
_shared_dirs: set[str] = set()
_shared_dirs_pid = os.getpid()


def _shared_dir_path(client: Client, handle: AttemptHandle) -> str | None:
    """The directory a local manifest attempt's files go to: one per job attempt
    (``SHARED_ATTEMPTS_DIR``), shared by its attempts, each file under a name of the
    attempt's own (``WorkerAttempt.placed_name``), so an attempt makes no directory, and
    job commit's clean-up deletes one instead of one per task. None for other
    attempts."""
    if handle.committer != "manifest" or not isinstance(client.store, LocalStore):
        return None
    layout = JobLayout(client.path, handle.job_id, handle.job_attempt)
    return os.path.join(layout.tasks_dir, SHARED_ATTEMPTS_DIR)


def _make_shared_dir(shared: str) -> None:
    """``shared`` made if missing, once per process (a forked child checks again)."""
    global _shared_dirs_pid
    with _caches_lock:
        if _shared_dirs_pid != os.getpid():
            _shared_dirs.clear()
            _shared_dirs_pid = os.getpid()
        if shared in _shared_dirs:
            return
    os.makedirs(shared, exist_ok=True)
    with _caches_lock:
        if len(_shared_dirs) >= KEPT_COMMITTERS:
            _shared_dirs.clear()  # made again (found) at the next attempt that needs it
        _shared_dirs.add(shared)


async def _open_attempt(handle: AttemptHandle, run: Runner) -> WorkerAttempt:
    client, kept = await _worker_client(handle)
    key = (handle.dest, handle.job_id, handle.job_attempt)
    job = client.job(handle.job_id, attempt=handle.job_attempt)
    with _caches_lock:
        known = _job_committers.get(key)
    try:
        shared = _shared_dir_path(client, handle)
        attempt = await job.setup_task(
            handle.task, handle.attempt, committer=known, shared_dir=shared
        )
        if shared is not None:  # made once the job is known to be active
            _make_shared_dir(shared)
    except BaseException:
        if not kept:
            await client.aclose()
        raise
    if known is None:
        with _caches_lock:
            _job_committers[key] = attempt.committer
            while len(_job_committers) > KEPT_COMMITTERS:
                del _job_committers[next(iter(_job_committers))]
    return WorkerAttempt(handle, client, attempt, attempt.local_dir, owns_client=not kept, run=run)


class WorkerAttempt:
    """An opened task attempt, in a worker: blocking writes through the job's committer
    (to the attempt directory, the staging directory or a pending multipart upload), then
    ``commit()``. Made by ``AttemptHandle.open``; one thread at a time per file, any
    number of files at once."""

    def __init__(
        self,
        handle: AttemptHandle,
        client: Client,
        attempt: TaskAttempt,
        local_dir: str | None = None,
        *,
        owns_client: bool = True,
        run: Runner = run_in_task_loop,
    ):
        self.handle = handle
        #: how the attempt's steps run: on the task loop, or on the caller's thread's own
        #: loop (``AttemptHandle.runs_in_caller_thread``), where ``client`` is bound
        self._run = run
        self._owns_client = owns_client
        self.attempt = attempt
        self._client = client
        #: the local directory the attempt's files go below, when it has one (the staging
        #: committer's; the manifest committer's on the local filesystem): files are
        #: written there directly, at the writer's own speed
        self.local_dir = local_dir
        #: the files written through the store, by name below the destination, with
        #: their sizes (files written below ``local_dir`` are not counted)
        self.written: dict[str, int] = {}
        #: whether ``local_dir`` is the manifest committer's directory shared with other
        #: attempts (``_shared_dir_path``): every file is then written at its top under a
        #: name of this attempt's own (``placed_name``), only those are this attempt's,
        #: and the commit is told where each lands
        self.shares_dir = local_dir is not None and attempt.committer_name == "manifest"
        #: destination name -> name below ``local_dir``, of the files ``placed_name`` put
        #: at its top
        self._placed: dict[str, str] = {}
        self._placed_lock = threading.Lock()

    def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        return self._run(fn)

    async def _job_abort_task(self) -> None:
        await self._client.job(self.handle.job_id, attempt=self.handle.job_attempt).abort_task(
            self.attempt
        )
        if self.shares_dir and self.local_dir is not None:
            for local in self.placed().values():  # the directory is not this attempt's
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.local_dir, local))

    def _wrote(self, name: str, size: int) -> None:
        self.written[name] = size

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write a file that lands at ``DEST/name`` when the job commits."""
        if self.shares_dir:
            with self.open(name) as file:
                file.write(data)
            return
        self._call(lambda: self.attempt.write_bytes(name, data))
        self._wrote(name, len(data))

    def write_file(self, name: str, local_path: str) -> None:
        """Add a finished local file (DuckDB's ``COPY ... TO``, any tool's output) to land
        at ``DEST/name``."""
        if self.shares_dir and self.local_dir is not None:
            shutil.copyfile(local_path, os.path.join(self.local_dir, self.placed_name(name)))
            return
        size = os.path.getsize(local_path)
        self._call(lambda: self.attempt.write_file(name, local_path))
        self._wrote(name, size)

    def open(self, name: str, mode: str = "wb") -> BinaryIO:
        """A binary file object writing ``DEST/name`` (Polars' ``write_parquet``,
        ``write_csv``, pyarrow's ``write_table``): the file is finished when it is closed,
        and discarded if the attempt is aborted first. Only mode ``"wb"``."""
        if mode != "wb":
            raise InvalidInput(f'an attempt opens files for writing only (mode "wb"), not {mode!r}')
        if self.local_dir is not None:
            path = os.path.join(self.local_dir, self.placed_name(name))
            try:  # most files go straight into the attempt's directory, which exists
                return open(path, "wb", buffering=FILE_BUFFER_BYTES)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                return open(path, "wb", buffering=FILE_BUFFER_BYTES)
        raw = _AttemptRawFile(self, name)
        return io.BufferedWriter(raw, buffer_size=FILE_BUFFER_BYTES)

    def placed_name(self, name: str) -> str:
        """Where below ``local_dir`` the file landing at ``DEST/name`` is written: ``name``
        itself, or, when the attempt ``shares_dir``, a file at the top of ``local_dir``
        under a name of this attempt's own (the same one for the same ``name``): no
        subdirectories, each a ``mkdir`` in the task and an ``rmdir`` at the job's
        clean-up (Hive-style partitions: one per value).
        ``ReservedName`` for a name the protocol keeps; ``InvalidInput`` for a name
        starting ``PLACED_PREFIX``."""
        name = check_output_name(name.strip("/"))
        if name.startswith(PLACED_PREFIX):
            raise InvalidInput(f"task output {name!r}: {PLACED_PREFIX}* is the attempt's own")
        if not self.shares_dir:
            return name
        with self._placed_lock:
            local = self._placed.get(name)
            if local is None:
                prefix = shared_file_prefix(self.attempt.task_attempt_id)
                local = f"{prefix}{len(self._placed)}-{name.rpartition('/')[2]}"
                self._placed[name] = local
        return local

    def placed(self) -> dict[str, str]:
        """``placed_name``'s files so far: destination name -> name below ``local_dir``."""
        with self._placed_lock:
            return dict(self._placed)

    def arrow_filesystem(self) -> pyarrow.fs.FileSystem:
        """An Arrow filesystem whose root is the destination: files written through it
        land at ``DEST/path`` when the job commits (``pyarrow.dataset.write_dataset(table,
        "", filesystem=...)``, ``pq.write_table(table, "x.parquet", filesystem=...)``).
        With a ``local_dir``, Arrow's own local filesystem below it."""
        from aiocommit.integrations.arrow import attempt_filesystem

        return attempt_filesystem(self)

    def commit(self) -> str:
        """Commit the attempt under its own name; the task record's name, which
        ``EngineJob.commit`` takes."""

        self.handle.hooks.before_commit(self.handle.task)

        written = self._local_files() if self.attempt.committer_name == "manifest" else None

        async def commit() -> str:
            job = self._client.job(self.handle.job_id, attempt=self.handle.job_attempt)
            await job.commit_task(self.attempt, per_attempt=True, written=written)
            return committed_name(self.attempt, per_attempt=True)

        return self._call(commit)

    def commit_message(self) -> TaskCommitMessage:
        """Commit the attempt for an engine that returns the result to the job commit
        (Ray's ``Datasink``, Dask's graph): the manifest committer's manifest travels in
        the message, and no file is saved for it (``docs/protocol.md``, "Manifests
        carried by commit messages"); the S3A committers' pending sets are saved as by
        ``commit``. ``EngineJob.commit`` takes the message."""
        if self.attempt.committer_name != "manifest":
            return TaskCommitMessage(self.commit())

        self.handle.hooks.before_commit(self.handle.task)
        written = self._local_files()
        name = committed_name(self.attempt, per_attempt=True)

        async def commit() -> TaskCommitMessage:
            job = self._client.job(self.handle.job_id, attempt=self.handle.job_attempt)
            if written is None or len(written) <= MESSAGE_MANIFEST_FILES:
                manifest = await job.commit_task(
                    self.attempt, per_attempt=True, written=written, save=False
                )
                assert isinstance(manifest, TaskManifest)
                data = encode_manifest(manifest)
                if len(data) <= MESSAGE_MANIFEST_BYTES:
                    return TaskCommitMessage(name, data)
            # a large manifest is saved as a file: the driver holds every message at once
            await job.commit_task(self.attempt, per_attempt=True, written=written)
            return TaskCommitMessage(name)

        return self._call(commit)

    def _local_files(self) -> list[WrittenFile] | None:
        """Every file of this attempt in the shared ``local_dir`` (its name there, size,
        and where it lands), which the manifest committer then need not list through the
        store; None for an attempt that shares no directory. A link among them is
        refused (``CommitError``), as the store's scan refuses one."""
        if not self.shares_dir or self.local_dir is None:
            return None
        found: list[WrittenFile] = []
        for name, local in self.placed().items():
            path = os.path.join(self.local_dir, local)
            try:
                status = os.lstat(path)
            except FileNotFoundError:  # its writer failed to open it: not one of them
                continue
            if stat.S_ISLNK(status.st_mode):
                raise link_refused(path)
            found.append((local, status.st_size, name))
        return found

    def close(self) -> None:
        """Done with the attempt (idempotent): its store client is closed, unless the
        process keeps it for its next attempts (``KEPT_CLIENTS``)."""
        if self._owns_client and not self._client.closed:
            self._call(self._client.aclose)


class _AttemptRawFile(io.RawIOBase):
    """The unbuffered file object under ``WorkerAttempt.open``: each write crosses to the
    task loop and goes to the committer's ``AttemptFile``; closing finishes the file."""

    def __init__(self, owner: WorkerAttempt, name: str):
        super().__init__()
        if owner._run is not run_in_task_loop:  # such attempts write in their directory
            raise InvalidInput("an attempt run on its caller's thread streams no files")
        self._owner = owner
        self._name = name
        self._position = 0
        self._context: AbstractContextManager[AttemptFile] = (
            task_portal().wrap_async_context_manager(owner.attempt.open(name))
        )
        self._file = self._context.__enter__()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        run_in_task_loop(self._file.write, chunk)
        self._position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        if self.closed:
            return
        super().close()
        self._context.__exit__(None, None, None)
        self._owner._wrote(self._name, self._position)


@dataclass(frozen=True)
class TaskCommitMessage:
    """What a committed task attempt returns through its engine to the job commit
    (``WorkerAttempt.commit_message``): the task record's name and, for the manifest
    committer, the manifest itself (encoded; no file holds it), else None (the record
    is a saved file). The job commit checks a carried manifest as one read from a file:
    of this job, naming only its own attempt's files."""

    name: str
    manifest: bytes | None = None


#: a task's result as ``EngineJob.commit`` takes it: a message, or a saved record's name
TaskResult = TaskCommitMessage | str


def split_results(results: Sequence[TaskResult]) -> tuple[list[str], dict[str, bytes]]:
    """The task records' names, and the manifests the messages carried by name."""
    names: list[str] = []
    delivered: dict[str, bytes] = {}
    for result in results:
        if isinstance(result, str):
            names.append(result)
            continue
        names.append(result.name)
        if result.manifest is not None:
            delivered[result.name] = result.manifest
    return names, delivered


@dataclass(frozen=True)
class EngineJob:
    """One engine write's job, on the driver: set up, its tasks' handles, then commit
    over exactly the task records the engine returned, or abort."""

    dest: str
    job_id: str
    committer: str
    options: CommitOptions
    hooks: WriterHooks = field(default_factory=WriterHooks)

    @classmethod
    def setup(
        cls, dest: str, *, mode: str = "error", options: Mapping[str, Any] | None = None
    ) -> EngineJob:
        """Set a job up for a write in ``mode`` (``MODES``); ``options``: commit options
        by any of their names, and the test hooks. Blocking. With the manifest committer
        the job is marked as one whose manifests travel in commit messages
        (``MESSAGE_RECORDS_MARKER``): a job commit without them is refused."""
        conflict, per_partition = MODES[check_mode(mode)]
        given = dict(options or {})
        commit_options = CommitOptions.from_mapping(
            given,
            handled_prefixes=(TEST_PREFIX,),
            conflict_mode=conflict,
            replace_partitions=per_partition,
        )

        async def setup() -> EngineJob:
            async with engine_client(dest, commit_options) as client:
                job = await client.setup_job()
                async with job.context() as context:
                    committer = (await job_committer(context, context.options)).name
                    if committer == "manifest":  # its tasks' manifests travel in messages
                        marker = join(context.layout.manifests_dir, MESSAGE_RECORDS_MARKER)
                        await context.ops.write_bytes(marker, b"")
            return cls(dest, job.job_id, committer, commit_options, WriterHooks.from_mapping(given))

        return _on_driver(setup)

    def handle(self, task: int | str) -> AttemptHandle:
        """The handle of ``task``'s first attempt (``AttemptHandle.retry`` for others)."""
        return AttemptHandle(
            self.dest,
            self.job_id,
            task,
            new_attempt_number(),
            self.committer,
            self._options_record,
            hooks=self.hooks,
        )

    @functools.cached_property
    def _options_record(self) -> Mapping[str, str]:
        """``options.as_record()``, made once per job (a worker makes a handle per task)."""
        return self.options.as_record()

    def commit(self, task_records: Sequence[TaskResult]) -> SuccessData:
        """Commit the job over exactly ``task_records`` (``WorkerAttempt.commit``'s
        names, ``commit_message``'s messages). Re-runnable with the same ones."""
        return _on_driver(lambda: commit_engine_job(self.handle(0), list(task_records)))

    def abort(self) -> None:
        """Abort the job: nothing of it is visible, the old output untouched."""

        async def abort() -> None:
            async with engine_client(self.dest, self.options) as client:
                await client.job(self.job_id).abort()

        _on_driver(abort)


async def commit_engine_job(
    handle: AttemptHandle, task_records: Sequence[TaskResult]
) -> SuccessData:
    """Commit ``handle``'s job over exactly ``task_records`` (anywhere: the driver or a
    worker of the engine). Re-runnable after a kill, with the same records (or with
    none, once the commit saved its plan: the plan holds the carried manifests)."""
    names, delivered = split_results(task_records)
    async with engine_client(handle.dest, handle.commit_options()) as client:
        return await client.job(handle.job_id, attempt=handle.job_attempt).commit(
            task_records=names, delivered=delivered
        )


def commit_job_blocking(handle: AttemptHandle, task_records: Sequence[TaskResult]) -> SuccessData:
    """``commit_engine_job`` from a worker's thread."""
    return run_in_task_loop(commit_engine_job, handle, list(task_records))


def _on_driver(fn: Callable[[], Awaitable[T]]) -> T:
    """Run a driver step on the task loop (the caller's thread may run a loop of its
    own: a notebook; the task loop is another thread)."""
    return run_in_task_loop(fn)
