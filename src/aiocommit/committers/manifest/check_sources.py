"""Refuse a rename source that is a directory, before any rename, on stores whose rename
would move a directory whole (ADLS Gen2: one Path-Create call renames a directory tree).

Stores whose ``rename`` refuses a directory source itself (local, memory: their
``capabilities.rename_checks_source``) need nothing here; stores without directories
(GCS, S3) have no directory to move.

``check_sources_stage``:
    pre:  the job's manifests are loaded; nothing of this commit is renamed yet.
    post: no source of the commit is a directory; else ``NotAFile`` naming it, nothing
          changed.
    cost: one listing of each task attempt directory where the store lists a tree in
          one call (ADLS), else of each distinct directory holding sources (a task
          attempt's partitions); never a call per file; one manifest's sources in memory
          at a time.
"""

from __future__ import annotations

from aiocommit.committers.common.context import StageContext, parallel
from aiocommit.committers.manifest.load_manifests import LoadedJob, LoadedManifest
from aiocommit.errors import NotAFile, NotFound
from aiocommit.runtime.turns import take_turn
from aiocommit.stores.base import parent_of


def needs_source_check(context: StageContext) -> bool:
    """True where a directory source would be moved whole by the store's rename."""
    capabilities = context.ops.store.capabilities
    return capabilities.directories and not capabilities.rename_checks_source


async def check_sources_stage(context: StageContext, loaded: LoadedJob) -> None:
    if not needs_source_check(context):
        return

    async def check(manifest: LoadedManifest) -> None:
        # two containers of strings per manifest, not a set per directory: what a check
        # holds while its listings are in flight is promoted by each middle-generation
        # collection (tracked objects; the strings are not)
        sources = {entry[0] for entry in loaded.entries(manifest, context.layout.dest)}
        # where the store lists a tree in one call, the attempt directory (every source
        # is below it, checked at load) in one listing; else each source's directory
        tree = context.ops.list_tree(manifest.attempt_dir)
        listings = (
            iter((tree,))
            if tree is not None
            else (
                context.ops.list_dir(directory)
                for directory in sorted({parent_of(source) for source in sources})
            )
        )
        for listing in listings:
            # each listing answered starts the next: many answers in one loop turn must
            # not each start a signed request in that turn
            await take_turn()
            try:
                async for page in listing:
                    for status in page:
                        if status.is_dir and status.path in sources:
                            raise NotAFile(
                                "rename source is a directory; only files are renamed",
                                path=status.path,
                                operation="rename",
                            )
            except NotFound:
                continue  # a re-run: the directory's files were renamed already

    await parallel(loaded.manifests, check, workers=context.loop_workers)
