"""Resolve conflicts: what a job commit does with output already in its destination.

One stage for every committer: the manifest committer runs it before it renames, the
S3A committers before they complete uploads (Hadoop's ``preCommitJob``). The mode is
Hadoop S3A's ``fs.s3a.committer.staging.conflict-mode``; its scope is the whole
destination, or with ``partitioned`` every directory the job writes a file into, with
everything below it (Hadoop's ``PartitionedStagingCommitter``; a file directly in the
destination makes the whole destination a partition). The job's own directories
(``_temporary``, ``__magic``) and the destination's lease are never in scope;
``_SUCCESS`` is when the whole destination is.

``fail``
    The scope holds a file (``_SUCCESS`` too): ``OutputConflict``, nothing changed.
``append``
    The job's files go beside the old ones; a job file whose name an old file (or
    directory) holds is refused with ``OutputConflict`` before anything changes, unless
    ``delete_target_files`` asks to overwrite such files (Hadoop's S3A committers
    overwrite by default).
``replace``
    Every file in scope goes: on a store with atomic rename (local, ADLS Gen2, GCS with
    hierarchical namespace, memory) it is moved into the job attempt's ``replaced/``
    directory, so an abort moves it back (a committed job's cleanup deletes it there);
    elsewhere (S3, flat GCS) it is deleted, and an abort names every such file it cannot
    restore. The old files a new file lands on (the collisions) go before the job's
    files arrive; the others only once the job's files are in place, so a reader sees
    old and new side by side for a moment, never a partition with neither.
``_SUCCESS`` is never replaced here: the frame sets it aside (``set_aside_success_stage``)
after this check and before the first change, and an abort puts it back.

``resolve_conflicts_stage`` (before anything in the destination changes)
    pre:  the commit plan is saved and says ``committing`` (or ``refused``: a re-run
          checks again); nothing of this job is in the destination yet.
    post: the plan's ``conflicts`` record holds the mode, the scope and, for ``replace``,
          the old files (the collisions marked) and directories, saved before anything
          changes; nothing in the destination changed.
    fail: ``OutputConflict`` (``fail``, or ``append`` with a name clash): the plan says
          ``refused`` (so the job is not left ``committing``) and records the mode, which
          a re-run keeps unless given another; nothing changed.
``clear_conflicts_stage`` (the first change; after ``_SUCCESS`` is set aside)
    post: the collisions are aside (or deleted) and the record says ``cleared``, saved
          before the first of the job's files arrives.
``finish_conflicts_stage`` (after the job's files are in place, before the commit point)
    post: every old file is aside (or deleted); old directories left empty are removed;
          the record says ``done`` (saved with the commit point).
A re-run of the commit honours the record: a done record is skipped; the collisions of a
cleared record are never replaced again (their names may hold the job's own files now);
a file already aside, or already gone, is skipped.

``restore_replaced_stage`` (abort of a commit that did not reach its commit point, after
the job's own files are undone) moves the old files back and recreates the old
directories; ``unrestorable`` names the old files a replace deleted. ``lost_by_abort``
tells, before an abort, whether it would be exact: a take-over of a dead job's lease
finishes the job's commit instead when it would not be.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection, Container, Iterable

import anyio
import anyio.to_thread

from aiocommit.committers.common.commit_plan import (
    COMMITTING,
    REFUSED,
    CommitPlan,
    ConflictRecord,
    save_plan,
)
from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.common.directories import remove_empty_directories
from aiocommit.committers.common.lease import is_lease_file
from aiocommit.errors import AlreadyExists, InvalidInput, ManifestError, NotFound, OutputConflict
from aiocommit.options import CONFLICT_MODES
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import SUCCESS, TEMPORARY
from aiocommit.protocol.pending import MAGIC
from aiocommit.stores.base import is_under, join, parent_of, relative_to

DEFAULT_MODE = "append"


def settle_conflict_mode(
    context: StageContext,
    plan: CommitPlan,
    mode: str | None,
    partitioned: bool | None,
) -> tuple[str, bool]:
    """The mode and scope a commit runs with: those its plan recorded when an earlier
    run decided them (a given mode or scope that differs is refused; after a refusal,
    which changed nothing, the given ones win), else the given ones, else ``append`` for
    the whole destination."""
    if mode is not None and mode not in CONFLICT_MODES:
        raise InvalidInput(f"conflict mode must be one of {CONFLICT_MODES}, not {mode!r}")
    recorded = plan.conflicts
    if recorded is None:
        return mode or DEFAULT_MODE, bool(partitioned)
    if plan.state == REFUSED:
        return (
            recorded.mode if mode is None else mode,
            recorded.partitioned if partitioned is None else partitioned,
        )
    if (mode is not None and mode != recorded.mode) or (
        partitioned is not None and partitioned != recorded.partitioned
    ):
        raise ManifestError(
            f"this job's commit was started earlier with conflict mode '{recorded.mode}' "
            f"{_scope(recorded.partitioned)}; finish it with the same settings (or give none)",
            path=context.qualify(context.layout.commit_plan_path),
        )
    return recorded.mode, recorded.partitioned


def initial_record(mode: str, partitioned: bool) -> ConflictRecord | None:
    """The record a new commit plan starts with: none; every mode is decided by the
    stage, after its check."""
    return None


def _scope(partitioned: bool) -> str:
    return "per partition" if partitioned else "for the whole destination"


def partition_roots(dest: str, targets: Iterable[str]) -> list[str]:
    """The partitions of a job that writes ``targets`` (store paths): the directory each
    file lands in, outermost only, sorted."""
    return _outermost(dest, {parent_of(t) for t in targets})


def _outermost(dest: str, directories: Iterable[str]) -> list[str]:
    """The outermost of ``directories`` (``dest`` alone when it is one of them), sorted."""
    kept: list[str] = []
    for directory in sorted(directories):
        if not any(is_under(directory, outer) for outer in kept):
            kept.append(directory)
    if any(d == dest.rstrip("/") for d in kept):
        return [dest.rstrip("/") or "/"]
    return kept


async def resolve_conflicts_stage(
    context: StageContext,
    plan: CommitPlan,
    mode: str,
    *,
    partitioned: bool,
    targets: Callable[[], Iterable[str]],
    ours: Container[str] = (),
    target_directories: Collection[str] | None = None,
    swap: bool = False,
) -> ConflictRecord:
    """Decide (or take the recorded decision of) the plan's conflict resolution; nothing
    in the destination changes. ``targets()`` yields the store paths the job writes
    (asked while deciding); ``ours``: paths that are the job's own output (a re-run after
    some arrived), never counted as old; ``target_directories``, when the caller knows
    them: the parent of every path ``targets()`` yields (``parent_of``), and no other,
    which spares a pass over every file when ``ours`` is empty. ``swap``: the caller can
    swap a partition's directory whole (``ConflictRecord.swapped``): a partitioned replace
    moving old files aside records the partitions that hold old files to swap. A refusal
    is recorded in the plan (``refused``) before ``OutputConflict`` is raised."""
    if mode not in CONFLICT_MODES:
        raise InvalidInput(f"conflict mode must be one of {CONFLICT_MODES}, not {mode!r}")
    record = plan.conflicts
    if record is not None and plan.state != REFUSED:
        return record
    async with stage(context, S.JOB_STAGE_RESOLVE_CONFLICTS):
        try:
            known = None if ours else target_directories
            record = await _decide(context, mode, partitioned, targets, ours, known)
            if swap and record.partitioned and record.aside and "" not in record.roots:
                record.swapped = _roots_holding(record.roots, record.replaced)
        except OutputConflict:
            plan.state = REFUSED
            plan.conflicts = ConflictRecord(mode=mode, partitioned=partitioned)
            await save_plan(context, plan)
            raise
        record.done = not record.replaced  # fail and append change nothing
        record.cleared = not record.collisions and not record.swapped
        plan.state = COMMITTING
        plan.conflicts = record
        await save_plan(context, plan)  # recorded before anything changes
    return record


def _roots_holding(roots: list[str], files: list[str]) -> list[str]:
    """The roots (relative paths) that hold one of ``files`` (relative paths)."""
    wanted = set(roots)
    holding: set[str] = set()
    for file in files:
        directory = posixpath.dirname(file)
        while directory and directory not in wanted:
            directory = posixpath.dirname(directory)
        if directory:
            holding.add(directory)
    return sorted(holding)


async def clear_conflicts_stage(context: StageContext, plan: CommitPlan) -> None:
    """The first change of a replace: the old files the job's files land on go (aside,
    or deleted); the record says ``cleared`` before the first of the job's files
    arrives, so a re-run never moves or deletes those names again."""
    record = plan.conflicts
    if record is None or record.done or record.cleared:
        return
    async with stage(context, S.JOB_STAGE_RESOLVE_CONFLICTS):
        await _replace(context, record, record.collisions)
        record.cleared = True
        await save_plan(context, plan)


async def finish_conflicts_stage(context: StageContext, plan: CommitPlan) -> None:
    """After the job's files are in place, before the commit point: replace the old
    files no new file landed on, remove the old directories left empty, and mark the
    record done (the caller's next plan save, the commit point's, keeps it)."""
    record = plan.conflicts
    if record is None or record.done:
        return
    async with stage(context, S.JOB_STAGE_RESOLVE_CONFLICTS):
        first = set(record.collisions)
        await _replace(context, record, [f for f in record.replaced if f not in first])
        # the old directories the job did not refill
        dest = context.layout.dest
        await remove_empty_directories(context, [join(dest, d) for d in record.directories])
    record.done = True


async def _decide(
    context: StageContext,
    mode: str,
    partitioned: bool,
    targets: Callable[[], Iterable[str]],
    ours: Container[str],
    target_directories: Collection[str] | None,
) -> ConflictRecord:
    """``target_directories``: the parent of every target, when known and ``ours`` is
    empty."""
    dest = context.layout.dest.rstrip("/") or "/"
    if not partitioned:
        roots = [dest]
    elif target_directories is not None:
        roots = _outermost(dest, target_directories)
    else:
        roots = partition_roots(dest, targets())
    record = ConflictRecord(
        mode=mode,
        partitioned=partitioned,
        roots=sorted("" if r == dest else relative_to(r, dest) for r in roots),
        aside=context.ops.capabilities.atomic_rename,
    )
    if not roots:
        return record
    if mode == "append":
        clashes = await _refuse_clashes(context, targets, ours, target_directories)
        record.overwritten = {relative_to(f, dest): etag or "" for f, etag in clashes.items()}
        return record
    hidden = {join(dest, TEMPORARY), join(dest, MAGIC)}
    files: list[str] = []
    directories: list[str] = []

    async def scan(root: str) -> None:
        found, below = await walk_tree(
            context, root, lambda p: p in hidden or p in ours or is_lease_file(dest, p)
        )
        files.extend(found)
        if below is not None:
            directories.extend(below)
            if root != dest:
                directories.append(root)

    await parallel(roots, scan, workers=context.ops.workers)
    if not files:
        return record
    if mode == "fail":
        where = "partition" if partitioned else "destination"
        raise OutputConflict(
            f"the {where} already holds {len(files)} file(s) and the conflict mode is "
            "'fail'; to commit beside or over them, set conflict_mode='append' or "
            "conflict_mode='replace'",
            operation="resolve_conflicts",
            path=context.qualify(sorted(files)[0]),
        )
    old = set(files) - {join(dest, SUCCESS)}  # _SUCCESS is set aside by the frame
    first = {t for t in targets() if t in old}
    record.replaced = sorted(relative_to(f, dest) for f in old)
    record.collisions = sorted(relative_to(f, dest) for f in first)
    record.directories = sorted({relative_to(d, dest) for d in directories if d != dest})
    return record


def _directories_of(
    targets: Callable[[], Iterable[str]], ours: Container[str], dest: str
) -> tuple[set[str], set[str]]:
    """The directories the job writes files into (not counting ``ours``), and the
    directories on the way to them below ``dest``."""
    wanted: set[str] = set()
    for target in targets():
        directory = parent_of(target)
        if directory in wanted or target in ours:
            continue
        wanted.add(directory)
    return wanted, _on_the_way(wanted, dest)


def _on_the_way(wanted: Iterable[str], dest: str) -> set[str]:
    """The directories from ``dest`` (excluded) down to each of ``wanted`` (included)."""
    on_the_way: set[str] = set()
    for directory in wanted:
        while directory not in on_the_way and is_under(directory, dest) and directory != dest:
            on_the_way.add(directory)
            directory = parent_of(directory)
    return on_the_way


def _clashes(
    targets: Callable[[], Iterable[str]], ours: Container[str], existing: dict[str, bool]
) -> tuple[list[str], list[str]]:
    """The job's paths an old file holds, and those an old directory holds."""
    files: list[str] = []
    directories: list[str] = []
    for target in targets():
        if target in existing and target not in ours:
            (directories if existing[target] else files).append(target)
    return files, directories


