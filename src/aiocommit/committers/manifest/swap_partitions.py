"""Swap partitions: a replace per partition on the local filesystem puts each partition's
new files in place in one atomic step, so a reader listing a partition sees its old
files or its new ones, never a mix of both (nor an empty partition).

For each partition that holds old files (``ConflictRecord.swapped``, decided by
``resolve_conflicts_stage`` where the store can swap directories: Linux ``renameat2``
``RENAME_EXCHANGE``), in the job attempt's ``swap/`` directory:

1. a hard link to each of the job's files of the partition (the same file, so the
   same etag; the task attempt's file stays where it is);
2. that directory and the partition's directory exchange places (one step);
3. the old directory, now in ``swap/``, moves into ``replaced/``, where an abort finds
   its files (``restore_replaced_stage``).

The rename stage then finds each swapped file already at its destination (the same
file as its source) and only removes the source (``commit_file``'s recovery rule).
Partitions with no old files are renamed into file by file, as before (nothing old to
mix with). Only partition directories are swapped, never the destination's root, which
holds ``_temporary`` and the leases of other jobs.

``swap_partitions_stage`` (the first change; after ``_SUCCESS`` is set aside)
    pre:  the plan's conflict record lists the partitions to swap; this job holds the
          destination's lease (no other job changes it); a partition directory holds no
          other job's temporary data.
    post: every listed partition holds exactly the job's files (links to its sources)
          and its old directory is in ``replaced/``; the record says ``cleared`` (saved).
    fail: ``StoreError``; the partitions swapped so far stay swapped (the plan says
          ``committing``): a re-run goes on, an abort moves the job's files back and the
          old files home.
A re-run tells a swapped partition by its content: one of the job's files at its
destination (same etag) means the exchange happened, and the old directory, if still in
``swap/``, goes on to ``replaced/``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Container
from typing import Protocol

from aiocommit.committers.common.commit_plan import CommitPlan, save_plan
from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.manifest.commit_file import Entry, holds
from aiocommit.committers.manifest.load_manifests import LoadedJob
from aiocommit.errors import CommitError
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import join, relative_to


class DirectorySwaps(Protocol):
    """A store that swaps directories (the local filesystem's ``LocalStore``)."""

    def can_swap_directories(self, scratch: str) -> bool: ...

    async def exchange_directories(self, first: str, second: str) -> None: ...

    async def move_directory(self, source: str, dest: str) -> None: ...

    async def link(self, source: str, dest: str) -> None: ...


def swapping_store(context: StageContext) -> DirectorySwaps | None:
    """The context's store, if it swaps directories on the destination's filesystem
    (probed in the job attempt's directory, which exists); else None."""
    store = context.ops.store
    probe = getattr(store, "can_swap_directories", None)
    if probe is None or not context.ops.capabilities.atomic_rename:
        return None
    try:
        usable = bool(probe(context.layout.job_attempt_dir))
    except OSError:
        return None
    return store if usable else None  # type: ignore[return-value]


def swap_dir(context: StageContext) -> str:
    """Where the new partition directories are built (on the destination's filesystem)."""
    return join(context.layout.job_attempt_dir, "swap")


async def swap_partitions_stage(context: StageContext, plan: CommitPlan, loaded: LoadedJob) -> None:
    """Swap every partition the plan lists (see the module docstring)."""
    record = plan.conflicts
    if record is None or record.cleared or not record.swapped:
        return
    store = swapping_store(context)
    if store is None:
        raise CommitError(
            "this commit swaps partition directories, which this store or filesystem "
            "cannot; finish or abort it where it started",
            operation="swap_partitions",
            path=context.qualify(context.layout.dest),
        )
    dest = context.layout.dest.rstrip("/")
    staged = swap_dir(context)
    aside = context.layout.replaced_dir
    by_root: dict[str, list[Entry]] = {root: [] for root in record.swapped}
    for manifest in loaded.manifests:
        for entry in loaded.entries(manifest, dest):
            root = _root_of(relative_to(entry[1], dest), by_root)
            if root is not None:
                by_root[root].append(entry)
    old_files = dict.fromkeys(record.swapped, 0)
    for relative in record.replaced:
        root = _root_of(relative, old_files)
        if root is not None:
            old_files[root] += 1
    etags_kept = context.ops.capabilities.etags_preserved_in_rename

    async def swapped(root: str) -> bool:
        """Whether the exchange of ``root`` happened (one of the job's files is there)."""
        _, target, size, etag = by_root[root][0]
        status = await context.ops.stat_or_none(target)
        return holds(status, size, etag, etags_kept=etags_kept)

    async def swap(root: str) -> None:
        new_dir, old_home = join(staged, root), join(aside, root)
        if not by_root[root]:
            raise CommitError(  # the record lists only partitions the job writes into
                "no file of the job in a partition to swap", path=context.qualify(root)
            )
        if not await swapped(root):
            for source, target, _, _ in by_root[root]:
                await store.link(source, join(new_dir, relative_to(target, join(dest, root))))
            await store.exchange_directories(new_dir, join(dest, root))
        if await context.ops.stat_or_none(new_dir) is not None:
            await store.move_directory(new_dir, old_home)
        context.stats.increment(S.COMMITTER_FILES_REPLACED, old_files[root])

    async with stage(context, S.JOB_STAGE_RESOLVE_CONFLICTS):
        await parallel(record.swapped, swap, workers=context.ops.workers)
        record.cleared = True
        await save_plan(context, plan)


def _root_of(relative: str, roots: Container[str]) -> str | None:
    """The root of ``roots`` that ``relative`` (a file's path) is below, if any."""
    directory = posixpath.dirname(relative)
    while directory and directory not in roots:
        directory = posixpath.dirname(directory)
    return directory or None
