"""What a destination's ``_temporary`` holds: every job with a directory there, with the
state its durable record gives (see ``aiocommit.committers.common.job_state``) and what it
holds."""

from __future__ import annotations

import datetime
import re
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from aiocommit.committers.common.context import StageContext
from aiocommit.committers.common.job_state import JobState, read_job_record, require_job
from aiocommit.errors import ManifestError, NotFound
from aiocommit.io.operations import StoreOperations
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import (
    MANIFEST_SUFFIX,
    SUCCESS,
    TEMP_MANIFEST_SUFFIX,
    TEMPORARY,
    JobLayout,
)
from aiocommit.protocol.manifest import decode_manifest
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import FileStatus, Store, join


@dataclass
class JobInfo:
    """A job directory under ``DEST/_temporary``: its state and what it holds.

    ``state`` is ``set up``, ``committing`` (a commit started renaming and did not
    finish: commit again to finish, or abort to undo), ``committed`` (only temporary
    files are left) or ``aborted`` (its directory is being removed).
    """

    job_id: str
    state: JobState
    attempts: list[int] = field(default_factory=list)
    manifests: int = 0
    pending_manifests: int = 0
    bad_manifests: int = 0
    files: int = 0
    size: int = 0
    started: float | None = None

    def age(self, now: float) -> float | None:
        return None if self.started is None else max(0.0, now - self.started)

    def as_json(self, now: float) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "state": self.state,
            "attempts": self.attempts,
            "manifests": self.manifests,
            "manifests_in_progress": self.pending_manifests,
            "bad_manifests": self.bad_manifests,
            "files": self.files,
            "size": self.size,
            "age_seconds": self.age(now),
        }


async def jobs_in(ops: StoreOperations, dest: str) -> list[JobInfo]:
    """Every job under ``dest``'s ``_temporary``, oldest first (unknown ages last);
    ``NotFound`` when ``dest`` is not a directory."""
    status = await ops.stat(dest)
    if not status.is_dir:
        raise NotFound("not a directory", path=dest, operation="list_jobs")
    jobs: list[JobInfo] = []
    committed_job = await _success_job(ops, dest)
    for entry in await _children(ops, join(dest, TEMPORARY)):
        if not entry.is_dir:
            continue
        info = await _job(_context(ops, dest, entry.name), committed_job)
        if info is not None:
            jobs.append(info)
    jobs.sort(key=lambda job: (job.started is None, job.started or 0.0, job.job_id))
    return jobs


async def job_in(ops: StoreOperations, dest: str, job_id: str) -> JobInfo:
    """One job's ``JobInfo``: from its directory; ``committed`` with nothing else known
    when only the destination's ``_SUCCESS`` names it (committed and cleaned up).
    ``JobNotFound`` when no such job is at ``dest``."""
    context = _context(ops, dest, job_id)
    info = await _job(context, await _success_job(ops, dest))
    if info is not None:
        return info
    presence = await require_job(context, "job_info")
    # without _temporary/JOB: committed and cleaned up, or only __magic/JOB left by
    # an abort or cleanup that stopped part-way
    return JobInfo(job_id, "committed" if presence == "committed" else "aborted")


async def _success_job(ops: StoreOperations, dest: str) -> str | None:
    """The job ID in ``DEST/_SUCCESS`` when it records a success."""
    path = join(dest, SUCCESS)
    try:
        data = await ops.read_bytes(path, statistic=S.OP_LOAD_SUCCESS)
        success = decode_success(data, path=path)
    except (NotFound, ManifestError):
        return None
    return success.job_id if success.success else None


def _context(ops: StoreOperations, dest: str, job_id: str) -> StageContext:
    return StageContext(
        layout=JobLayout(dest, job_id), options=ops.options, ops=ops, stats=ops.stats
    )


async def _job(context: StageContext, committed_job: str | None) -> JobInfo | None:
    ops = context.ops
    layout = context.layout
    record = await read_job_record(context, check_success=False)
    if record is None:
        return None
    state: JobState = record.state
    if state != "committed" and committed_job == layout.job_id:
        state = "committed"
    info = JobInfo(layout.job_id, state, record.attempts)
    manifest_paths: list[str] = []
    for attempt in record.attempts:
        attempt_layout = JobLayout(layout.dest, layout.job_id, attempt)
        for manifest in await _children(ops, attempt_layout.manifests_dir):
            if manifest.name.endswith(MANIFEST_SUFFIX):
                manifest_paths.append(manifest.path)
            elif manifest.name.endswith(TEMP_MANIFEST_SUFFIX):
                info.pending_manifests += 1
    info.manifests = len(manifest_paths)

    async def load(path: str) -> None:
        try:
            data = await ops.read_bytes(path, statistic=S.OP_LOAD_MANIFEST)
            manifest = decode_manifest(data, path=path)
        except (NotFound, ManifestError):
            info.bad_manifests += 1
            return
        info.files += len(manifest.files)
        info.size += manifest.total_size

    async with anyio.create_task_group() as group:
        for path in manifest_paths:
            group.start_soon(load, path)
    info.started = job_started(layout.job_id) or await _local_mtime(ops.store, layout.job_dir)
    return info


async def _children(ops: StoreOperations, path: str) -> list[FileStatus]:
    found: list[FileStatus] = []
    try:
        async for page in ops.list_dir(path):
            found.extend(page)
    except NotFound:
        return []
    return found


async def _local_mtime(store: Store, path: str) -> float | None:
    from aiocommit.stores.local import LocalStore

    if not isinstance(store, LocalStore):
        return None
    try:
        return (await anyio.Path(path).stat()).st_mtime
    except OSError:
        return None


_OUR_JOB_ID = re.compile(r"^job_(\d{14})[0-9a-f]{12}_\d+$")
_HADOOP_JOB_ID = re.compile(r"^job_(\d+)_\d+$")


def job_started(job_id: str) -> float | None:
    """When a job started, from the timestamp in its ID (ours, Spark's ``yyyyMMddHHmmss``,
    ``yyyyMMddHHmm`` or MapReduce's epoch milliseconds); None when the ID has none."""
    found = _OUR_JOB_ID.match(job_id) or _HADOOP_JOB_ID.match(job_id)
    if found is None:
        return None
    digits = found.group(1)
    formats = {14: "%Y%m%d%H%M%S", 12: "%Y%m%d%H%M"}
    try:
        if len(digits) in formats:
            moment = datetime.datetime.strptime(digits, formats[len(digits)])
            started = moment.replace(tzinfo=datetime.UTC).timestamp()
        elif len(digits) == 13:
            started = int(digits) / 1000
        else:
            return None
    except ValueError:
        return None
    plausible = 946684800 <= started <= time.time() + 86400  # 2000 .. tomorrow
    return started if plausible else None
