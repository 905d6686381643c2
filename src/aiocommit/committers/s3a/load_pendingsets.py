"""Job stage: load every committed task's pending set.

pre:  the job's tasks saved their pending sets; nothing of the job is visible yet (or, on
      a re-run, some uploads were completed by an earlier run).
post: every pending set parsed and valid (Hadoop's checks), of this job; every
      destination under the destination directory (never in ``_temporary`` or
      ``__magic``), none claimed twice; every upload still outstanding or already
      completed into its destination (``LoadedPending.completed``).
fail: ``ManifestError`` / ``OutputConflict`` naming the file; nothing visible changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.s3a.completed import holds
from aiocommit.errors import ManifestError, NotFound, OutputConflict
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.layout import TEMPORARY
from aiocommit.protocol.pending import (
    MAGIC,
    PENDINGSET_SUFFIX,
    PendingSet,
    SinglePendingCommit,
    decode_pendingset,
    pendingsets_dir,
)
from aiocommit.stores.base import is_under, relative_to


@dataclass
class LoadedPending:
    """The pending sets a job commit loaded, and what it found about their uploads."""

    digests: dict[str, str] = field(default_factory=dict)
    commits: list[SinglePendingCommit] = field(default_factory=list)
    destinations: dict[str, SinglePendingCommit] = field(default_factory=dict)
    #: destinations whose upload was already completed (an earlier, interrupted run)
    completed: set[str] = field(default_factory=set)
    #: the task commits' statistics, aggregated
    task_stats: IOStatistics = field(default_factory=IOStatistics)


def destination_of(context: StageContext, commit: SinglePendingCommit) -> str:
    """The store path a commit completes into, checked against the job's destination."""
    try:
        path = context.ops.store.unqualify(commit.uri)
    except ValueError as error:
        raise ManifestError(
            f"pending commit for {commit.uri!r} is not in this store", path=commit.filename
        ) from error
    if path != "/" + commit.destination_key:
        raise ManifestError(
            f"pending commit's uri {commit.uri!r} and destinationKey "
            f"{commit.destination_key!r} disagree",
            path=commit.filename,
        )
    dest = context.layout.dest
    if not is_under(path, dest) or path == dest:
        raise ManifestError(
            f"pending commit writes {path!r}, outside the destination {dest!r}",
            path=commit.filename,
        )
    top = relative_to(path, dest).split("/", 1)[0]
    if top in (TEMPORARY, MAGIC) or any(s in ("", ".", "..") for s in path.split("/")[1:]):
        raise ManifestError(
            f"pending commit writes {path!r}, inside the job's own directories",
            path=commit.filename,
        )
    return path


async def list_pendingset_names(context: StageContext) -> list[str]:
    """The names of the job's pending sets, sorted."""
    names: list[str] = []
    try:
        async for page in context.ops.list_dir(pendingsets_dir(context.layout)):
            names.extend(s.name for s in page if s.name.endswith(PENDINGSET_SUFFIX))
    except NotFound:
        pass
    return sorted(names)


async def load_pendingsets_stage(
    context: StageContext, mops: MultipartOperations, names: Sequence[str]
) -> LoadedPending:
    loaded = LoadedPending()
    sets: dict[str, PendingSet] = {}
    directory = pendingsets_dir(context.layout)
    async with stage(context, S3.JOB_STAGE_LOAD_PENDINGSETS):

        async def load(name: str) -> None:
            path = f"{directory}/{name}"
            data = await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING_SET)
            loaded.digests[name] = hashlib.sha256(data).hexdigest()
            pending = decode_pendingset(data, path=context.qualify(path))
            if pending.job_id != context.layout.job_id:
                raise ManifestError(
                    f"pending set is of job {pending.job_id!r}, not {context.layout.job_id!r}",
                    path=context.qualify(path),
                )
            for commit in pending.commits:
                commit.filename = context.qualify(path)
            sets[name] = pending
            loaded.task_stats.aggregate(pending.iostatistics)

        await parallel(list(names), load, workers=context.ops.workers)
        # the tasks committed, as the manifest committer counts its manifests
        context.stats.increment(S.COMMITTER_TASKS_COMPLETED, len(sets))
        for name in sorted(sets):
            for commit in sets[name].commits:
                destination = destination_of(context, commit)
                other = loaded.destinations.get(destination)
                if other is not None:
                    raise OutputConflict(
                        f"two tasks claim {destination}: {other.task_id} and {commit.task_id}",
                        operation="load_pendingsets",
                        path=context.qualify(destination),
                    )
                loaded.destinations[destination] = commit
                loaded.commits.append(commit)
        await _check_uploads(context, mops, loaded)
    return loaded


async def _check_uploads(
    context: StageContext, mops: MultipartOperations, loaded: LoadedPending
) -> None:
    """Every upload is outstanding, or was completed into its destination by an earlier
    run: one listing of the destination's uploads (1000 a page), a HEAD per missing one."""
    if not loaded.commits:
        return
    outstanding: set[tuple[str, str]] = set()
    async for page in mops.list_uploads(context.layout.dest.rstrip("/") + "/"):
        outstanding.update((u.path, u.upload_id) for u in page)
    missing = [
        c for c in loaded.commits if ("/" + c.destination_key, c.upload_id) not in outstanding
    ]

    async def check(commit: SinglePendingCommit) -> None:
        path = "/" + commit.destination_key
        if await holds(context, path, commit):
            loaded.completed.add(path)
            return
        raise ManifestError(
            f"upload {commit.upload_id} of {commit.uri} no longer exists (aborted, or "
            "expired by a lifecycle rule) and its destination does not hold it",
            path=commit.filename,
        )

    await parallel(missing, check, workers=context.ops.workers)
