"""Load manifests: read every committed task manifest concurrently, check it, merge its
directories, and spill its file entries to a local file.

pre:  the job's manifests are in ``manifests/`` (or named by the caller, or by the commit
      plan of an earlier, interrupted run of this job commit).
post: every manifest parsed, of this job, with every source under this job's task attempt
      directories and every destination under the destination directory (never inside
      ``_temporary``); no two entries share a destination; the entries are spilled to one
      unlinked local file (with the destination hashes for the duplicate check), so only
      directories and totals stay in memory.
fail: ``ManifestError`` or ``OutputConflict`` naming the manifest and path; nothing has
      been renamed or created.
"""

from __future__ import annotations

import hashlib
import posixpath
import unicodedata
from array import array
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field

import msgspec

from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.manifest.spill import DestinationHashes, SpillFile
from aiocommit.errors import ManifestError, NotFound, OutputConflict
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.protocol.layout import (
    ATTEMPT_MANIFEST_SUFFIX,
    MANIFEST_SUFFIX,
    MESSAGE_RECORDS_MARKER,
    SHARED_ATTEMPTS_DIR,
    shared_file_prefix,
)
from aiocommit.protocol.manifest import DirState, TaskManifest, decode_manifest
from aiocommit.protocol.uris import plain_suffix
from aiocommit.runtime.turns import take_turn
from aiocommit.stores.base import check_clean, is_under, join, parent_of, relative_to

#: a spilled entry: (source relative to the attempt dir, destination relative to the
#: destination dir or None when it is the same, size, etag)
SpilledEntry = tuple[str, str | None, int, str | None]

#: ``on_loaded(manifests, files, of_manifests)``: the totals after each loaded manifest
LoadedCallback = Callable[[int, int, int], None]

#: manifests loaded at once at most (each is in memory while it loads)
LOADS = 256

_spill_encoder = msgspec.msgpack.Encoder()
_spill_decoder = msgspec.msgpack.Decoder(list[tuple[str, str | None, int, str | None]])


@dataclass
class LoadedManifest:
    path: str
    name: str
    digest: str
    task_id: str
    task_attempt_id: str
    attempt_dir: str
    file_count: int
    total_size: int
    spill_offset: int
    spill_length: int
    #: where the manifest's own bytes are in the spill file (``keep_bytes``)
    kept_offset: int = 0
    kept_length: int = 0


@dataclass
class LoadedJob:
    """What job commit keeps in memory after loading: no per-file objects."""

    spill: SpillFile
    manifests: list[LoadedManifest] = field(default_factory=list)
    #: destination dir -> True when some manifest did not see it as an existing directory
    directories: dict[str, bool] = field(default_factory=dict)
    #: the directories the job's files go into (each file's parent store path, the
    #: destination's own included): ``parent_of`` of every ``entries`` destination
    parents: set[str] = field(default_factory=set)
    file_count: int = 0
    total_size: int = 0
    filenames: list[str] = field(default_factory=list)

    def entries(
        self, manifest: LoadedManifest, dest_root: str
    ) -> Iterator[tuple[str, str, int, str | None]]:
        """(source, destination, size, etag) store paths of one manifest, from its spill."""
        return spilled_entries(self.spilled(manifest), manifest.attempt_dir, dest_root)

    def spilled(self, manifest: LoadedManifest) -> bytes:
        """One manifest's spilled entries, encoded (for ``spilled_entries``)."""
        return self.spill.read(manifest.spill_offset, manifest.spill_length)

    def close(self) -> None:
        self.spill.close()


def spilled_entries(
    data: bytes, attempt_dir: str, dest_root: str
) -> Iterator[tuple[str, str, int, str | None]]:
    """Decode one manifest's spilled entries into (source, destination, size, etag) store
    paths. Spilled paths are relative and checked clean, and the roots have no trailing
    ``/``, so plain concatenation joins them."""
    attempt_prefix = attempt_dir.rstrip("/") + "/"
    dest_prefix = dest_root.rstrip("/") + "/"
    for source, dest, size, etag in _spill_decoder.decode(data):
        yield (
            attempt_prefix + source,
            dest_prefix + (dest if dest is not None else source),
            size,
            etag,
        )


