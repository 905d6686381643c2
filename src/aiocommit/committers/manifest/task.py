"""Task-side stages: set up an attempt, scan its output in parallel, save its manifest,
abort it.

Task commit
    pre:  the attempt directory holds the attempt's output and nothing else; the job's
          manifests directory exists (the job is still active).
    post: ``manifests/TASK-manifest.json`` lists every file of this attempt (source,
          destination, size, etag) and every directory, and replaced any manifest an
          earlier attempt of the task saved: the last attempt to commit wins. Saved
          under the attempt's own name instead (``save_as``), it replaces nothing.
          With ``written`` (the caller's list of the files: relative path, size and
          the destination path when another) the attempt directory is not listed: the
          manifest lists exactly those. Not saved (``save=False``), it is returned for
          the caller to carry to the job commit (an engine's commit message).
    fail: nothing in the destination changes; a half-written manifest exists only under
          the attempt's ``.tmp`` name, which job commit never loads. A symbolic link in
          the attempt's output is refused (``CommitError`` naming it), never followed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio
import msgspec

from aiocommit.committers.common.committer import link_refused
from aiocommit.committers.common.context import StageContext, stage
from aiocommit.errors import CommitError
from aiocommit.protocol import statistics as S
from aiocommit.protocol.codec import encode_pretty
from aiocommit.protocol.layout import check_output_name
from aiocommit.protocol.manifest import DirEntry, DirState, FileEntry, TaskManifest, encode_manifest
from aiocommit.runtime.turns import take_turn
from aiocommit.stores.base import FileStatus, join, relative_to

if TYPE_CHECKING:
    from aiocommit.committers.common.committer import WrittenFile


async def setup_task_stage(context: StageContext, attempt_dir: str) -> None:
    async with stage(context, S.TASK_STAGE_SETUP):
        await context.ops.mkdirs(attempt_dir)


async def scan_task_attempt(
    context: StageContext, attempt_dir: str
) -> tuple[list[FileEntry], list[DirEntry]]:
    """List the attempt directory tree with directories listed concurrently (bounded by
    the job limiter), and probe each destination directory's state.

    Returns the file entries sorted by destination and the directory entries.
    """
    ops = context.ops
    dest_root = context.layout.dest
    keep_etags = ops.capabilities.etags
    files: list[FileEntry] = []
    dirs: list[DirEntry] = []

    async def probe(dest_dir: str, level: int) -> None:
        dirs.append(await _dir_entry(context, dest_dir, level))

    async def scan(directory: str, group: anyio.abc.TaskGroup) -> None:
        with context.stats.track(S.OP_DIRECTORY_SCAN):
            async for page in ops.list_dir(directory):
                await take_turn()  # pages of several listings can end in one loop turn
                for status in page:
                    relative = relative_to(status.path, attempt_dir)
                    if status.is_link:
                        raise link_refused(context.qualify(status.path), operation="list_dir")
                    if status.is_dir:
                        dest_dir = join(dest_root, relative)
                        group.start_soon(probe, dest_dir, relative.count("/") + 1)
                        group.start_soon(scan, status.path, group)
                    else:
                        files.append(_file_entry(context, status, relative, keep_etags))

    async with anyio.create_task_group() as group:
        await scan(attempt_dir, group)
    dirs.sort(key=lambda entry: entry.dest)
    return await sorted_in_slices(files), dirs


async def _dir_entry(context: StageContext, dest_dir: str, level: int) -> DirEntry:
    """A destination directory's entry: its state found now."""
    status = await context.ops.stat_or_none(dest_dir)
    state = (
        DirState.NOT_FOUND if status is None else DirState.DIR if status.is_dir else DirState.FILE
    )
    return DirEntry(context.to_uri(dest_dir), int(state), level)


