"""The rename stage: every entry of the loaded manifests into place.

pre:  every manifest loaded and checked; target directories exist; the commit plan is
      saved, so a re-run commits exactly these manifests.
post: every entry's file is at its destination, with the manifest's etag (where the
      store keeps etags through renames) or size. Where cleanup would delete task attempt
      directories one by one (``deletes_attempt_dirs_early``), each manifest's attempt
      directory is deleted as soon as its last file is in place, overlapping the other
      renames; a failed delete is left to cleanup. This is safe before the commit point:
      the directory then holds no file of the plan, a re-run finds each source gone and
      its file at the destination, and ``abort_job`` recreates a source's parent before
      moving the file back.
fail: the first failure cancels the other renames and is raised naming source and
      destination. Already-renamed files stay renamed; a re-run finishes the rest, and
      ``abort_job`` moves them back.

Each file goes into place by ``commit_file`` (``stages.commit_file``: the recovery rule
that makes a re-run finish what a failed run left); where the store batches renames, in
this process too by ``commit_files``, in chunks of up to ``CHUNK_FILES`` entries (whole
small manifests together), so a job of many small tasks costs a few tasks and store
calls per chunk, not per file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

from aiocommit.committers.common.context import Progress, StageContext, parallel, stage
from aiocommit.committers.manifest import rename_workers
from aiocommit.committers.manifest.commit_file import (
    AttemptCountdown,
    Entry,
    batches_commits,
    commit_file,
    commit_files,
    delete_attempt_dir,
    deletes_attempt_dirs_early,
    file_done,
)
from aiocommit.committers.manifest.load_manifests import LoadedJob
from aiocommit.protocol import statistics as S


async def rename_files_stage(
    context: StageContext, loaded: LoadedJob, started: rename_workers.RenameWorkers | None = None
) -> None:
    """Rename every entry, in this event loop or over worker processes (``processes``;
    those ``started`` ahead are used first)."""
    async with stage(context, S.JOB_STAGE_RENAME_FILES):
        workers = rename_workers.worker_count(context, loaded)
        context.stats.set_gauge("job_rename_processes", workers)
        if workers > 1:
            files_done, bytes_done = await rename_workers.rename_in_workers(
                context, loaded, workers, started
            )
        else:
            files_done, bytes_done = await _rename_here(context, loaded)
    context.stats.increment(S.COMMITTER_FILES_COMMITTED, files_done)
    context.stats.increment(S.COMMITTER_BYTES_COMMITTED, bytes_done)
    context.report(
        Progress(
            S.JOB_STAGE_RENAME_FILES, files_done, loaded.file_count, bytes_done, loaded.total_size
        )
    )


class _Renamed:
    """Files and bytes renamed so far; progress reported at most every 0.2 s (the
    clock read once per 64 files)."""

    __slots__ = ("bytes", "context", "files", "last_report", "loaded")

    def __init__(self, context: StageContext, loaded: LoadedJob) -> None:
        self.context = context
        self.loaded = loaded
        self.files = 0
        self.bytes = 0
        self.last_report = 0.0

    def add(self, files: int, size: int) -> None:
        before = self.files
        self.files += files
        self.bytes += size
        if self.files >> 6 == before >> 6:
            return
        now = time.monotonic()
        if now - self.last_report > 0.2:
            self.last_report = now
            loaded = self.loaded
            self.context.report(
                Progress(
                    S.JOB_STAGE_RENAME_FILES,
                    self.files,
                    loaded.file_count,
                    self.bytes,
                    loaded.total_size,
                )
            )


async def _rename_here(context: StageContext, loaded: LoadedJob) -> tuple[int, int]:
    if batches_commits(context):
        return await _rename_chunks_here(context, loaded)
    renamed = _Renamed(context, loaded)
    dest_root = context.layout.dest

    early = deletes_attempt_dirs_early(context)

    def entries() -> Iterator[tuple[Entry, AttemptCountdown]]:
        for manifest in loaded.manifests:
            countdown = AttemptCountdown(manifest.attempt_dir, manifest.file_count)
            for entry in loaded.entries(manifest, dest_root):
                yield entry, countdown

    async def worker(item: tuple[Entry, AttemptCountdown]) -> None:
        entry = item[0]
        await commit_file(context, entry)
        if file_done(item[1]) and early:
            await delete_attempt_dir(context, item[1])
        renamed.add(1, entry[2])

    # a generator: parallel() cannot see how many entries there are, so a small job
    # would start a worker for every place in the store's door
    workers = min(context.ops.workers, loaded.file_count)
    await parallel(entries(), worker, workers=workers)
    return renamed.files, renamed.bytes


#: a chunk: entries renamed as one store call, and the manifests' countdowns it advances
#: (each with its count of the chunk's entries)
Chunk = tuple[list[Entry], list[tuple[AttemptCountdown, int]]]


def chunks(loaded: LoadedJob, dest_root: str, size: int) -> Iterator[Chunk]:
    """The entries of every manifest in chunks of at most ``size``: small manifests
    together, a larger one cut into even pieces (100 entries go as 50 + 50)."""
    entries: list[Entry] = []
    counts: list[tuple[AttemptCountdown, int]] = []
    for manifest in loaded.manifests:
        countdown = AttemptCountdown(manifest.attempt_dir, manifest.file_count)
        if entries and len(entries) + manifest.file_count > size:
            yield entries, counts
            entries, counts = [], []
        if manifest.file_count <= size:
            entries.extend(loaded.entries(manifest, dest_root))
            counts.append((countdown, manifest.file_count))
            continue
        for piece in rename_workers.even_chunks(list(loaded.entries(manifest, dest_root)), size):
            yield piece, [(countdown, len(piece))]
    if entries:
        yield entries, counts


async def _rename_chunks_here(context: StageContext, loaded: LoadedJob) -> tuple[int, int]:
    """Where the store batches renames: chunks of ``CHUNK_FILES`` entries (whole small
    manifests together), each one store call, a few chunks in flight (as a rename worker
    does). A small job then costs a handful of tasks and thread hops, not one of each
    per file; the attempt directories a chunk finishes are deleted together."""
    renamed = _Renamed(context, loaded)
    early = deletes_attempt_dirs_early(context)

    async def worker(chunk: Chunk) -> None:
        entries, counts = chunk
        await commit_files(context, entries)
        finished = [countdown for countdown, count in counts if file_done(countdown, count)]
        if early and finished:
            await parallel(finished, partial(delete_attempt_dir, context), workers=len(finished))
        renamed.add(len(entries), sum(entry[2] for entry in entries))

    chunk = rename_workers.CHUNK_FILES
    workers = max(1, min(context.options.concurrency, context.ops.workers) // chunk)
    workers = min(workers, -(-loaded.file_count // chunk))
    await parallel(chunks(loaded, context.layout.dest, chunk), worker, workers=workers)
    return renamed.files, renamed.bytes