async def _refuse_clashes(
    context: StageContext,
    targets: Callable[[], Iterable[str]],
    ours: Container[str],
    target_directories: Collection[str] | None,
) -> dict[str, str | None]:
    """Append: ``OutputConflict`` when a path the job writes holds a directory, or a file
    (unless ``delete_target_files``); else the old files the job's files overwrite (store
    paths, with their listed etags). Lists the destination and, below it, only the
    existing directories on the way to those the job writes into (one listing each; a
    fresh destination costs one). Holds the directories and the names already in them,
    never the job's file list (``targets()`` is read twice)."""
    dest = context.layout.dest.rstrip("/") or "/"
    if target_directories is not None:
        wanted = set(target_directories)
        on_the_way = _on_the_way(wanted, dest)
    else:
        # a pass over every file of the job: in a worker thread, off the caller's loop
        wanted, on_the_way = await anyio.to_thread.run_sync(_directories_of, targets, ours, dest)
    if not wanted:
        return {}
    existing: dict[str, bool] = {}  # path -> is a directory, in the wanted directories
    etags: dict[str, str | None] = {}

    async def check(directory: str) -> None:
        below: list[str] = []
        try:
            async for page in context.ops.list_dir(directory):
                for status in page:
                    if directory in wanted:
                        existing[status.path] = status.is_dir
                        etags[status.path] = status.etag
                    if status.is_dir and status.path in on_the_way:
                        below.append(status.path)
        except NotFound:
            return
        await parallel(below, check, workers=context.ops.workers)

    await check(dest)
    if not existing:
        return {}
    files, directories = await anyio.to_thread.run_sync(_clashes, targets, ours, existing)
    if directories:
        raise OutputConflict(
            "destination is a directory, and a file is never put in a directory's place",
            operation="resolve_conflicts",
            path=context.qualify(min(directories)),
        )
    if files and not context.options.delete_target_files:
        raise OutputConflict(
            f"{len(files)} of the job's file(s) would replace existing files and the "
            "conflict mode is 'append'; to overwrite them set delete_target_files=True, "
            "or conflict_mode='replace' to replace the old output",
            operation="resolve_conflicts",
            path=context.qualify(min(files)),
        )
    return {f: etags[f] for f in files}