async def list_manifest_names(context: StageContext) -> list[str]:
    """The manifests in the job's ``manifests/``; ``ManifestError`` for a job whose
    manifests travel in its engine's commit messages (``MESSAGE_RECORDS_MARKER``): the
    listing would miss them."""
    names: list[str] = []
    try:
        async for page in context.ops.list_dir(context.layout.manifests_dir):
            if any(s.name == MESSAGE_RECORDS_MARKER for s in page):
                raise ManifestError(
                    "this job's task manifests travel in its engine's commit messages, not "
                    "files: commit it with them (EngineJob.commit), or abort it",
                    path=context.layout.manifests_dir,
                )
            names.extend(s.name for s in page if not s.is_dir and s.name.endswith(MANIFEST_SUFFIX))
    except NotFound as error:
        raise ManifestError(
            "the job has no manifests directory: was setup_job run, or was the job already "
            "committed or aborted?",
            path=context.layout.manifests_dir,
        ) from error
    return sorted(names)


async def load_manifests_stage(
    context: StageContext,
    names: Sequence[str],
    task_stats: IOStatistics,
    *,
    read: Callable[[str], Awaitable[bytes]] | None = None,
    keep_bytes: bool = False,
    digests: dict[str, str] | None = None,
    on_loaded: LoadedCallback | None = None,
    delivered: Collection[str] = (),
) -> LoadedJob:
    """Load the named manifests concurrently, read by ``read(name)`` (by default from the
    job's ``manifests/``). With ``keep_bytes``, each manifest's bytes are kept in the
    spill file too (for the commit plan's copies); with ``digests``, a manifest whose
    bytes hash otherwise is refused. ``on_loaded(manifests, files, of_manifests)`` is
    called after each manifest is loaded, with the totals so far. ``delivered``: the
    names whose manifests a task's commit message carried (no file): each must be its
    own attempt's name (``ATTEMPT.attempt-manifest.json``), and errors name the message."""
    async with stage(context, S.JOB_STAGE_LOAD_MANIFESTS):
        loaded = LoadedJob(SpillFile())
        try:
            await _load_all(
                context,
                names,
                loaded,
                task_stats,
                read,
                keep_bytes,
                digests,
                on_loaded,
                delivered,
            )
        except BaseException:
            loaded.close()
            raise
        return loaded


