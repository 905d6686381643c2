"""The commit protocol of one Spark write, in async functions free of pyspark, the same
on every store (the job's committer does what its store needs):

* ``prepare_job`` (driver, in ``writer()``): ``setup_job``;
* ``open_task_attempt`` (executor, in ``write()``): open the store, ``setup_task`` (once
  per attempt); for a local destination, the attempt directory the task writes into
  directly;
* ``commit_task_files`` (executor, in ``write()``): add the closed local files to the
  attempt's output (unless written there), ``commit_task``; ``close_task_attempt``
  closes the store;
* ``commit_write`` (driver, in ``commit()``): ``commit_job`` with exactly the task records
  the messages name (one per accepted attempt); an overwrite is the engine's conflict
  mode ``replace`` (per partition for a dynamic one). Once the job has committed
  (``_SUCCESS`` saved), cleaning up ``_temporary/JOB`` never fails the write: a losing
  speculative attempt may still be writing there. Cleanup is retried, then left to
  ``aiocommit cleanup``;
* ``abort_write`` (driver, in ``abort()``): ``abort_job``, which undoes a partly-run
  commit and restores the old output a replace had moved aside.

Each step opens its own store client and closes it (a task's steps share one, on the
worker's task loop): Spark reuses its Python workers, and a client bound to one event
loop must not outlive it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from aiocommit.client.job import abort_job, cleanup_job, commit_job, setup_job
from aiocommit.client.task import TaskAttempt, commit_task, committed_name, setup_task
from aiocommit.committers.common.context import parallel
from aiocommit.committers.manifest.committer import ATTEMPT_MANIFEST_SUFFIX
from aiocommit.errors import JobNotFound, NotFound, first_error
from aiocommit.integrations.spark.files import LocalFile
from aiocommit.integrations.spark.settings import S3_SCHEMES, TestHooks, WriteSettings
from aiocommit.options import CommitOptions
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store
from aiocommit.stores.faulty import Faults, FaultyStore, InjectedFailure
from aiocommit.stores.local import LocalStore
from aiocommit.stores.registry import open_store

log = logging.getLogger(__name__)

#: pauses between the tolerant cleanup's attempts, seconds
CLEANUP_PAUSES = (0.5, 1.0, 2.0)


class TaskResult(Protocol):
    """What job commit needs from a task's commit message."""

    @property
    def manifest(self) -> str: ...

    @property
    def partitions(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class TaskOutcome:
    task_id: str
    task_attempt_id: str
    manifest: str
    files: int
    bytes: int
    rows: int
    partitions: tuple[str, ...]


class InjectedTaskFailure(RuntimeError):
    """Raised by the TEST-ONLY ``aiocommit.test.failPartition*`` hooks."""


def setup_options(settings: WriteSettings) -> CommitOptions:
    """The options a write's job is set up with. On S3: its S3A committer (the
    ``committer`` option), appending, per partition when the write is partitioned (the
    partitioned committer); a commit's save mode may change the mode later
    (``WriteSettings.commit_options``)."""
    if settings.url.partition("://")[0].lower() not in S3_SCHEMES:
        return settings.commit
    return settings.commit.with_values(
        committer=settings.committer,
        conflict_mode="append",
        replace_partitions=settings.per_partition,
    )


def _open_url(settings: WriteSettings) -> tuple[Store, str]:
    return open_store(settings.url, settings.commit.store.as_s3a() or None)


def _open(settings: WriteSettings, fault: tuple[str, str] | None = None) -> tuple[Store, str]:
    store, path = _open_url(settings)
    if fault is not None:
        operation, fragment = fault

        def fails(op: str, target: str) -> bool:
            return op == operation and fragment in target

        store = FaultyStore(store, Faults(fail_paths=fails))
    return store, path.rstrip("/") or "/"


async def prepare_job(settings: WriteSettings, job_id: str) -> None:
    """Driver side, once per write: set the job up (its committer chosen from the store:
    on S3 the staging or magic committer, as the write's ``committer`` option says)."""
    store, dest = _open(settings)
    try:
        await setup_job(dest, job_id, store=store, options=setup_options(settings))
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


def _injected(error: BaseException | None) -> bool:
    """Whether ``error`` is, or was caused by, the test hook's injected failure (a stage
    reports it as its own ``CommitError``, the injected failure its cause)."""
    while error is not None:
        if isinstance(error, InjectedFailure):
            return True
        error = error.__cause__ or error.__context__
    return False


def _should_fail(hooks: TestHooks, partition: int, attempt_number: int) -> bool:
    if hooks.fail_partition_always == partition:
        return True
    return hooks.fail_partition_on_first_attempt == partition and attempt_number == 0


@dataclass(frozen=True)
class OpenAttempt:
    """A task attempt set up on its store, whose client stays open until
    ``close_task_attempt`` (the task's steps run on one event loop: ``task_loop``)."""

    store: Store
    attempt: TaskAttempt

    @property
    def in_place_dir(self) -> str | None:
        """For a local destination, the attempt directory the task writes its files into
        directly (no copy); None for other stores (the task writes local files and
        ``commit_task_files`` uploads them)."""
        return self.attempt.work_dir if isinstance(self.store, LocalStore) else None


async def open_task_attempt(
    settings: WriteSettings, job_id: str, *, partition: int, attempt_number: int
) -> OpenAttempt:
    """Executor side, before writing: open the store and set the attempt up, once."""
    store, dest = _open(settings)
    try:
        attempt = await setup_task(
            dest, job_id, partition, attempt_number, store=store, options=settings.commit
        )
    except BaseException:
        with anyio.CancelScope(shield=True):
            await store.aclose()
        raise
    return OpenAttempt(store, attempt)


async def close_task_attempt(opened: OpenAttempt) -> None:
    """Close the attempt's store client (after commit, or after a failure)."""
    with anyio.CancelScope(shield=True):
        await opened.store.aclose()


async def destination_exists(settings: WriteSettings) -> bool:
    """Whether the destination exists (a file, a directory, or any object under it), as
    Spark's ``errorifexists`` and ``ignore`` modes ask."""
    store, dest = _open(settings)
    try:
        if await _exists(store, dest):
            return True
        try:
            async for page in store.list_dir(dest):
                if page:
                    return True
        except NotFound:
            return False
        return False
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def commit_task_files(
    settings: WriteSettings,
    opened: OpenAttempt,
    *,
    partition: int,
    attempt_number: int,
    files: Sequence[LocalFile],
) -> TaskOutcome:
    """Executor side: add a task attempt's closed files to its output (those written
    into the attempt directory already stay) and commit the attempt."""
    store, attempt = opened.store, opened.attempt
    options = settings.commit

    async def add(local: LocalFile) -> None:
        await attempt.write_file(local.relative, local.local_path, store=store, options=options)

    # written into the attempt directory already, or added now
    added = [local for local in files if not local.in_place]
    try:
        await parallel(added, add, workers=min(options.concurrency, 16))
    except BaseExceptionGroup as errors:  # Spark shows the message: the cause
        raise first_error(errors) from errors
    target: Store = store
    failing = _should_fail(settings.hooks, partition, attempt_number)
    if failing:  # saving the attempt's record fails: its output is written (uploaded)
        target = FaultyStore(store, Faults(fail_paths=_saves_task_record))
    try:
        # written in place: the task knows its files, nothing else is in its directory
        in_place = opened.in_place_dir is not None and not added
        written = [(f.relative, f.size) for f in files] if in_place else None
        await commit_task(attempt, store=target, options=options, per_attempt=True, written=written)
    except Exception as error:
        if not _injected(error):
            raise
        raise InjectedTaskFailure(
            f"aiocommit.test hook: partition {partition} attempt {attempt_number} fails "
            f"after writing {len(files)} file(s)"
        ) from error
    return TaskOutcome(
        task_id=attempt.task_id,
        task_attempt_id=attempt.task_attempt_id,
        manifest=committed_name(attempt, per_attempt=True),
        files=len(files),
        bytes=sum(f.size for f in files),
        rows=sum(f.rows for f in files),
        partitions=tuple(sorted({f.partition for f in files if f.partition})),
    )


def _saves_task_record(operation: str, path: str) -> bool:
    """The test hook's fault: the write of a task attempt's manifest or pending set."""
    name = path.rsplit("/", 1)[-1]
    saved = (".pendingset", "-manifest.json.tmp", ATTEMPT_MANIFEST_SUFFIX)
    return operation == "write_bytes" and name.endswith(saved)


async def commit_write(
    settings: WriteSettings,
    job_id: str,
    overwriting: bool,
    results: Sequence[TaskResult] | None,
) -> SuccessData:
    """Driver side: commit exactly the task records (manifests or pending sets) the
    tasks' messages name; ``None``: every task manifest in the job's directory (Spark's
    own writers through Hadoop's manifest committer, ``jvm_engine``)."""
    store, dest = _open(settings, settings.hooks.commit_fault)
    options = settings.commit
    try:
        # cleanup runs after _SUCCESS is saved: its failure is logged, not raised
        committing = settings.commit_options(overwriting).with_values(cleanup_ignore_failures=True)
        summary = await commit_job(
            dest,
            job_id,
            task_records=None if results is None else [r.manifest for r in results],
            store=store,
            options=committing,
        )
        await clean_up_committed(store, dest, job_id, options)
        return summary
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def abort_write(settings: WriteSettings, job_id: str, overwriting: bool) -> str:
    """Driver side, after a failed job or a failed ``commit()``. Idempotent.

    ``abort_job``: what a partly-run commit put in place is undone, the old output a
    replace moved aside is restored (a store without atomic rename had deleted it: the
    files it cannot restore are logged), and ``_temporary/JOB`` is removed, whatever the
    messages say (they are incomplete after a failure). A job that had committed is only
    cleaned up. Returns ``"aborted"``.
    """
    store, dest = _open(settings, settings.hooks.abort_fault)
    try:
        try:
            lost = await abort_job(dest, job_id, store=store, options=settings.commit)
        except JobNotFound:  # never set up (setupJob failed), or aborted already
            log.info("job %s: nothing to abort at %s", job_id, dest)
            return "aborted"
        if lost:
            log.warning(
                "job %s aborted; %d old file(s) its replace had deleted cannot be restored",
                job_id,
                len(lost),
            )
        return "aborted"
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def clean_up_write(settings: WriteSettings, job_id: str) -> bool:
    """Driver side: remove a committed job's ``_temporary/JOB`` (``clean_up_committed``);
    for a job killed between its ``_SUCCESS`` and that cleanup. Never raises."""
    store, dest = _open(settings)
    try:
        return await clean_up_committed(store, dest, job_id, settings.commit)
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def clean_up_committed(
    store: Store, dest: str, job_id: str, options: CommitOptions, pauses: Sequence[float] = ()
) -> bool:
    """After the job committed: remove ``_temporary/JOB`` if it is still there, retrying;
    never raises (the write has succeeded). A losing speculative attempt that Spark has
    not killed yet can still be creating files there (``Directory not empty``); what
    is left is logged and left to ``aiocommit cleanup``. Returns whether it is gone."""
    layout = JobLayout(dest, job_id)
    if options.cleanup_skip:
        return False
    for pause in (0.0, *(pauses or CLEANUP_PAUSES)):
        await anyio.sleep(pause)
        try:
            if not await _exists(store, layout.job_dir):
                return True
            await cleanup_job(dest, job_id, store=store, options=options)
            return True
        except Exception as error:  # committed: report, never fail
            last = error
    log.warning(
        "job %s committed, but %s could not be removed (%s); "
        "run `aiocommit cleanup %s --job-id %s`",
        job_id,
        layout.job_dir,
        last,
        dest,
        job_id,
    )
    return False


async def _exists(store: Store, path: str) -> bool:
    try:
        await store.stat(path)
    except NotFound:
        return False
    return True