async def walk_tree(
    context: StageContext, root: str, skip: Callable[[str], bool]
) -> tuple[list[str], list[str] | None]:
    """Every file and directory below ``root`` (store paths), listed in parallel under
    the job's limits; ``skip`` leaves out a path and all below it. ``None`` directories
    when ``root`` does not exist."""
    files: list[str] = []
    directories: list[str] = []
    limiter = anyio.CapacityLimiter(max(1, min(context.options.concurrency, 64)))
    missing = False

    async def walk(directory: str, group: anyio.abc.TaskGroup) -> None:
        nonlocal missing
        async with limiter:
            try:
                pages = [page async for page in context.ops.list_dir(directory)]
            except NotFound:
                missing = missing or directory == root
                return
        for page in pages:
            for status in page:
                if skip(status.path):
                    continue
                if status.is_dir:
                    directories.append(status.path)
                    group.start_soon(walk, status.path, group)
                else:
                    files.append(status.path)

    async with anyio.create_task_group() as group:
        await walk(root, group)
    return files, (None if missing else directories)


async def _replace(context: StageContext, record: ConflictRecord, names: list[str]) -> None:
    """Move aside (or delete) the old files ``names`` (relative to the destination);
    each already aside or gone is skipped."""
    if not names:
        return
    ops = context.ops
    dest = context.layout.dest
    aside_root = context.layout.replaced_dir
    workers = context.ops.workers
    if record.aside and ops.capabilities.directories:
        parents = sorted({parent_of(join(aside_root, f)) for f in names})
        await parallel(parents, ops.mkdirs, workers=workers)

    async def move_aside(relative: str) -> None:
        source, target = join(dest, relative), join(aside_root, relative)
        try:
            await ops.rename(source, target)
        except NotFound as error:
            if error.path == parent_of(target):
                raise  # the target's parent is missing: not a missing old file
            return  # already aside (a re-run), or gone
        except AlreadyExists:
            if await ops.stat_or_none(source) is not None:
                raise  # a new file came to stand where an old one was: refuse
            return
        context.stats.increment(S.COMMITTER_FILES_REPLACED)

    async def delete(relative: str) -> None:
        if await ops.delete(join(dest, relative)):
            context.stats.increment(S.COMMITTER_FILES_REPLACED)
            context.stats.increment(S.COMMITTER_TARGET_FILES_DELETED)

    await parallel(names, move_aside if record.aside else delete, workers=workers)


