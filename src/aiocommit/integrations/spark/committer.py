"""The commit protocol of one Spark write, in async functions free of pyspark:

* ``prepare_job`` (driver, in ``writer()``): ``setup_job``;
* ``open_task_attempt`` (executor, in ``write()``): for a local destination, the attempt
  directory the task writes into directly;
* ``commit_task_files`` (executor, in ``write()``): ``setup_task``, upload the closed
  local files into the attempt directory (unless written there), ``commit_task``;
* ``commit_write`` (driver, in ``commit()``): ``commit_job`` with exactly the manifests
  the messages name (one per accepted attempt); an overwrite is the engine's conflict
  mode ``replace`` (per partition for a dynamic one). Once the job has committed
  (``_SUCCESS`` saved), cleaning up ``_temporary/JOB`` never fails the write: a losing
  speculative attempt may still be writing there. Cleanup is retried, then left to
  ``aiocommit cleanup``;
* ``abort_write`` (driver, in ``abort()``): ``abort_job``, which moves back files a
  partly-run commit renamed and the old output a replace had moved aside.

Each opens its own store client and closes it: Spark reuses its Python workers, and a
client bound to one event loop must not outlive its ``asyncio.run``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from aiocommit.engine.job import abort_job, cleanup_job, commit_job, setup_job
from aiocommit.engine.session import open_operations
from aiocommit.engine.task import TaskAttempt, commit_task, setup_task
from aiocommit.errors import NotFound, first_error
from aiocommit.integrations.spark import zero_rename
from aiocommit.integrations.spark.files import LocalFile
from aiocommit.integrations.spark.settings import TestHooks, WriteSettings
from aiocommit.options import CommitOptions
from aiocommit.protocol.ids import task_attempt_id_for, task_id_for
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.manifest import encode_manifest
from aiocommit.protocol.success import SuccessData
from aiocommit.stages.context import parallel
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
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


def _open(settings: WriteSettings, fault: tuple[str, str] | None = None) -> tuple[Store, str]:
    store, path = open_store(settings.url)
    if fault is not None:
        operation, fragment = fault

        def fails(op: str, target: str) -> bool:
            return op == operation and fragment in target

        store = FaultyStore(store, Faults(fail_paths=fails))
    return store, path.rstrip("/") or "/"


async def prepare_job(settings: WriteSettings, job_id: str) -> None:
    """Driver side, once per write: set the job up."""
    if zero_rename.is_zero_rename(settings):  # S3: the zero-rename committers
        await zero_rename.prepare(settings, job_id)
        return
    store, dest = _open(settings)
    try:
        await setup_job(dest, job_id, store=store, options=settings.commit)
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


#: per-attempt manifest copies; not ``-manifest.json``, so the engine's own listing of a
#: job's manifests (and tools built on it) still sees one manifest per task
ATTEMPT_MANIFEST_SUFFIX = ".attempt-manifest.json"


def attempt_manifest_name(attempt: TaskAttempt) -> str:
    return attempt.task_attempt_id + ATTEMPT_MANIFEST_SUFFIX


def _should_fail(hooks: TestHooks, partition: int, attempt_number: int) -> bool:
    if hooks.fail_partition_always == partition:
        return True
    return hooks.fail_partition_on_first_attempt == partition and attempt_number == 0


async def open_task_attempt(
    settings: WriteSettings, job_id: str, *, partition: int, attempt_number: int
) -> str | None:
    """Executor side, before writing: for a local destination, set the attempt up and
    return its directory, for the task to write its files straight into (no copy);
    None for other stores (the task writes local files and ``commit_task_files`` uploads
    them)."""
    store, dest = _open(settings)
    try:
        if not isinstance(store, LocalStore):
            return None
        attempt = await setup_task(
            dest, job_id, partition, attempt_number, store=store, options=settings.commit
        )
        return attempt.work_dir
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


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
    job_id: str,
    *,
    partition: int,
    attempt_number: int,
    files: Sequence[LocalFile],
) -> TaskOutcome:
    """Executor side: upload a task attempt's closed files and commit the attempt."""
    if zero_rename.is_zero_rename(settings):  # S3: the zero-rename committers
        attempt_id = task_attempt_id_for(task_id_for(job_id, partition), attempt_number)
        name = await zero_rename.commit_task(
            settings,
            job_id,
            partition=partition,
            attempt_number=attempt_number,
            files=files,
            fail_after_upload=_should_fail(settings.hooks, partition, attempt_number),
        )
        return TaskOutcome(
            task_id=task_id_for(job_id, partition),
            task_attempt_id=attempt_id,
            manifest=name,
            files=len(files),
            bytes=sum(f.size for f in files),
            rows=sum(f.rows for f in files),
            partitions=tuple(sorted({f.partition for f in files if f.partition})),
        )
    store, dest = _open(settings)
    options = settings.commit
    try:
        attempt = await setup_task(
            dest, job_id, partition, attempt_number, store=store, options=options
        )
        async with open_operations(dest, store=store, options=options) as (ops, _):

            async def upload(local: LocalFile) -> None:
                await ops.upload_file(local.local_path, attempt.path(local.relative))

            # written into the attempt directory already, or uploaded now
            uploads = [local for local in files if not local.in_place]
            try:
                await parallel(uploads, upload, workers=min(options.concurrency, 16))
            except BaseExceptionGroup as errors:  # Spark shows the message: the cause
                raise first_error(errors) from errors
        if _should_fail(settings.hooks, partition, attempt_number):
            raise InjectedTaskFailure(
                f"aiocommit.test hook: partition {partition} attempt {attempt_number} fails "
                f"after uploading {len(files)} file(s)"
            )
        manifest = await commit_task(attempt, store=store, options=options)
        # the engine keeps one manifest per task, and the last attempt to commit wins; Spark
        # picks its winner only after write() returned, so a losing speculative attempt can
        # save its manifest after the winner's. A copy under this attempt's own name is
        # what the message names and job commit loads: exactly the attempts Spark accepted.
        own = join(JobLayout(dest, job_id).manifests_dir, attempt_manifest_name(attempt))
        async with open_operations(dest, store=store, options=options) as (ops, _):
            await ops.write_bytes(own, encode_manifest(manifest))
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()
    return TaskOutcome(
        task_id=attempt.task_id,
        task_attempt_id=attempt.task_attempt_id,
        manifest=attempt_manifest_name(attempt),
        files=len(manifest.files),
        bytes=manifest.total_size,
        rows=sum(f.rows for f in files),
        partitions=tuple(sorted({f.partition for f in files if f.partition})),
    )


