"""``Client``: one destination's store, I/O limits and jobs, opened once.

In the style of httpx's ``AsyncClient``::

    async with aiocommit.Client("s3a://bucket/out", options=options) as client:
        job = await client.setup_job()
        attempt = await job.setup_task(0)
        await attempt.write_bytes("part-00000.csv", b"a,b\\n")
        await job.commit_task(attempt)
        summary = await job.commit()

The client opens the store once (on S3: one aiobotocore client and connection pool) and
holds the limits every job of it shares (``Limits``: the in-flight limit and the
configured rates; ``Client(..., limits=other.limits)`` shares them between clients).
Each job operation gets its own stage context and statistics on that store. The
loop-sharing runtime is the running loop's (``runtime``: one per event loop, shared by
every client on it, since a loop has one budget to share). The module-level functions
(``setup_job`` ...) are shortcuts over a client made for one call. ``async with``
closes what the client opened, however the block ends; a closed client refuses use
(``InvalidInput``).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import TypeVar

import anyio

from aiocommit.client.inventory import JobInfo, job_in, jobs_in
from aiocommit.committers.common.cleanup import remove_if_empty
from aiocommit.committers.common.committer import (
    Committer,
    TaskAttempt,
    WrittenFile,
    name_attempt,
)
from aiocommit.committers.common.context import ProgressCallback, StageContext
from aiocommit.committers.common.session import open_context, open_operations
from aiocommit.committers.factory import (
    choose_committer,
    earlier_committer,
    find_job,
    job_committer,
    save_committer,
)
from aiocommit.errors import InvalidInput, NotEmpty, NotFound
from aiocommit.io.limits import Limits, host_loop_in_flight
from aiocommit.io.operations import StoreOperations
from aiocommit.observability import watch_in_flight
from aiocommit.options import CommitOptions
from aiocommit.protocol.ids import new_job_id
from aiocommit.protocol.layout import TEMPORARY
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import PendingSet
from aiocommit.protocol.success import SuccessData
from aiocommit.runtime.heap import release_free_memory
from aiocommit.runtime.runtime import Runtime
from aiocommit.runtime.runtime import current as current_runtime
from aiocommit.stores.base import Store, StoreOpener, join, opener_of
from aiocommit.stores.registry import open_store, reopen_url

_T = TypeVar("_T")


def renamed(old: str, old_value: _T | None, new: str, new_value: _T, default: _T) -> _T:
    """``new_value``, or the value given under the parameter's old name (with a
    ``DeprecationWarning``); both given (the new one not its ``default``) is refused."""
    if old_value is None:
        return new_value
    if new_value != default:
        raise InvalidInput(f"give {new}= only ({old}= is its deprecated name)")
    warnings.warn(f"{old}= is deprecated: use {new}=", DeprecationWarning, stacklevel=3)
    return old_value


class Client:
    """The store of ``dest``, its I/O limits and its jobs.

    Args:
        dest: the destination directory: a URL (``file://``, ``memory://``, ``s3a://``,
            ``abfss://``, ``gs://``), or a path of ``store``.
        options: the jobs' ``CommitOptions``.
        settings: the store client's settings by Hadoop's names (``fs.s3a.endpoint``,
            ``fs.s3a.path.style.access`` ...; see ``open_store``).
        store: a store client to use and not close; by default one is opened from
            ``dest`` (and closed with the client).
        limits: the in-flight limit and rates to share (another client's ``limits``);
            by default the client's own, from ``options``.
        reopen: with ``store``, how a worker process opens that store again (job
            commit's rename workers); by default none: renames stay in this process.

    Raises ``InvalidInput`` for a ``dest``, ``options`` or URL it cannot use.
    """

    def __init__(
        self,
        dest: str,
        *,
        options: CommitOptions | None = None,
        settings: Mapping[str, str] | None = None,
        store: Store | None = None,
        limits: Limits | None = None,
        reopen: StoreOpener | None = None,
    ):
        if not isinstance(dest, str):
            raise InvalidInput(f"dest must be a URL or store path (a str), not {dest!r}")
        if options is not None and not isinstance(options, CommitOptions):
            raise InvalidInput(
                f"options must be a CommitOptions (CommitOptions.from_mapping builds one "
                f"from a mapping), not {type(options).__name__}"
            )
        if limits is not None and not isinstance(limits, Limits):
            raise InvalidInput(f"limits must be a Limits (a client's), not {limits!r}")
        self.dest = dest
        self.options = options or CommitOptions()
        # the options' store settings (``options.store``), then those given here
        settings = {**self.options.store.as_s3a(), **(settings or {})} or None
        self._owns_store = store is None
        self._reopen: StoreOpener | None = reopen
        if store is None:
            store, path = open_store(dest, settings)
            # a store that knows how says so; else it is opened from the URL again
            self._reopen = (
                opener_of(store)
                if hasattr(store, "opener")
                else functools.partial(reopen_url, dest, dict(settings) if settings else None)
            )
        else:
            path = dest if dest.startswith("/") else store.unqualify(dest)
        self._store: Store = store
        #: ``dest`` as a path of the store
        self.path = path.rstrip("/") or "/"
        #: shared by every job of this client (and by clients given them)
        capabilities = store.capabilities
        self.limits = limits or Limits.for_options(
            self.options,
            capabilities.max_in_flight,
            loop_in_flight=host_loop_in_flight(self.options, capabilities),
        )
        watch_in_flight(self.limits.limiter)
        self._closed = False

    # -- lifetime

    @property
    def store(self) -> Store:
        """The client's store; ``InvalidInput`` once the client is closed."""
        self._check_open()
        return self._store

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidInput(
                f"the client of {self.dest!r} is closed: use it inside its `async with` block"
            )

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def runtime(self) -> Runtime:
        """The running event loop's runtime, which the client's stores and stages share
        with everything else on the loop (call it inside the loop)."""
        self._check_open()
        return current_runtime()

    async def __aenter__(self) -> Client:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close what the client opened (its store, unless it was given one). Idempotent;
        the client refuses use afterwards."""
        if self._closed:
            return
        self._closed = True
        if self._owns_store:
            with anyio.CancelScope(shield=True):
                await self._store.aclose()

    # -- jobs

    async def setup_job(self, job_id: str | None = None, *, attempt: int = 0) -> Job:
        """Set a job up (``setup_job``): choose its committer (``options.committer``; else
        an earlier attempt's; else from the store: staging on S3, the manifest committer
        elsewhere), record it and create what its tasks need. ``job_id``: a new
        collision-free one by default."""
        job = self.job(job_id or new_job_id(), attempt=attempt)
        async with job.context() as context:
            committer = await earlier_committer(context) if attempt else None
            if committer is None or context.options.committer.name:
                committer = choose_committer(context.ops.store, context.options)
            await committer.setup_job(context)
            await save_committer(context, committer)
        return job

    def job(self, job_id: str, *, attempt: int = 0) -> Job:
        """The job ``job_id`` of this destination (set up earlier, here or elsewhere)."""
        if not isinstance(job_id, str) or not job_id:
            raise InvalidInput(f"not a job ID: {job_id!r}")
        return Job(self, job_id, attempt=attempt)

    async def list_jobs(self) -> list[JobInfo]:
        """Every job under the destination's ``_temporary``, oldest first (``list_jobs``)."""
        async with self.operations() as ops:
            return await jobs_in(ops, self.path)

    async def remove_empty_temporary(self) -> bool:
        """Remove ``DEST/_temporary`` if it holds nothing; whether it was removed."""
        async with self.operations() as ops:
            try:
                return await ops.delete(join(self.path, TEMPORARY), recursive=False)
            except (NotEmpty, NotFound):
                return False

    # -- what the jobs use

    def operations(self) -> AbstractAsyncContextManager[StoreOperations]:
        """Store operations on the client's store, with its limits and fresh statistics."""
        return _operations(self)

    def context(
        self,
        job_id: str,
        *,
        attempt: int = 0,
        options: CommitOptions | None = None,
        task_attempt_id: str | None = None,
        progress: ProgressCallback | None = None,
        job_id_source: str = "JobID",
    ) -> AbstractAsyncContextManager[StageContext]:
        """A stage context of job ``job_id`` on the client's store, with its limits
        (``options``: instead of the client's, for this context)."""
        return open_context(
            self.path,
            job_id,
            attempt=attempt,
            store=self.store,
            options=options or self.options,
            task_attempt_id=task_attempt_id,
            progress=progress,
            job_id_source=job_id_source,
            limits=self.limits,
            reopen=self._reopen,
        )

    def attempt_context(
        self, attempt: TaskAttempt, options: CommitOptions | None = None
    ) -> AbstractAsyncContextManager[StageContext]:
        """The stage context of ``attempt``'s job, for the attempt (which must be of this
        client's destination)."""
        if attempt.dest_path != self.path:
            raise InvalidInput(
                f"task attempt {attempt.task_attempt_id} writes to {attempt.dest!r}, not to "
                f"this client's {self.dest!r}"
            )
        return self.context(
            attempt.job_id,
            attempt=attempt.job_attempt,
            options=options,
            task_attempt_id=attempt.task_attempt_id,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Client {self.dest!r} ({state})>"


@asynccontextmanager
async def _operations(client: Client) -> AsyncIterator[StoreOperations]:
    async with open_operations(
        client.path, store=client.store, options=client.options, limits=client.limits
    ) as (ops, _):
        yield ops


class Job:
    """One job of a client's destination: its tasks, commit, abort and cleanup, on the
    client's store and limits. Made by ``Client.setup_job`` or ``Client.job``."""

    def __init__(self, client: Client, job_id: str, *, attempt: int = 0):
        self.client = client
        self.job_id = job_id
        #: the job attempt (a re-run of a job after its driver failed is the next one)
        self.attempt = attempt

    def context(
        self, *, progress: ProgressCallback | None = None, job_id_source: str = "JobID"
    ) -> AbstractAsyncContextManager[StageContext]:
        """A stage context of this job on the client."""
        return self.client.context(
            self.job_id, attempt=self.attempt, progress=progress, job_id_source=job_id_source
        )

    # -- task side

    async def setup_task(
        self,
        task: str | int,
        attempt: int | str = 0,
        *,
        committer: Committer | None = None,
        shared_dir: str | None = None,
    ) -> TaskAttempt:
        """Set a task attempt up for the job's committer (``setup_task``): its working
        directory (manifest), local directory (staging), or nothing (magic). The attempt
        writes and commits through this client (``write_bytes``, ``open``, and
        ``commit_task`` with no ``store``) until the client closes. ``committer``: the
        job's, when the caller has it (another attempt's ``committer`` of this job): the
        job's record is then not read again. ``shared_dir`` (the manifest committer
        only): a directory below the job's, which the caller made, that the attempt's
        output shares with other attempts' instead of a directory of its own (no
        ``mkdir`` per attempt, nor ``rmdir`` at clean-up); the caller writes each file
        under a name no other attempt uses, lists them at commit (``written``) and
        deletes them itself on abort."""
        async with self.context() as context:
            if committer is None:
                committer = await job_committer(context, context.options)
            path = context.layout.dest
            named = name_attempt(
                context.qualify(path),
                path,
                self.job_id,
                task,
                attempt,
                job_attempt=self.attempt,
                committer=committer,
            )
            if shared_dir is not None:
                if committer.name != "manifest":
                    raise InvalidInput(
                        f"only the manifest committer's attempts share a directory, "
                        f"not the {committer.name} committer's"
                    )
                named = dataclasses.replace(named, local_dir=shared_dir)
            ready = await committer.setup_task(context, named)
        return _on_client(ready, self.client)

    async def commit_task(
        self,
        attempt: TaskAttempt,
        *,
        per_attempt: bool = False,
        written: Sequence[WrittenFile] | None = None,
        save: bool = True,
    ) -> TaskManifest | PendingSet:
        """Commit the attempt (``commit_task``): save its record, replacing an earlier
        attempt's (``per_attempt``: under the attempt's own name instead). ``save=False``
        (the manifest committer, ``per_attempt``): return the manifest unsaved, for the
        caller to carry to ``commit(delivered=...)`` (an engine's commit message)."""
        async with self.client.attempt_context(attempt) as context:
            return await attempt.committer.commit_task(
                context, attempt, per_attempt=per_attempt, written=written, save=save
            )

    async def abort_task(self, attempt: TaskAttempt) -> None:
        """Discard the attempt's output and its unsaved record (``abort_task``)."""
        async with self.client.attempt_context(attempt) as context:
            await attempt.committer.abort_task(context, attempt)

    # -- job side

    async def commit(
        self,
        *,
        task_records: Sequence[str] | None = None,
        progress: ProgressCallback | None = None,
        job_id_source: str = "JobID",
        manifests: Sequence[str] | None = None,
        delivered: Mapping[str, bytes] | None = None,
    ) -> SuccessData:
        """Commit the job (``commit_job``): every committed task's output into place,
        then ``_SUCCESS``; its summary. ``task_records``: exactly these task records
        (manifests or pending sets); ``manifests``: its deprecated name. ``delivered``:
        the manifests of ``task_records`` that tasks' commit messages carried, by name
        (``commit_task(save=False)``, encoded)."""
        task_records = renamed("manifests", manifests, "task_records", task_records, None)
        async with self.context(progress=progress, job_id_source=job_id_source) as context:
            _, committer = await find_job(context, "commit_job")
            committer = committer or await job_committer(context, context.options)
            summary = await committer.commit_job(context, task_records, delivered=delivered)
        # a service commits job after job: its heap's free pages go back, not kept per thread
        await release_free_memory()
        return summary

    async def abort(
        self,
        *,
        undo: bool = True,
        progress: ProgressCallback | None = None,
        undo_renames: bool | None = None,
    ) -> list[str]:
        """Abort the job (``abort_job``): undo its unfinished commit (``undo``: renames
        and uploads; ``undo_renames``: its deprecated name), then remove its temporary
        data; the old files a ``replace`` deleted that cannot be restored."""
        undo = renamed("undo_renames", undo_renames, "undo", undo, True)
        async with self.context(progress=progress) as context:
            presence, committer = await find_job(context, "abort_job")
            if presence == "committed":
                await _finish_cleanup(context)
                return []
            committer = committer or await job_committer(context, context.options)
            return await committer.abort_job(context, undo=undo)

    async def cleanup(self, *, progress: ProgressCallback | None = None) -> None:
        """Delete the job's temporary data (``cleanup_job``); never committed output."""
        async with self.context(progress=progress) as context:
            presence, committer = await find_job(context, "cleanup_job")
            if presence == "committed":
                await _finish_cleanup(context)
                return
            committer = committer or await job_committer(context, context.options)
            await committer.cleanup_job(context)

    async def info(self) -> JobInfo:
        """The job's ``JobInfo`` (``job_info``); ``JobNotFound`` when no such job is at
        the destination."""
        async with self.client.operations() as ops:
            return await job_in(ops, self.client.path, self.job_id)

    def __repr__(self) -> str:
        return f"<Job {self.job_id} of {self.client.dest!r}>"


def _on_client(attempt: TaskAttempt, client: Client) -> TaskAttempt:
    """``attempt``, writing and committing through ``client``."""

    def session(
        of: TaskAttempt, options: CommitOptions | None
    ) -> AbstractAsyncContextManager[StageContext]:
        return client.attempt_context(of, options)

    return dataclasses.replace(attempt, session=session)


async def _finish_cleanup(context: StageContext) -> None:
    """A committed job whose cleanup stopped after its own directory went: the shared
    ``_temporary`` it may have left, if empty (never another job's)."""
    await remove_if_empty(context, context.layout.temporary_dir)