async def restore_replaced_stage(context: StageContext, plan: CommitPlan) -> None:
    """Abort: put the old output a replace moved aside back, after the job's own files
    are undone (run inside the abort stage); the old directories are recreated, emptied
    ones too. Idempotent. Deleted old output (no atomic rename) stays deleted:
    ``unrestorable`` names it."""
    record = plan.conflicts
    if record is None or not record.replaced or not record.aside:
        return
    ops = context.ops
    dest = context.layout.dest
    aside_root = context.layout.replaced_dir
    workers = context.ops.workers
    if ops.capabilities.directories:
        leaves = set(record.directories) | {parent_of("/" + f)[1:] for f in record.replaced}
        await parallel(sorted(join(dest, d) for d in leaves if d), ops.mkdirs, workers=workers)

    async def move_back(relative: str) -> None:
        try:
            await ops.rename(join(aside_root, relative), join(dest, relative))
        except NotFound:
            return  # back already (a re-run), or never moved
        context.stats.increment(S.COMMITTER_FILES_RESTORED)

    await parallel(record.replaced, move_back, workers=workers)


async def unrestorable(context: StageContext, plan: CommitPlan) -> list[str]:
    """The store paths of old files the plan's replace deleted (a store without atomic
    rename), which an abort of its commit cannot restore: every recorded old file that
    is gone now (one ``stat`` each; a file the replace had not reached yet is not
    counted). Logged as a warning when there are any."""
    record = plan.conflicts
    if record is None or record.aside or not record.replaced:
        return []
    dest = context.layout.dest
    gone: list[str] = []

    async def check(relative: str) -> None:
        if await context.ops.stat_or_none(join(dest, relative)) is None:
            gone.append(join(dest, relative))

    await parallel(record.replaced, check, workers=context.ops.workers)
    if gone:
        context.log.warning(
            "abort cannot restore %d old file(s) the commit's replace deleted (the store "
            "has no atomic rename to move them aside), e.g. %s",
            len(gone),
            ", ".join(context.qualify(p) for p in sorted(gone)[:5]),
        )
    return sorted(gone)