async def _load_all(
    context: StageContext,
    names: Sequence[str],
    loaded: LoadedJob,
    task_stats: IOStatistics,
    read: Callable[[str], Awaitable[bytes]] | None,
    keep_bytes: bool,
    digests: dict[str, str] | None,
    on_loaded: LoadedCallback | None,
    delivered: Collection[str],
) -> None:
    layout = context.layout
    of_manifests = len(names)
    seen_tasks: dict[str, str] = {}
    seen_attempt_dirs: dict[str, str] = {}
    hashes = DestinationHashes(loaded.spill)
    progress = context.counter(S.JOB_STAGE_LOAD_MANIFESTS, of_manifests, unit="manifests")

    async def load_one(name: str) -> None:
        carried = name in delivered
        path = f"{name} (a task's commit message)" if carried else join(layout.manifests_dir, name)
        try:
            data = await (
                read(name)
                if read is not None
                else context.ops.read_bytes(path, statistic=S.OP_LOAD_MANIFEST)
            )
        except NotFound as error:
            raise ManifestError("manifest not found", path=path) from error
        await take_turn()  # many reads end in one loop turn; check them a slice at a time
        digest = hashlib.sha256(data).hexdigest()
        if digests is not None and digests.get(name) != digest:
            raise ManifestError(
                "manifest is not the one the commit plan fixed (its hash differs)", path=path
            )
        manifest = decode_manifest(data, path=path)
        if carried and name != manifest.task_attempt_id + ATTEMPT_MANIFEST_SUFFIX:
            raise ManifestError(
                f"commit message {name!r} carries task attempt "
                f"{manifest.task_attempt_id!r}'s manifest, not its own",
                path=path,
            )
        checked = _check_manifest(context, manifest, path)
        if manifest.task_id in seen_tasks:
            raise ManifestError(
                f"two manifests for task {manifest.task_id}: "
                f"{seen_tasks[manifest.task_id]} and {name}",
                path=path,
            )
        seen_tasks[manifest.task_id] = name
        # the shared attempts directory holds several attempts' files, each attempt's
        # under its own ID: attempts are told apart by the ID there
        owner = (
            checked.attempt_dir + "/" + manifest.task_attempt_id
            if posixpath.basename(checked.attempt_dir) == SHARED_ATTEMPTS_DIR
            else checked.attempt_dir
        )
        if owner in seen_attempt_dirs:
            raise ManifestError(
                f"two manifests name task attempt directory {owner}: "
                f"{seen_attempt_dirs[owner]} and {name}",
                path=path,
            )
        seen_attempt_dirs[owner] = name
        kept = loaded.spill.append(data) if keep_bytes else (0, 0)
        spill_offset, spill_length = loaded.spill.append(_spill_encoder.encode(checked.entries))
        loaded.manifests.append(
            LoadedManifest(
                path=path,
                name=name,
                digest=digest,
                kept_offset=kept[0],
                kept_length=kept[1],
                task_id=manifest.task_id,
                task_attempt_id=manifest.task_attempt_id,
                attempt_dir=checked.attempt_dir,
                file_count=len(checked.entries),
                total_size=checked.total_size,
                spill_offset=spill_offset,
                spill_length=spill_length,
            )
        )
        loaded.file_count += len(checked.entries)
        loaded.total_size += checked.total_size
        hashes.add(checked.hashes)
        loaded.parents |= checked.parents
        for directory, needs_create in checked.directories.items():
            loaded.directories[directory] = loaded.directories.get(directory, False) or needs_create
        room = 100 - len(loaded.filenames)
        if room > 0:
            loaded.filenames.extend(
                context.to_uri(join(layout.dest, e[1] or e[0])) for e in checked.entries[:room]
            )
        task_stats.aggregate(manifest.iostatistics)
        if on_loaded is not None:
            on_loaded(len(loaded.manifests), loaded.file_count, of_manifests)
        progress.add(1)

    # each load holds a whole manifest in memory: bounded apart from the store limit
    await parallel(list(names), load_one, workers=min(context.loop_workers, LOADS))
    progress.finish()
    loaded.manifests.sort(key=lambda m: m.name)
    context.stats.increment(S.COMMITTER_TASKS_COMPLETED, len(loaded.manifests))
    every_dir = _with_ancestors(loaded.directories, layout.dest)
    hashes.add(hash(name_key(d)) for d in every_dir)
    _check_no_duplicates(context, loaded, await hashes.repeated(), every_dir)


@dataclass
class _CheckedManifest:
    attempt_dir: str
    entries: list[SpilledEntry]
    hashes: array[int]
    directories: dict[str, bool]
    total_size: int
    parents: set[str]


