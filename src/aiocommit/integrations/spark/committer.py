"""The commit protocol of one Spark write, in async functions free of pyspark:

* ``prepare_job`` (driver, in ``writer()``): finish earlier jobs' committed overwrites,
  then ``setup_job``;
* ``open_task_attempt`` (executor, in ``write()``): for a local destination, the attempt
  directory the task writes into directly;
* ``commit_task_files`` (executor, in ``write()``): ``setup_task``, upload the closed
  local files into the attempt directory (unless written there), ``commit_task``;
* ``commit_write`` (driver, in ``commit()``): plan an overwrite, ``commit_job`` with
  exactly the manifests the messages name (one per accepted attempt), then delete the
  replaced files;
* ``abort_write`` (driver, in ``abort()``): finish a committed overwrite, else
  ``abort_job`` (which also moves back files a partly-run commit renamed).

Each opens its own store client and closes it: Spark reuses its Python workers, and a
client bound to one event loop must not outlive its ``asyncio.run``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from aiocommit.engine.job import abort_job, cleanup_job, commit_job, setup_job
from aiocommit.engine.task import TaskAttempt, commit_task, setup_task
from aiocommit.errors import NotFound
from aiocommit.integrations.spark import overwrite
from aiocommit.integrations.spark.files import LocalFile
from aiocommit.integrations.spark.settings import TestHooks, WriteSettings
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.manifest import encode_manifest
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.local import LocalStore
from aiocommit.stores.registry import open_store


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


async def prepare_job(settings: WriteSettings, job_id: str) -> list[str]:
    """Driver side, once per write: finish overwrites earlier jobs committed but did not
    complete, then set this job up. Returns the job IDs of plans finished."""
    store, dest = _open(settings)
    try:
        finished = await overwrite.finish_pending(store, dest, settings.commit)
        await setup_job(dest, job_id, store=store, options=settings.commit)
        return finished
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


async def commit_task_files(
    settings: WriteSettings,
    job_id: str,
    *,
    partition: int,
    attempt_number: int,
    files: Sequence[LocalFile],
) -> TaskOutcome:
    """Executor side: upload a task attempt's closed files and commit the attempt."""
    store, dest = _open(settings)
    options = settings.commit
    try:
        attempt = await setup_task(
            dest, job_id, partition, attempt_number, store=store, options=options
        )
        limiter = anyio.CapacityLimiter(max(1, min(options.concurrency, 16)))

        async def upload(local: LocalFile) -> None:
            async with limiter:
                target = attempt.path(local.relative)
                await overwrite.retrying(
                    lambda: store.upload_file(local.local_path, target), options
                )

        with overwrite.first_error_raised():
            async with anyio.create_task_group() as group:
                for local in files:
                    if not local.in_place:  # written into the attempt directory already
                        group.start_soon(upload, local)
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
        data = encode_manifest(manifest)
        await overwrite.retrying(lambda: store.write_bytes(own, data), options)
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
    store, dest = _open(settings, settings.hooks.commit_fault)
    options = settings.commit
    try:
        layout = JobLayout(dest, job_id)
        manifests = [r.manifest for r in results]
        if not overwriting:
            return await commit_job(dest, job_id, manifests=manifests, store=store, options=options)
        # a re-run of a commit that started (its commit plan saved) or finished must not
        # list the destination again: the new files would count as old ones
        started = await overwrite.owns_success(store, dest, job_id) or await _exists(
            store, layout.commit_plan_path
        )
        plan = await overwrite.read_plan(store, dest, job_id)
        if plan is None and not started:
            dynamic = settings.partition_overwrite_mode == "dynamic" and bool(settings.partition_by)
            partitions = sorted({p for r in results for p in r.partitions}) if dynamic else None
            plan = await overwrite.prepare(
                store, dest, job_id, partitions=partitions, options=options
            )
        # without a _SUCCESS marker, keep the job directory until the plan is marked, so
        # an interrupted commit is recognisably not committed (see overwrite.py)
        run_options = options
        if not options.write_success and not options.cleanup_skip:
            run_options = dataclasses.replace(options, cleanup_skip=True)
        summary = await commit_job(
            dest, job_id, manifests=manifests, store=store, options=run_options
        )
        if plan is not None:
            await overwrite.mark(store, dest, plan, overwrite.COMMITTED, options)
            await overwrite.finish(store, dest, plan, options)
        if run_options is not options:
            await cleanup_job(dest, job_id, store=store, options=options)
        return summary
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def abort_write(settings: WriteSettings, job_id: str, overwriting: bool) -> str:
    """Driver side, after a failed job or a failed ``commit()``. Idempotent.

    A committed overwrite is finished (its old files deleted); otherwise the job is
    aborted: files a partly-run commit renamed are moved back and ``_temporary/JOB`` is
    removed, whatever the messages say (they are incomplete after a failure).
    Returns ``"finished"`` or ``"aborted"``.
    """
    store, dest = _open(settings, settings.hooks.abort_fault)
    options = settings.commit
    try:
        plan = await overwrite.read_plan(store, dest, job_id) if overwriting else None
        if plan is not None:
            if await overwrite.is_committed(store, dest, plan):
                await overwrite.mark(store, dest, plan, overwrite.COMMITTED, options)
                await overwrite.finish(store, dest, plan, options)
                await cleanup_job(dest, job_id, store=store, options=options)
                return "finished"
            await overwrite.mark(store, dest, plan, overwrite.ABORTED, options)
        await abort_job(dest, job_id, store=store, options=options)
        if plan is not None:
            await overwrite.discard(store, dest, job_id, options)
        return "aborted"
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def _exists(store: Store, path: str) -> bool:
    try:
        await store.stat(path)
    except NotFound:
        return False
    return True
