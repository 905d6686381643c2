"""The magic committer (Hadoop's ``MagicS3GuardCommitter``), over the shared S3A job
side: a task streams each file to S3 as a multipart upload of its final key, never
completed by the task::

    write: upload parts as they fill -> save __base/REL.pending + a zero-byte marker
    -> commit: collect the attempt's .pending files into its pending set, delete its
       magic directory
    -> abort: abort every upload its .pending files (and its upload records, saved as
       each upload starts) name, delete its magic directory

Nothing is visible at the destination until job commit completes the uploads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio

from aiocommit.committers.common.committer import AttemptFile, TaskAttempt, WrittenFile
from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.s3a.abort_uploads import (
    abort_pending_stage,
    abort_recorded_stage,
    forget_recorded_uploads,
    recorded_uploads,
)
from aiocommit.committers.s3a.committer import S3ACommitter, refuse_unsaved
from aiocommit.committers.s3a.save_pendingset import save_pendingset_stage
from aiocommit.committers.s3a.staging import check_active, file_chunks
from aiocommit.committers.s3a.upload import upload_pending
from aiocommit.committers.s3a.walk import walk_files
from aiocommit.errors import ManifestError, first_error
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import (
    PENDING_SUFFIX,
    PendingSet,
    SinglePendingCommit,
    decode_pending,
    encode_pending,
)
from aiocommit.stores.base import join, relative_to


async def bytes_chunks(data: bytes, part_size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), part_size):
        yield data[start : start + part_size]


async def write_magic(
    context: StageContext,
    attempt: TaskAttempt,
    relative: str,
    chunks: AsyncIterator[bytes],
) -> SinglePendingCommit:
    """Upload ``chunks`` (parts: all but the last at least 5 MiB) as an uncompleted
    upload of ``DEST/relative``, then save ``__base/relative.pending`` and its marker."""
    mops = MultipartOperations(context.ops)
    dest_path = join(context.layout.dest, relative)
    magic_path = join(attempt.magic_base, relative)
    commit = await upload_pending(
        context,
        mops,
        dest_path,
        chunks,
        task_id=attempt.task_id,
        task_attempt_id=attempt.task_attempt_id,
    )
    context.stats.increment(S3.COMMITTER_MAGIC_FILES_CREATED)
    commit.iostatistics = context.stats.snapshot()
    try:
        await context.ops.write_bytes(magic_path + PENDING_SUFFIX, encode_pending(commit))
        await context.ops.write_bytes(magic_path, b"")
    except BaseException:
        with anyio.CancelScope(shield=True):
            await abort_pending_stage(context, mops, [commit], revert=False)
        raise
    return commit


class MagicFile:
    """A streaming writer of one magic file: a part is uploaded each time ``part_size``
    bytes have been written (``write`` waits for it), the rest when the file closes."""

    def __init__(self, send: anyio.abc.ObjectSendStream[bytes], part_size: int) -> None:
        self._send = send
        self._part_size = part_size
        self._buffer = bytearray()

    async def write(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= self._part_size:
            part = bytes(self._buffer[: self._part_size])
            del self._buffer[: self._part_size]
            await self._send.send(part)

    async def finish(self) -> None:
        if self._buffer:
            await self._send.send(bytes(self._buffer))
            self._buffer.clear()
        await self._send.aclose()


@asynccontextmanager
async def stream_magic(
    context: StageContext,
    attempt: TaskAttempt,
    relative: str,
    part_size: int,
) -> AsyncIterator[AttemptFile]:
    """``open`` for the magic committer: the upload runs beside the writer; an exception
    in the writer's block cancels it, which aborts the upload."""
    send, receive = anyio.create_memory_object_stream[bytes](0)
    file = MagicFile(send, part_size)

    async def parts() -> AsyncIterator[bytes]:
        async with receive:
            async for part in receive:
                yield part

    failure: BaseException | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(write_magic, context, attempt, relative, parts())
            try:
                yield file
                await file.finish()
            except BaseException as error:  # the writer's block failed: abort the upload
                failure = error
                group.cancel_scope.cancel()
            finally:
                send.close()
    except BaseExceptionGroup as raised:  # the upload failed
        raise first_error(raised) from None
    finally:
        receive.close()  # the upload may have been cancelled before reading a part
    if failure is not None:
        raise failure