def _check_manifest(context: StageContext, manifest: TaskManifest, path: str) -> _CheckedManifest:
    """Check one manifest against the job; everything it names must stay in its place."""
    layout = context.layout
    if manifest.job_id != layout.job_id:
        raise ManifestError(
            f"manifest belongs to job {manifest.job_id!r}, not {layout.job_id!r}", path=path
        )

    def local(uri: str, what: str) -> str:
        try:
            local_path = context.from_uri(uri)
            check_clean(local_path)
        except ValueError as error:
            raise ManifestError(
                f"{what} {uri!r} is not a path of this store: {error}", path=path
            ) from error
        return local_path

    if manifest.task_attempt_dir:
        attempt_dir = local(manifest.task_attempt_dir, "taskAttemptDir")
    elif manifest.task_attempt_id:
        attempt_dir = layout.task_attempt_dir(manifest.task_attempt_id)
    else:
        raise ManifestError("manifest names neither taskAttemptDir nor taskAttemptID", path=path)
    if parent_of(attempt_dir) != layout.tasks_dir:
        raise ManifestError(
            f"task attempt directory {attempt_dir!r} is not one of this job's ({layout.tasks_dir})",
            path=path,
        )
    _check_attempt_binding(manifest, attempt_dir, path)
    dest_root = layout.dest
    temporary = layout.temporary_dir

    success = layout.success_path

    def check_dest(dest: str, what: str) -> str:
        if (
            not is_under(dest, dest_root)
            or dest == dest_root.rstrip("/")
            or is_under(dest, temporary)
        ):
            raise ManifestError(
                f"{what} {dest!r} is outside the destination {dest_root!r}", path=path
            )
        if is_under(dest, success):
            raise ManifestError(
                f"{what} {dest!r}: _SUCCESS is the job's own name; a task may not write it "
                "or below it",
                path=path,
            )
        return relative_to(dest, dest_root)

    entries: list[SpilledEntry] = []
    hashes: array[int] = array("q")
    directories: dict[str, bool] = {}
    parents: set[str] = set()
    total = 0
    # the fast path: a URI that is its directory's URI plus a plain relative path is
    # that directory's path plus the same relative path (checked once per manifest)
    source_prefix = _uri_prefix(context, attempt_dir)
    shared_prefix = (
        shared_file_prefix(manifest.task_attempt_id)
        if posixpath.basename(attempt_dir) == SHARED_ATTEMPTS_DIR
        else None
    )
    dest_prefix = _uri_prefix(context, dest_root)
    dest_base = dest_root.rstrip("/") + "/"
    root = dest_root.rstrip("/")
    for entry in manifest.files:
        source_relative = (
            plain_suffix(entry.source, source_prefix) if source_prefix is not None else None
        )
        if source_relative is None:
            source = local(entry.source, "source")
            if not source.startswith(attempt_dir + "/"):
                raise ManifestError(
                    f"source {entry.source!r} is outside the task attempt directory "
                    f"{attempt_dir!r}",
                    path=path,
                )
            source_relative = source[len(attempt_dir) + 1 :]
        if shared_prefix is not None and (
            not source_relative.startswith(shared_prefix) or "/" in source_relative
        ):
            raise ManifestError(
                f"source {entry.source!r} in the shared attempts directory is not a file of "
                f"task attempt {manifest.task_attempt_id}",
                path=path,
            )
        dest_relative = plain_suffix(entry.dest, dest_prefix) if dest_prefix is not None else None
        if dest_relative is None or dest_relative.startswith(_RESERVED):
            dest = local(entry.dest, "destination")
            dest_relative = check_dest(dest, "destination")
        else:
            dest = dest_base + dest_relative
        if entry.size < 0:
            raise ManifestError(f"negative size for {entry.source!r}", path=path)
        entries.append(
            (
                source_relative,
                None if source_relative == dest_relative else dest_relative,
                entry.size,
                entry.etag,
            )
        )
        hashes.append(hash(name_key(dest)))
        total += entry.size
        cut = dest.rfind("/")
        parent = dest[:cut] if cut > 0 else "/"
        if parent not in parents:
            parents.add(parent)
            if parent != root:
                directories[parent] = True
    for dir_entry in manifest.directories:
        directory = local(dir_entry.dest, "directory")
        check_dest(directory, "directory")
        directories[directory] = dir_entry.state != DirState.DIR
    return _CheckedManifest(attempt_dir, entries, hashes, directories, total, parents)