async def listed_task_attempt(
    context: StageContext, attempt_dir: str, written: Sequence[WrittenFile]
) -> tuple[list[FileEntry], list[DirEntry]]:
    """``scan_task_attempt``'s result for an attempt whose files the caller lists
    (``WrittenFile``: relative path, size, and the destination path when another):
    nothing is listed; each destination directory they land in is probed.
    ``ReservedName`` for a destination path the protocol keeps."""
    dest_root = context.layout.dest
    files = []
    landing: list[str] = []
    for source, size, *elsewhere in written:
        relative = check_output_name(elsewhere[0]) if elsewhere else source
        landing.append(relative)
        files.append(
            FileEntry(
                source=context.to_uri(join(attempt_dir, source)),
                dest=context.to_uri(join(dest_root, relative)),
                size=size,
                etag=None,
            )
        )
    levels: dict[str, int] = {}
    for relative in landing:
        parts = relative.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            levels.setdefault("/".join(parts[:depth]), depth)
    dirs: list[DirEntry] = []

    async def probe(relative: str) -> None:
        dirs.append(await _dir_entry(context, join(dest_root, relative), levels[relative]))

    async with anyio.create_task_group() as group:
        for relative in levels:
            group.start_soon(probe, relative)
    dirs.sort(key=lambda entry: entry.dest)
    return await sorted_in_slices(files), dirs


#: entries sorted or encoded between two chances for the caller's event loop
SLICE_ENTRIES = 4096


async def sorted_in_slices(files: list[FileEntry]) -> list[FileEntry]:
    """``files`` sorted by destination, a slice at a time (100,000 entries sorted at
    once hold the event loop for 0.1 s): slices sorted, then merged."""
    if len(files) <= SLICE_ENTRIES:
        return sorted(files, key=_by_dest)
    runs = []
    for start in range(0, len(files), SLICE_ENTRIES):
        await take_turn()
        runs.append(sorted(files[start : start + SLICE_ENTRIES], key=_by_dest))
    merged: list[FileEntry] = []
    merging = heapq.merge(*runs, key=_by_dest)
    while True:
        await take_turn()
        before = len(merged)
        merged.extend(itertools.islice(merging, SLICE_ENTRIES))
        if len(merged) == before:
            return merged


def _by_dest(entry: FileEntry) -> str:
    return entry.dest


async def encode_manifest_in_slices(manifest: TaskManifest) -> bytes:
    """``encode_manifest(manifest)``, byte for byte, with the file entries encoded a slice
    at a time (100,000 entries encoded at once hold the event loop for 0.1 s)."""
    files = manifest.files
    if len(files) <= SLICE_ENTRIES:
        return encode_manifest(manifest)
    frame = encode_manifest(msgspec.structs.replace(manifest, files=[]))
    cut = frame.index(_EMPTY_FILES)
    parts = [frame[:cut], b'"files": [\n']
    for start in range(0, len(files), SLICE_ENTRIES):
        await take_turn()
        if start:
            parts.append(b",\n")
        # "[\n  {...},\n  {...}\n]" -> the entries, two spaces deeper, as in the manifest
        chunk = encode_pretty(files[start : start + SLICE_ENTRIES])
        parts.append(b"  " + chunk[2:-2].replace(b"\n", b"\n  "))
    parts.append(b"\n  ]")
    parts.append(frame[cut + len(_EMPTY_FILES) :])
    # the whole manifest (~300 bytes an entry) in one new buffer, in a worker thread:
    # on the loop its copy and the page faults of its fresh pages were the task commit's
    # longest turn (17-60 ms at 100,000 entries; up to 150 ms late in a long test run);
    # ``bytes.join`` lets go of the GIL while it copies a large join
    return await anyio.to_thread.run_sync(b"".join, parts)


_EMPTY_FILES = b'"files": []'


def _file_entry(
    context: StageContext, status: FileStatus, relative: str, keep_etag: bool
) -> FileEntry:
    return FileEntry(
        source=context.to_uri(status.path),
        dest=context.to_uri(join(context.layout.dest, relative)),
        size=status.size,
        etag=status.etag if keep_etag else None,
    )