async def commit_write(
    settings: WriteSettings, job_id: str, overwriting: bool, results: Sequence[TaskResult]
) -> SuccessData:
    """Driver side: commit exactly the manifests the tasks' messages name."""
    if zero_rename.is_zero_rename(settings):  # S3: the zero-rename committers
        return await zero_rename.commit_write(settings, job_id, overwriting, results)
    store, dest = _open(settings, settings.hooks.commit_fault)
    options = settings.commit
    try:
        # cleanup runs after _SUCCESS is saved: its failure is logged, not raised
        committing = dataclasses.replace(options, cleanup_ignore_failures=True)
        if overwriting:
            dynamic = settings.partition_overwrite_mode == "dynamic" and bool(settings.partition_by)
            committing = dataclasses.replace(
                committing, conflict_mode="replace", replace_partitions=dynamic
            )
        summary = await commit_job(
            dest, job_id, manifests=[r.manifest for r in results], store=store, options=committing
        )
        await clean_up_committed(store, dest, job_id, options)
        return summary
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def abort_write(settings: WriteSettings, job_id: str, overwriting: bool) -> str:
    """Driver side, after a failed job or a failed ``commit()``. Idempotent.

    ``abort_job``: files a partly-run commit renamed are moved back, the old output a
    replace moved aside is restored (a store without atomic rename had deleted it: the
    files it cannot restore are logged), and ``_temporary/JOB`` is removed, whatever the
    messages say (they are incomplete after a failure). A job that had committed is only
    cleaned up. Returns ``"aborted"``.
    """
    if zero_rename.is_zero_rename(settings):  # S3: the zero-rename committers
        return await zero_rename.abort_write(settings, job_id, overwriting)
    store, dest = _open(settings, settings.hooks.abort_fault)
    try:
        await abort_job(dest, job_id, store=store, options=settings.commit)
        return "aborted"
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