#: destination names that take the general path (which refuses them, or their children)
_RESERVED = ("_temporary", "_SUCCESS")


def _uri_prefix(context: StageContext, directory: str) -> str | None:
    """The URI form of ``directory`` plus ``/``, when a plain relative path appended to
    it maps back to the directory's path plus that path (else None: no fast path)."""
    base = directory.rstrip("/")
    if not base:
        return None
    try:
        prefix = context.to_uri(base) + "/"
        if context.from_uri(prefix + "a/b") != base + "/a/b":
            return None
    except ValueError:
        return None
    return prefix


def _check_attempt_binding(manifest: TaskManifest, attempt_dir: str, path: str) -> None:
    """A manifest's attempt directory is its own attempt's, and (for Hadoop style IDs)
    that attempt is an attempt of the manifest's task: no manifest can commit another
    attempt's or another task's files."""
    attempt_id = manifest.task_attempt_id
    if posixpath.basename(attempt_dir) == SHARED_ATTEMPTS_DIR:
        if not attempt_id:  # its files are known by the attempt's ID alone
            raise ManifestError(
                "a manifest of the shared attempts directory names no taskAttemptID", path=path
            )
    elif attempt_id and posixpath.basename(attempt_dir) != attempt_id:
        raise ManifestError(
            f"taskAttemptDir {attempt_dir!r} is not the directory of task attempt {attempt_id}",
            path=path,
        )
    task_id = manifest.task_id
    attempt_id = attempt_id or posixpath.basename(attempt_dir)
    if task_id.startswith("task_") and attempt_id.startswith("attempt_"):
        task_of_attempt = "task_" + attempt_id[len("attempt_") :].rpartition("_")[0]
        if task_of_attempt != task_id:
            raise ManifestError(
                f"task attempt {attempt_id} is not an attempt of task {task_id}", path=path
            )


def name_key(path: str) -> str:
    """The name two destinations clash on: its NFC form. NFC and NFD spellings of one
    name are one file to stores and file systems that normalise (and to people), so a
    job may not commit both; ASCII names (the common case) are their own key."""
    if path.isascii() or unicodedata.is_normalized("NFC", path):
        return path
    return unicodedata.normalize("NFC", path)


def _with_ancestors(directories: dict[str, bool], dest_root: str) -> set[str]:
    """Every directory the job's output has below the destination."""
    root = dest_root.rstrip("/") or "/"
    every: set[str] = set()
    for directory in directories:
        while directory != root and directory not in every and is_under(directory, root):
            every.add(directory)
            directory = parent_of(directory)
    return every


def _check_no_duplicates(
    context: StageContext, loaded: LoadedJob, suspects: set[int], directories: set[str]
) -> None:
    """Every destination once, and never where the job's own output has a directory
    (nor two spellings of one name): repeated hashes are confirmed against the spilled
    entries and the job's directories."""
    if not suspects:
        return
    directory_keys = {name_key(d): d for d in directories if hash(name_key(d)) in suspects}
    owners: dict[str, tuple[str, str]] = {}
    for manifest in loaded.manifests:
        for _, dest, _, _ in loaded.entries(manifest, context.layout.dest):
            key = name_key(dest)
            if hash(key) not in suspects:
                continue
            if key in directory_keys:
                raise OutputConflict(
                    f"task {manifest.task_id} writes a file where the job's output has a "
                    f"directory ({context.qualify(directory_keys[key])})",
                    path=context.qualify(dest),
                )
            if key in owners:
                first_task, first_dest = owners[key]
                why = (
                    ""
                    if first_dest == dest
                    else " (two spellings of one name that differ only in Unicode "
                    f"normalisation: {context.qualify(first_dest)!r})"
                )
                raise OutputConflict(
                    f"two tasks claim the same destination file: {first_task} and "
                    f"{manifest.task_id}{why}",
                    path=context.qualify(dest),
                )
            owners[key] = (manifest.task_id, dest)
