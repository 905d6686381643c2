"""One file into place: the rename of a manifest entry and the recovery rule that makes
it re-runnable, shared by the rename stage (in this process and in worker processes),
validation and abort.

The recovery rule (``commit_file``): a rename whose source is gone is done when the
destination holds the manifest's file (same etag, or same size where etags are not kept
through renames); counted as recovered when an earlier attempt of this run may have
applied, else as already committed (a re-run). A destination that exists while the
source is still there and is the same file (a copy-then-delete rename interrupted before
its delete) is finished by deleting the source.
"""

from __future__ import annotations

import posixpath
import time

import anyio

from aiocommit.committers.common.context import StageContext
from aiocommit.errors import AlreadyExists, CommitError, NotFound, OutputConflict, StoreError
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import SHARED_ATTEMPTS_DIR
from aiocommit.stores.base import FileStatus, parent_of

Entry = tuple[str, str, int, str | None]


class AttemptCountdown:
    """One manifest's files still to rename, and its task attempt directory."""

    __slots__ = ("attempt_dir", "left")

    def __init__(self, attempt_dir: str, left: int) -> None:
        self.attempt_dir = attempt_dir
        self.left = left


def deletes_attempt_dirs_early(context: StageContext) -> bool:
    """Are task attempt directories deleted as their manifests finish? Only where cleanup
    would delete them one by one anyway (the same calls, moved earlier)."""
    options = context.options
    return (
        not options.cleanup_skip
        and options.cleanup_parallel_delete
        and not context.ops.capabilities.fast_directory_delete
    )


def file_done(countdown: AttemptCountdown, files: int = 1) -> bool:
    """Count ``files`` renamed files of ``countdown``'s manifest: True after its last one."""
    countdown.left -= files
    return not countdown.left


async def delete_attempt_dir(context: StageContext, countdown: AttemptCountdown) -> None:
    """Delete a finished manifest's task attempt directory (best effort: cleanup deletes
    what is left). Never the shared attempts directory, which holds other manifests'
    files: cleanup deletes it."""
    if posixpath.basename(countdown.attempt_dir) == SHARED_ATTEMPTS_DIR:
        return
    try:
        deleted = await context.ops.delete(countdown.attempt_dir, recursive=True)
    except StoreError as error:
        context.log.info("task attempt directory left for cleanup: %s", error)
        return
    if deleted:  # a re-run finds the directories of manifests it had finished gone
        context.stats.increment(S.COMMITTER_TASK_ATTEMPT_DIRECTORIES_DELETED)


def holds(status: FileStatus | None, size: int, etag: str | None, *, etags_kept: bool) -> bool:
    """Does ``status`` describe the manifest's file (etag when comparable, else size)?"""
    if status is None or status.is_dir:
        return False
    if etags_kept and etag is not None and status.etag is not None:
        return status.etag == etag
    return status.size == size


def same_file(first: FileStatus, second: FileStatus, *, etags_kept: bool) -> bool:
    """Are two paths provably one file's content (checksum, else etag kept by rename)?"""
    if first.is_dir or second.is_dir or first.size != second.size:
        return False
    if first.checksum is not None and second.checksum is not None:
        return first.checksum == second.checksum
    if etags_kept and first.etag is not None and second.etag is not None:
        return first.etag == second.etag
    return False


async def commit_file(context: StageContext, entry: Entry) -> None:
    """Rename one file into place, recovering as the module docstring says."""
    source, dest, size, etag = entry
    ops = context.ops
    capabilities = ops.capabilities
    etags_kept = capabilities.etags_preserved_in_rename
    if context.options.delete_target_files:
        with context.stats.track(S.OP_DELETE_FILE_UNDER_DESTINATION):
            existing = await ops.stat_or_none(dest)
            replace = (
                existing is not None
                and not existing.is_dir  # a directory is never replaced by a file
                and not holds(existing, size, etag, etags_kept=etags_kept)
            )
            if replace and await ops.stat_or_none(source) is not None:
                await ops.delete(dest)
                context.stats.increment(S.COMMITTER_TARGET_FILES_DELETED)
    source_etag = etag if context.options.use_source_etag and capabilities.etags else None
    started = time.perf_counter()
    try:
        try:
            await ops.rename(source, dest, source_etag=source_etag)  # nearly always all
        except (NotFound, AlreadyExists) as error:
            await _recover_rename(context, entry, source_etag, etags_kept, error)
    except BaseException:
        context.stats.record_duration(
            S.COMMIT_FILE_RENAME, (time.perf_counter() - started) * 1000, failed=True
        )
        raise
    context.stats.record_duration(S.COMMIT_FILE_RENAME, (time.perf_counter() - started) * 1000)


def batches_commits(context: StageContext) -> bool:
    """Can ``commit_files`` batch the renames (else it commits each with ``commit_file``)?
    The store batches renames (``StoreOperations.rename_batcher``), and no existing
    destination file is to be deleted first (a per-file check ahead of its rename)."""
    return not context.options.delete_target_files and context.ops.rename_batcher() is not None