async def magic_pending(context: StageContext, base: str) -> list[SinglePendingCommit]:
    """Every ``.pending`` file below ``base``, checked to name the destination its path
    says."""
    paths = [
        p for p in await walk_files(context, base, lambda p: False) if p.endswith(PENDING_SUFFIX)
    ]
    commits: list[SinglePendingCommit] = []

    async def load(path: str) -> None:
        commits.append(
            decode_pending(
                await context.ops.read_bytes(path, statistic=S.OP_LOAD_PENDING), path=path
            )
        )

    await parallel(paths, load, workers=context.ops.workers)
    for commit in commits:
        expected = join(
            context.layout.dest, relative_to(str(commit.filename)[: -len(PENDING_SUFFIX)], base)
        )
        if "/" + commit.destination_key != expected:
            raise ManifestError(
                f"pending file names {commit.destination_key!r}, not {expected!r}",
                path=commit.filename,
            )
    return sorted(commits, key=lambda c: c.destination_key)


async def commit_magic(
    context: StageContext, attempt: TaskAttempt, *, per_attempt: bool = False
) -> PendingSet:
    """Magic task commit: collect the attempt's ``.pending`` files into its pending set
    (``per_attempt``: see ``save_pendingset_stage``), then delete the attempt's magic
    directory."""
    mops = MultipartOperations(context.ops)
    async with stage(context, S.TASK_STAGE_COMMIT):
        await check_active(context)
        commits = await magic_pending(context, attempt.magic_base)
        for commit in commits:  # the writers' statistics travel in their .pending files
            context.stats.aggregate(commit.iostatistics)
        pending = await save_pendingset_stage(
            context,
            mops,
            attempt.task_id,
            attempt.task_attempt_id,
            commits,
            per_attempt=per_attempt,
        )
        await context.ops.delete(attempt.magic_base.rsplit("/", 1)[0], recursive=True)
    return pending


async def abort_magic(context: StageContext, attempt: TaskAttempt) -> None:
    """Magic task abort: abort every upload the attempt's ``.pending`` files name and
    delete its magic directory. Idempotent."""
    mops = MultipartOperations(context.ops)
    async with stage(context, S.TASK_STAGE_ABORT_TASK):
        commits = await magic_pending(context, attempt.magic_base)
        await abort_pending_stage(context, mops, commits, revert=False)
        # uploads a writer that died started, before their .pending files were saved
        settled = {c.upload_id for c in commits}
        recorded = await recorded_uploads(context, attempt.task_attempt_id, settled=settled)
        await abort_recorded_stage(context, mops, recorded)
        await context.ops.delete(attempt.magic_base.rsplit("/", 1)[0], recursive=True)
        await forget_recorded_uploads(context, attempt.task_attempt_id)


class MagicCommitter(S3ACommitter):
    """Hadoop's ``MagicS3GuardCommitter``: a task streams each file as an uncompleted
    upload of its final key; task commit collects the attempt's ``.pending`` files."""

    async def setup_task(self, context: StageContext, attempt: TaskAttempt) -> TaskAttempt:
        await check_active(context)
        return attempt

    async def write_bytes(
        self, context: StageContext, attempt: TaskAttempt, relative: str, data: bytes
    ) -> None:
        chunks = bytes_chunks(data, self.settings_for(context).part_size)
        await write_magic(context, attempt, relative, chunks)

    def open(
        self, context: StageContext, attempt: TaskAttempt, relative: str
    ) -> AbstractAsyncContextManager[AttemptFile]:
        return stream_magic(context, attempt, relative, self.settings_for(context).part_size)

    async def write_file(
        self, context: StageContext, attempt: TaskAttempt, relative: str, local_path: str
    ) -> None:
        chunks = file_chunks(local_path, self.settings_for(context).part_size)
        await write_magic(context, attempt, relative, chunks)

    async def commit_task(
        self,
        context: StageContext,
        attempt: TaskAttempt,
        *,
        per_attempt: bool,
        written: Sequence[WrittenFile] | None = None,
        save: bool = True,
    ) -> TaskManifest | PendingSet:
        # ``written`` is not needed: the pending set holds the attempt's own uploads
        refuse_unsaved(self.name, save)
        return await commit_magic(context, attempt, per_attempt=per_attempt)

    async def abort_task(self, context: StageContext, attempt: TaskAttempt) -> None:
        await abort_magic(context, attempt)
