"""Stages of the zero-rename (S3A) committers: uploads are completed, never renamed.

Task side
    ``upload_pending``: one file becomes an uncompleted multipart upload of its final key.
        post: the upload holds every byte; nothing is visible at the destination.
        fail: the upload is aborted (best effort; job abort lists and aborts what is left).
    ``save_pendingset_stage``:
        pre:  the job is active (its pending sets directory exists).
        post: ``pendingsets/TASK.pendingset`` names exactly this attempt's uploads; an
              earlier attempt's set is replaced and its uploads aborted (last attempt wins).

Job side, in order
    ``load_pendingsets_stage``: every pending set parsed and valid (Hadoop's checks), of
        this job, every destination under the destination directory (never in
        ``_temporary`` or ``__magic``), no destination claimed twice, every upload still
        outstanding or already completed into its destination (a re-run). Nothing visible
        changed on failure.
    (conflicts: the shared ``resolve_conflicts`` stage, before and after completion)
    ``complete_uploads_stage``: every upload completed, in parallel under the job's limits;
        an upload already completed (a lost response, a re-run) counts as done when its
        destination holds the etag the parts complete into.
    ``abort_pending_stage``: every named upload aborted; with ``revert``, a destination
        already completed from one is deleted, so nothing of the job stays visible.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field

import anyio

from aiocommit.errors import (
    AlreadyExists,
    CommitError,
    ManifestError,
    NotFound,
    OutputConflict,
)
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
    encode_pendingset,
    pendingset_path,
    pendingsets_dir,
)
from aiocommit.stages.context import StageContext, parallel, stage
from aiocommit.stores.base import FileStatus, is_under, relative_to
from aiocommit.stores.multipart import multipart_etag

#: S3's smallest part but the last
MIN_PART_SIZE = 5 * 1024 * 1024


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


# -- task side ------------------------------------------------------------------------


async def upload_pending(
    context: StageContext,
    mops: MultipartOperations,
    dest_path: str,
    chunks: AsyncIterator[bytes],
    *,
    task_id: str,
) -> SinglePendingCommit:
    """Upload ``chunks`` (each a part, all but the last at least 5 MiB) as an uncompleted
    multipart upload of ``dest_path``; abort it if anything fails."""
    upload_id = await mops.create_upload(dest_path)
    etags: list[str] = []
    length = 0
    try:
        async for chunk in chunks:
            etags.append(await mops.upload_part(dest_path, upload_id, len(etags) + 1, chunk))
            length += len(chunk)
        if not etags:  # an empty file is one empty part
            etags.append(await mops.upload_part(dest_path, upload_id, 1, b""))
    except BaseException:
        await _abort_quietly(context, mops, dest_path, upload_id)
        raise
    context.stats.increment(S3.COMMITTER_COMMITS_CREATED)
    context.stats.increment(S3.COMMITTER_BYTES_UPLOADED, length)
    bucket = getattr(context.ops.store, "bucket", "")
    commit = SinglePendingCommit(
        uri=context.qualify(dest_path),
        upload_id=upload_id,
        bucket=str(bucket) or context.qualify("/").split("/")[2],
        destination_key=dest_path[1:],
        job_id=context.layout.job_id,
        task_id=task_id,
        etags=etags,
        length=length,
    )
    commit.touch()
    return commit


async def _abort_quietly(
    context: StageContext, mops: MultipartOperations, path: str, upload_id: str
) -> None:
    with anyio.CancelScope(shield=True):
        try:
            if await mops.abort_upload(path, upload_id):
                context.stats.increment(S3.COMMITTER_COMMITS_ABORTED)
        except Exception as error:  # job abort / cleanup lists and aborts what is left
            context.log.warning("could not abort upload %s of %s: %s", upload_id, path, error)


async def check_job_active(context: StageContext, stage_name: str) -> None:
    directory = pendingsets_dir(context.layout)
    if await context.ops.stat_or_none(directory) is None:
        raise CommitError(
            "job is not set up (or was committed or aborted): no pending sets directory",
            stage=stage_name,
            path=context.qualify(directory),
        )


async def save_pendingset_stage(
    context: StageContext,
    mops: MultipartOperations,
    task_id: str,
    task_attempt_id: str,
    commits: list[SinglePendingCommit],
    *,
    per_attempt: bool = False,
) -> PendingSet:
    """Save the task's pending set as ``TASK.pendingset`` (the last attempt to commit
    wins), or with ``per_attempt`` as ``ATTEMPT.pendingset``, for a caller that picks the
    winning attempts itself and commits exactly those (Spark)."""
    async with stage(context, S3.TASK_STAGE_SAVE_PENDINGSET):
        await check_job_active(context, S3.TASK_STAGE_SAVE_PENDINGSET)
        pending = PendingSet(
            job_id=context.layout.job_id,
            commits=commits,
            extra_data={"task.attempt.id": task_attempt_id},
            iostatistics=context.stats.snapshot(),
        )
        path = pendingset_path(context.layout, task_attempt_id if per_attempt else task_id)
        data = encode_pendingset(pending)
        try:
            await context.ops.write_bytes(path, data, overwrite=False)
        except AlreadyExists:
            try:
                earlier = decode_pendingset(
                    await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING_SET), path=path
                )
            except ManifestError:
                earlier = PendingSet()
            if [c.upload_id for c in earlier.commits] != [c.upload_id for c in commits]:
                # an earlier attempt of this task committed: the last attempt wins
                await abort_pending_stage(context, mops, earlier.commits, revert=False)
                await context.ops.write_bytes(path, data, overwrite=True)
        context.stats.increment(S.COMMITTER_TASKS_COMPLETED)
        return pending


# -- job side -------------------------------------------------------------------------


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


async def list_pendingset_names(context: StageContext) -> list[str]:
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

        await parallel(list(names), load, workers=context.options.concurrency)
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
        if await _holds(context, path, commit):
            loaded.completed.add(path)
            return
        raise ManifestError(
            f"upload {commit.upload_id} of {commit.uri} no longer exists (aborted, or "
            "expired by a lifecycle rule) and its destination does not hold it",
            path=commit.filename,
        )

    await parallel(missing, check, workers=context.options.concurrency)


async def _holds(context: StageContext, path: str, commit: SinglePendingCommit) -> bool:
    status: FileStatus | None = await context.ops.stat_or_none(path)
    return (
        status is not None
        and not status.is_dir
        and status.etag == multipart_etag(commit.etags)
        and status.size == commit.length
    )


async def walk_files(context: StageContext, root: str, skip: Callable[[str], bool]) -> list[str]:
    """Every file below ``root`` whose path ``skip`` does not refuse (nor anything below a
    refused directory); an absent ``root`` has none."""
    found: list[str] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            async for page in context.ops.list_dir(directory):
                for status in page:
                    if skip(status.path):
                        continue
                    if status.is_dir:
                        pending.append(status.path)
                    else:
                        found.append(status.path)
        except NotFound:
            continue
    return found


async def complete_uploads_stage(
    context: StageContext, mops: MultipartOperations, loaded: LoadedPending
) -> None:
    async with stage(context, S3.JOB_STAGE_COMPLETE_UPLOADS):

        async def complete(commit: SinglePendingCommit) -> None:
            path = "/" + commit.destination_key
            if path not in loaded.completed:
                try:
                    await mops.complete_upload(path, commit.upload_id, commit.etags)
                except NotFound:
                    # S3 documents NoSuchUpload for a completed upload: a retry after a
                    # lost response, or a re-run after a crash, finds it done
                    if not await _holds(context, path, commit):
                        raise
                    context.stats.increment(S3.COMMITTER_COMMITS_RECOVERED)
            context.stats.increment(S3.COMMITTER_COMMITS_COMPLETED)
            context.stats.increment(S.COMMITTER_FILES_COMMITTED)
            context.stats.increment(S.COMMITTER_BYTES_COMMITTED, commit.length)

        await parallel(loaded.commits, complete, workers=context.options.concurrency)


async def abort_pending_stage(
    context: StageContext,
    mops: MultipartOperations,
    commits: Iterable[SinglePendingCommit],
    *,
    revert: bool,
) -> None:
    """Abort every named upload; with ``revert``, delete a destination an earlier commit
    already completed from one (recognised by its etag)."""

    async def abort(commit: SinglePendingCommit) -> None:
        path = "/" + commit.destination_key
        if await mops.abort_upload(path, commit.upload_id):
            context.stats.increment(S3.COMMITTER_COMMITS_ABORTED)
        elif revert and await _holds(context, path, commit):
            await context.ops.delete(path)
            context.stats.increment(S3.COMMITTER_COMMITS_REVERTED)

    await parallel(list(commits), abort, workers=context.options.concurrency)


async def abort_outstanding_uploads(
    context: StageContext, mops: MultipartOperations, prefix: str
) -> int:
    """Abort every outstanding upload whose key starts with ``prefix``; returns how many."""
    uploads = [u async for page in mops.list_uploads(prefix) for u in page]
    aborted = 0

    async def abort(path_and_id: tuple[str, str]) -> None:
        nonlocal aborted
        if await mops.abort_upload(*path_and_id):
            aborted += 1

    await parallel(
        [(u.path, u.upload_id) for u in uploads], abort, workers=context.options.concurrency
    )
    context.stats.increment(S3.COMMITTER_PENDING_UPLOADS_ABORTED, aborted)
    return aborted