async def commit_task_stage(
    context: StageContext,
    task_id: str,
    task_attempt_id: str,
    *,
    written: Sequence[WrittenFile] | None = None,
    save_as: str | None = None,
    attempt_dir: str | None = None,
    save: bool = True,
) -> TaskManifest:
    """Save the manifest of the attempt's files below ``attempt_dir`` (by default its
    own directory; one other attempts share only with ``written``: see the module
    docstring). ``save=False``: return it without saving (its statistics in it), for
    a caller that carries it to the job commit itself."""
    layout = context.layout
    if attempt_dir is None:
        attempt_dir = layout.task_attempt_dir(task_attempt_id)
    async with stage(context, S.TASK_STAGE_COMMIT):
        await _check_job_active(context)
        async with stage(context, S.TASK_STAGE_SCAN_DIRECTORY):
            if written is not None:
                files, dirs = await listed_task_attempt(context, attempt_dir, written)
            elif await context.ops.stat_or_none(attempt_dir) is None:
                raise CommitError(
                    "task attempt directory does not exist (was setup_task run?)",
                    operation="stat",
                    path=attempt_dir,
                )
            else:
                files, dirs = await scan_task_attempt(context, attempt_dir)
        stats = context.stats
        stats.increment(S.COMMITTER_TASK_FILE_COUNT, len(files))
        stats.increment(S.COMMITTER_TASK_FILE_SIZE, sum(entry.size for entry in files))
        stats.increment(S.COMMITTER_TASK_DIRECTORY_COUNT, len(dirs))
        stats.increment(
            S.COMMITTER_TASK_DIRECTORY_DEPTH, max((entry.level for entry in dirs), default=0)
        )
        manifest = TaskManifest(
            job_id=layout.job_id,
            job_attempt_number=layout.attempt,
            task_id=task_id,
            task_attempt_id=task_attempt_id,
            task_attempt_dir=context.to_uri(attempt_dir),
            files=files,
            directories=dirs,
        )
        if not save:
            manifest.iostatistics = context.stats.snapshot(recorded_only=True)
            return manifest
        async with stage(context, S.TASK_STAGE_SAVE_MANIFEST):
            if save_as is None:
                await save_manifest(context, manifest)
            else:  # a name of its own: no earlier manifest to replace atomically
                manifest.iostatistics = context.stats.snapshot(recorded_only=True)
                data = await encode_manifest_in_slices(manifest)
                context.stats.increment(S.COMMITTER_TASK_MANIFEST_FILE_SIZE, len(data))
                await context.ops.write_bytes(save_as, data)
    return manifest


async def _check_job_active(context: StageContext) -> None:
    manifests_dir = context.layout.manifests_dir
    if await context.ops.stat_or_none(manifests_dir) is None:
        raise CommitError(
            "job is not active: its manifests directory is gone (committed or aborted)",
            operation="stat",
            path=manifests_dir,
        )


async def save_manifest(context: StageContext, manifest: TaskManifest) -> None:
    """Write to the attempt's temporary name, check the job is still active, then rename
    over the task's manifest so the last attempt to commit wins."""
    layout = context.layout
    ops = context.ops
    temporary = layout.temp_manifest_path(manifest.task_attempt_id)
    final = layout.manifest_path(manifest.task_id)
    manifest.iostatistics = context.stats.snapshot(recorded_only=True)
    data = await encode_manifest_in_slices(manifest)
    context.stats.increment(S.COMMITTER_TASK_MANIFEST_FILE_SIZE, len(data))
    await ops.publish_bytes(temporary, final, data)


async def abort_task_stage(context: StageContext, task_attempt_id: str) -> None:
    layout = context.layout
    async with stage(context, S.TASK_STAGE_ABORT_TASK):
        await context.ops.delete(layout.task_attempt_dir(task_attempt_id), recursive=True)
        await context.ops.delete(layout.temp_manifest_path(task_attempt_id))