async def commit_files(context: StageContext, entries: list[Entry]) -> None:
    """``commit_file`` of each entry, for a caller that checked ``batches_commits``: the
    renames made in batches (``StoreOperations.rename_batch``), a rename that failed
    recovered as ``commit_file`` recovers it; each file counted as ``commit_file``
    counts it. Where the store stops batching (a rate paces its calls), the rest are
    committed one by one, concurrently."""
    ops = context.ops
    stats = context.stats
    capabilities = ops.capabilities
    etags_kept = capabilities.etags_preserved_in_rename
    use_etags = context.options.use_source_etag and capabilities.etags
    renames = [(source, dest, etag if use_etags else None) for source, dest, _, etag in entries]
    done = 0
    while done < len(entries):
        batch = ops.rename_batcher()
        if batch is None:
            async with anyio.create_task_group() as group:
                for entry in entries[done:]:
                    group.start_soon(commit_file, context, entry)
            return
        started = time.perf_counter()
        outcomes = await ops.rename_batch(batch, renames[done:] if done else renames)
        failed = len(outcomes) - outcomes.count(None)
        stats.record_durations(
            S.COMMIT_FILE_RENAME, (time.perf_counter() - started) * 1000, len(outcomes) - failed
        )
        if failed:
            for index, error in enumerate(outcomes, done):
                if error is None:
                    continue
                try:
                    if not isinstance(error, NotFound | AlreadyExists):
                        raise error
                    await _recover_rename(
                        context, entries[index], renames[index][2], etags_kept, error
                    )
                except BaseException:
                    stats.record_duration(
                        S.COMMIT_FILE_RENAME, (time.perf_counter() - started) * 1000, failed=True
                    )
                    raise
                stats.record_duration(S.COMMIT_FILE_RENAME, (time.perf_counter() - started) * 1000)
        done += len(outcomes)


#: renames of one file tried while its destination's parent keeps vanishing
_PARENT_RETRIES = 3


async def _recover_rename(
    context: StageContext,
    entry: Entry,
    source_etag: str | None,
    etags_kept: bool,
    error: NotFound | AlreadyExists,
) -> None:
    """After a rename of ``entry`` failed with ``error``: recreate a vanished parent and
    rename again, or settle a missing source or an existing destination."""
    source, dest, _, _ = entry
    ops = context.ops
    renames = 1
    while (
        isinstance(error, NotFound)
        and error.path not in (None, source)
        and ops.capabilities.directories
    ):
        if renames == _PARENT_RETRIES:
            raise CommitError("destination parent keeps vanishing", operation="rename", path=dest)
        await ops.mkdirs(parent_of(dest))  # the parent vanished after create_dirs
        renames += 1
        try:
            await ops.rename(source, dest, source_etag=source_etag)
            return
        except (NotFound, AlreadyExists) as again:
            error = again
    if isinstance(error, NotFound):
        await _recover_missing_source(context, error.attempts, entry, etags_kept)
    else:
        await _resolve_existing_dest(context, error.attempts, entry, etags_kept)


async def _recover_missing_source(
    context: StageContext, attempts: int, entry: Entry, etags_kept: bool
) -> None:
    source, dest, size, etag = entry
    status = await context.ops.stat_or_none(dest)
    if holds(status, size, etag, etags_kept=etags_kept):
        context.stats.increment(
            S.COMMIT_FILE_RENAME_RECOVERED if attempts > 1 else S.COMMITTER_FILES_ALREADY_COMMITTED
        )
        return
    raise CommitError(
        f"rename source {context.qualify(source)} is gone and the destination does not hold "
        f"its file (size {size}, etag {etag})",
        operation="rename",
        path=context.qualify(dest),
    )


async def _resolve_existing_dest(
    context: StageContext, attempts: int, entry: Entry, etags_kept: bool
) -> None:
    source, dest, _, _ = entry
    ops = context.ops
    source_status = await ops.stat_or_none(source)
    if source_status is None:
        await _recover_missing_source(context, attempts, entry, etags_kept)
        return
    dest_status = await ops.stat_or_none(dest)
    if dest_status is not None and same_file(source_status, dest_status, etags_kept=etags_kept):
        await ops.delete(source)  # a copy-then-delete rename stopped before its delete
        context.stats.increment(S.COMMIT_FILE_RENAME_RECOVERED)
        return
    if dest_status is not None and dest_status.is_dir:
        raise OutputConflict(
            "destination is a directory, and a file is never put in a directory's place "
            f"(source {context.qualify(source)})",
            operation="rename",
            path=context.qualify(dest),
        )
    raise OutputConflict(
        "destination already exists and is not this job's file "
        f"(source {context.qualify(source)}); "
        "set delete_target_files=True to replace existing files",
        operation="rename",
        path=context.qualify(dest),
    )
