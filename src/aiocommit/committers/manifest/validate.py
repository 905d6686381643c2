"""Optional output validation.

pre:  renames done.
post: every destination is a file with the manifest's size, and its etag where the
      store keeps etags through renames.
fail: ``CommitError`` naming the first file that differs; ``_SUCCESS`` is not written.
"""

from __future__ import annotations

from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.manifest.commit_file import Entry, holds
from aiocommit.committers.manifest.load_manifests import LoadedJob
from aiocommit.errors import CommitError
from aiocommit.protocol import statistics as S


async def validate_output_stage(context: StageContext, loaded: LoadedJob) -> None:
    ops = context.ops
    etags_kept = ops.capabilities.etags_preserved_in_rename

    async def check(entry: Entry) -> None:
        _, dest, size, etag = entry
        status = await ops.stat_or_none(dest)
        if not holds(status, size, etag, etags_kept=etags_kept):
            found = "missing" if status is None else f"size {status.size}, etag {status.etag}"
            raise CommitError(
                f"output validation failed: expected size {size}, etag {etag}; found {found}",
                operation="stat",
                path=context.qualify(dest),
            )

    async with stage(context, S.JOB_STAGE_VALIDATE_OUTPUT):
        for manifest in loaded.manifests:
            await parallel(
                list(loaded.entries(manifest, context.layout.dest)),
                check,
                workers=context.ops.workers,
            )