async def lost_by_abort(context: StageContext, plan: CommitPlan) -> list[str]:
    """The store paths of old files an abort of ``plan``'s commit could not restore, as
    the destination stands now (before any abort): none when the plan is not
    ``committing``; for an append with ``delete_target_files``, the old files it
    overwrites that are gone or changed (any, where the store gives no etag); none when
    its replace moves old files aside (rename stores: an abort moves them back) or has
    none; else the collisions once ``cleared`` (their names may hold the job's own files
    now) and every other recorded old file that is gone.

    pre:  no other job changes the destination (the caller holds its lease).
    post: nothing changed.
    """
    record = plan.conflicts
    if plan.state != COMMITTING or record is None:
        return []
    if record.overwritten:
        return await _overwritten_now(context, record.overwritten)
    if record.aside or not record.replaced:
        return []
    dest = context.layout.dest
    gone = set(record.collisions) if record.cleared else set()

    async def check(relative: str) -> None:
        if relative not in gone and await context.ops.stat_or_none(join(dest, relative)) is None:
            gone.add(relative)

    await parallel(record.replaced, check, workers=context.ops.workers)
    return sorted(join(dest, relative) for relative in gone)


async def _overwritten_now(context: StageContext, old: dict[str, str]) -> list[str]:
    """The store paths of the old files ``old`` (relative path -> etag, "" unknown) an
    append with ``delete_target_files`` deleted or overwrote so far: gone, or with
    another etag (or any file, where the etag is unknown)."""
    dest = context.layout.dest
    lost: list[str] = []

    async def check(relative: str) -> None:
        status = await context.ops.stat_or_none(join(dest, relative))
        if status is None or not old[relative] or status.etag != old[relative]:
            lost.append(join(dest, relative))

    await parallel(sorted(old), check, workers=context.ops.workers)
    return sorted(lost)
