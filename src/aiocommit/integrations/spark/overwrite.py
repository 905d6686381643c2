"""Overwrite without a moment of missing data: commit the new files first, then delete
the old ones, with a plan file so a crash in between is finished, never undone.

The plan (``DEST/_temporary/JOB-overwrite-plan.json``, under the job's unique prefix)
lists the old files to replace, relative to the destination:

* static overwrite: every file under the destination except ``_temporary/`` and
  ``_SUCCESS`` (the commit writes a new one);
* dynamic overwrite: every file in the partition directories this job wrote.

It is written before the job commit renames anything, and it is never rebuilt once it
exists, so it can never list the new files (their names are unique per task attempt
and per job, so they never collide with old names either). It sits beside the job's
directory, not in it, so it survives the engine's cleanup of ``_temporary/JOB``.

Its ``state`` moves ``planned`` -> ``committed`` (after ``commit_job`` returned) or
``planned`` -> ``aborted`` (before ``abort_job`` runs). A ``planned`` plan counts as
committed when the destination's ``_SUCCESS`` is this job's, or when the job directory
is gone (only a completed commit removes it: ``abort`` marks the plan first). When the
commit writes no ``_SUCCESS``, the integration skips the engine's cleanup until the plan
is marked, so that case never has to be guessed.

Once committed, the old files are deleted (then old directories that became empty,
deepest first) and the plan is removed. Whoever finds a committed plan finishes it:
the rest of ``commit()``, ``abort()`` after a failed delete, or the next job writing to
the destination (``finish_pending``). A reader sees old and new files of a partition
side by side between the commit and the deletes, never a partition with neither, and
no old file is deleted unless the job committed.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import anyio
import msgspec

from aiocommit.engine.job import abort_job
from aiocommit.errors import ManifestError, NotEmpty, NotFound, Throttled, Transient, first_error
from aiocommit.options import CommitOptions
from aiocommit.protocol.layout import SUCCESS, TEMPORARY
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import Store, join, relative_to

T = TypeVar("T")

PLAN_SUFFIX = "-overwrite-plan.json"
PLANNED = "planned"
COMMITTED = "committed"
ABORTED = "aborted"

log = logging.getLogger(__name__)


class OverwritePlan(msgspec.Struct):
    job_id: str
    mode: str  # "static" or "dynamic"
    state: str = PLANNED
    #: the partition directories replaced (dynamic), relative to the destination
    partitions: list[str] = msgspec.field(default_factory=list)
    #: old files to delete once the job has committed, relative to the destination
    files: list[str] = msgspec.field(default_factory=list)
    #: old directories to remove when they end up empty, relative to the destination
    directories: list[str] = msgspec.field(default_factory=list)


_decoder = msgspec.json.Decoder(OverwritePlan)


def plan_path(dest: str, job_id: str) -> str:
    return join(dest, TEMPORARY, job_id + PLAN_SUFFIX)


@contextmanager
def first_error_raised() -> Iterator[None]:
    """Raise the first real error of a task group, not an ``ExceptionGroup``: Spark shows
    the message, which should say what failed."""
    try:
        yield
    except BaseExceptionGroup as errors:
        raise first_error(errors) from errors


async def retrying(call: Callable[[], Awaitable[T]], options: CommitOptions) -> T:
    """Run one idempotent store call, retrying throttling and transient errors."""
    for attempt in range(options.max_attempts):
        try:
            return await call()
        except (Throttled, Transient) as error:
            if attempt + 1 >= options.max_attempts:
                raise
            after = error.retry_after if isinstance(error, Throttled) else None
            delay = after or min(options.retry_max_delay, options.retry_base_delay * 2**attempt)
            await anyio.sleep(delay * (0.5 + random.random() / 2) if after is None else delay)
    raise AssertionError("unreachable")  # pragma: no cover


async def read_plan(store: Store, dest: str, job_id: str) -> OverwritePlan | None:
    path = plan_path(dest, job_id)
    try:
        data = await store.read_bytes(path)
    except NotFound:
        return None
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as error:
        raise ManifestError(f"malformed overwrite plan: {error}", path=path) from error


async def save_plan(store: Store, dest: str, plan: OverwritePlan, options: CommitOptions) -> None:
    data = msgspec.json.encode(plan)
    await retrying(lambda: store.write_bytes(plan_path(dest, plan.job_id), data), options)


async def list_tree(
    store: Store, root: str, options: CommitOptions, *, skip_top: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """Every file and directory below ``root`` (relative to it), listed in parallel;
    top-level names in ``skip_top`` are left out. A missing root lists as empty."""
    files: list[str] = []
    directories: list[str] = []
    limiter = anyio.CapacityLimiter(max(1, min(options.concurrency, 64)))

    async def walk(directory: str, group: anyio.abc.TaskGroup) -> None:
        pages = []
        async with limiter:
            try:
                async for page in store.list_dir(directory):
                    pages.append(page)
            except NotFound:
                return
        for page in pages:
            for status in page:
                relative = relative_to(status.path, root)
                if directory == root and status.name in skip_top:
                    continue
                if status.is_dir:
                    directories.append(relative)
                    group.start_soon(walk, status.path, group)
                else:
                    files.append(relative)

    with first_error_raised():
        async with anyio.create_task_group() as group:
            await walk(root, group)
    return sorted(files), sorted(directories)


async def prepare(
    store: Store,
    dest: str,
    job_id: str,
    *,
    partitions: Sequence[str] | None,
    options: CommitOptions,
) -> OverwritePlan:
    """The job's plan: the one saved earlier if any, else list the old output and save
    it. ``partitions`` None replaces the whole destination (static)."""
    existing = await read_plan(store, dest, job_id)
    if existing is not None:
        return existing
    if partitions is None:
        files, directories = await list_tree(store, dest, options, skip_top=(TEMPORARY, SUCCESS))
        plan = OverwritePlan(job_id, "static", files=files, directories=directories)
    else:
        plan = OverwritePlan(job_id, "dynamic", partitions=sorted(set(partitions)))
        for partition in plan.partitions:
            files, directories = await list_tree(store, join(dest, partition), options)
            plan.files.extend(join(partition, f) for f in files)
            plan.directories.extend(join(partition, d) for d in directories)
    await save_plan(store, dest, plan, options)
    return plan


async def owns_success(store: Store, dest: str, job_id: str) -> bool:
    """True when ``DEST/_SUCCESS`` is this job's."""
    path = join(dest, SUCCESS)
    try:
        return decode_success(await store.read_bytes(path), path=path).job_id == job_id
    except (NotFound, ManifestError):
        return False


