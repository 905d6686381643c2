"""What jobs are under ``DEST/_temporary``: their attempts, manifests, size, age, state."""

from __future__ import annotations

import dataclasses
import datetime
import re
import time
from dataclasses import dataclass
from typing import Any

import anyio

from aiocommit.cli.exits import EXIT_NOT_FOUND, Problem
from aiocommit.errors import ManifestError, NotFound
from aiocommit.protocol.layout import (
    MANIFEST_SUFFIX,
    SUCCESS,
    TEMP_MANIFEST_SUFFIX,
    TEMPORARY,
    JobLayout,
)
from aiocommit.protocol.manifest import decode_manifest
from aiocommit.protocol.success import SuccessData, decode_success
from aiocommit.stores.base import Store, join


@dataclass
class JobInfo:
    """A job directory under ``DEST/_temporary``."""

    job_id: str
    attempts: list[int] = dataclasses.field(default_factory=list)
    manifests: int = 0
    pending_manifests: int = 0
    bad_manifests: int = 0
    files: int = 0
    size: int = 0
    started: float | None = None
    commit_started: bool = False
    committed: bool = False

    @property
    def state(self) -> str:
        if self.committed:
            return "committed (temporary files left)"
        if self.commit_started:
            return "commit started, unfinished"
        return "pending"

    def age(self, now: float) -> float | None:
        return None if self.started is None else max(0.0, now - self.started)

    def as_json(self, now: float) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "attempts": self.attempts,
            "manifests": self.manifests,
            "manifests_in_progress": self.pending_manifests,
            "bad_manifests": self.bad_manifests,
            "files": self.files,
            "size": self.size,
            "age_seconds": self.age(now),
            "state": self.state,
        }


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


async def local_mtime(store: Store, path: str) -> float | None:
    from aiocommit.stores.local import LocalStore

    if not isinstance(store, LocalStore):
        return None
    try:
        return (await anyio.Path(path).stat()).st_mtime
    except OSError:
        return None


async def children(store: Store, path: str) -> list[Any]:
    found: list[Any] = []
    try:
        async for page in store.list_dir(path):
            found.extend(page)
    except NotFound:
        return []
    return found


async def exists(store: Store, path: str) -> bool:
    try:
        await store.stat(path)
    except NotFound:
        return False
    return True


async def read_dest_success(store: Store, dest: str) -> SuccessData | None:
    """``DEST/_SUCCESS`` if it is there and readable."""
    try:
        data = await store.read_bytes(join(dest, SUCCESS))
        return decode_success(data, path=join(dest, SUCCESS))
    except (NotFound, ManifestError):
        return None


async def require_dir(store: Store, path: str) -> None:
    try:
        status = await store.stat(path)
    except NotFound:
        raise Problem(EXIT_NOT_FOUND, f"{store.qualify(path)}: no such directory") from None
    if not status.is_dir:
        raise Problem(EXIT_NOT_FOUND, f"{store.qualify(path)}: not a directory")


async def scan_job(
    store: Store, dest: str, job_id: str, committed_job: str | None, limiter: anyio.CapacityLimiter
) -> JobInfo:
    """What is under ``DEST/_temporary/JOB``: attempts, committed manifests and their size."""
    layout = JobLayout(dest, job_id)
    info = JobInfo(job_id, committed=committed_job == job_id)
    manifest_paths: list[str] = []
    for entry in await children(store, layout.job_dir):
        if not (entry.is_dir and entry.name.isdigit()):
            continue
        attempt = JobLayout(dest, job_id, int(entry.name))
        info.attempts.append(attempt.attempt)
        for manifest in await children(store, attempt.manifests_dir):
            if manifest.name.endswith(MANIFEST_SUFFIX):
                manifest_paths.append(manifest.path)
            elif manifest.name.endswith(TEMP_MANIFEST_SUFFIX):
                info.pending_manifests += 1
        info.commit_started |= await exists(store, attempt.commit_plan_path)
    info.attempts.sort()
    info.manifests = len(manifest_paths)

    async def load(path: str) -> None:
        async with limiter:
            try:
                manifest = decode_manifest(await store.read_bytes(path), path=path)
            except (NotFound, ManifestError):
                info.bad_manifests += 1
                return
        info.files += len(manifest.files)
        info.size += manifest.total_size

    async with anyio.create_task_group() as group:
        for path in manifest_paths:
            group.start_soon(load, path)
    info.started = job_started(job_id) or await local_mtime(store, layout.job_dir)
    return info


async def scan_jobs(store: Store, dest: str) -> list[JobInfo]:
    """Every job directory under ``DEST/_temporary``, oldest first (unknown ages last)."""
    await require_dir(store, dest)
    success = await read_dest_success(store, dest)
    committed_job = success.job_id if success is not None and success.success else None
    limiter = anyio.CapacityLimiter(32)
    jobs: list[JobInfo] = []
    for entry in await children(store, join(dest, TEMPORARY)):
        if entry.is_dir:
            jobs.append(await scan_job(store, dest, entry.name, committed_job, limiter))
    jobs.sort(key=lambda job: (job.started is None, job.started or 0.0, job.job_id))
    return jobs