async def is_committed(store: Store, dest: str, plan: OverwritePlan) -> bool:
    if plan.state != PLANNED:
        return plan.state == COMMITTED
    if await owns_success(store, dest, plan.job_id):
        return True
    try:
        await store.stat(join(dest, TEMPORARY, plan.job_id))
    except NotFound:
        return True
    return False


async def mark(
    store: Store, dest: str, plan: OverwritePlan, state: str, options: CommitOptions
) -> None:
    plan.state = state
    await save_plan(store, dest, plan, options)


async def finish(store: Store, dest: str, plan: OverwritePlan, options: CommitOptions) -> int:
    """Delete the plan's old files, then its emptied directories, then the plan.
    Idempotent. Returns how many files were deleted by this call."""
    deleted = 0
    limiter = anyio.CapacityLimiter(max(1, min(options.concurrency, 64)))

    async def delete_file(relative: str) -> None:
        nonlocal deleted
        async with limiter:
            path = join(dest, relative)
            if await retrying(lambda: store.delete(path), options):
                deleted += 1

    with first_error_raised():
        async with anyio.create_task_group() as group:
            for relative in plan.files:
                group.start_soon(delete_file, relative)
    if store.capabilities.directories:
        # deepest first; a directory that holds new (or foreign) files stays
        for relative in sorted(plan.directories, key=lambda d: (-d.count("/"), d)):
            await _delete_if_empty(store, join(dest, relative), options)
    try:
        await retrying(lambda: store.delete(plan_path(dest, plan.job_id)), options)
        await remove_empty_temporary(store, dest)
    except Exception as error:  # the overwrite is complete; the next job removes the plan
        log.warning("overwrite of job %s finished, plan not removed: %s", plan.job_id, error)
    return deleted


async def _delete_if_empty(store: Store, path: str, options: CommitOptions) -> None:
    try:
        await retrying(lambda: store.delete(path), options)
    except NotEmpty:
        pass


async def remove_empty_temporary(store: Store, dest: str) -> None:
    try:
        await store.delete(join(dest, TEMPORARY))
    except (NotEmpty, NotFound):
        pass


async def discard(store: Store, dest: str, job_id: str, options: CommitOptions) -> None:
    """Remove the plan of a job that did not commit (its old files all stay)."""
    await retrying(lambda: store.delete(plan_path(dest, job_id)), options)
    await remove_empty_temporary(store, dest)


async def finish_pending(store: Store, dest: str, options: CommitOptions) -> list[str]:
    """Finish the overwrites of earlier jobs on ``dest`` that committed but did not get
    to delete their old files (a crash, or a failed delete and a failed abort); remove
    plans of jobs that were being aborted. Plans of jobs that may still be running are
    left alone. Returns the job IDs whose plans were handled."""
    try:
        names = [
            status.name
            async for page in store.list_dir(join(dest, TEMPORARY))
            for status in page
            if not status.is_dir and status.name.endswith(PLAN_SUFFIX)
        ]
    except NotFound:
        return []
    handled: list[str] = []
    for name in sorted(names):
        job_id = name[: -len(PLAN_SUFFIX)]
        plan = await read_plan(store, dest, job_id)
        if plan is None:
            continue
        if await is_committed(store, dest, plan):
            await finish(store, dest, plan, options)
        elif plan.state == ABORTED:
            await abort_job(dest, job_id, store=store, options=options)
            await discard(store, dest, job_id, options)
        else:
            continue
        handled.append(job_id)
    return handled
