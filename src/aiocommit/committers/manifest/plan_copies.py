"""The loaded manifests' bytes copied into the commit plan (``plan_manifests_part``), so
an abort or a re-run reads the manifests the commit started with.

pre:  manifests loaded (their bytes kept in the spill file).
post: every manifest's bytes are in a part file; the returned map says where.
fail: a store error; nothing of the destination changed. Re-runnable.
"""

from __future__ import annotations

import anyio
import anyio.to_thread

from aiocommit.committers.common.context import StageContext, parallel
from aiocommit.committers.manifest.load_manifests import LoadedJob, LoadedManifest

#: the most bytes of manifest copies written in one call
PART_BYTES = 8 << 20
#: parts written at once (each is in memory while it is written)
PART_WRITES = 4


async def save_copies(context: StageContext, loaded: LoadedJob) -> dict[str, tuple[int, int, int]]:
    """Write the loaded manifests' bytes (kept in the spill file) into parts of up to
    ``PART_BYTES``, ``PART_WRITES`` at once; returns where each manifest's copy is."""
    copies: dict[str, tuple[int, int, int]] = {}
    parts: list[list[LoadedManifest]] = []
    size = 0
    for manifest in loaded.manifests:
        if not parts or (size and size + manifest.kept_length > PART_BYTES):
            parts.append([])
            size = 0
        copies[manifest.name] = (len(parts) - 1, size, manifest.kept_length)
        parts[-1].append(manifest)
        size += manifest.kept_length

    def fill(number: int, buffer: memoryview) -> None:
        at = 0
        for manifest in parts[number]:
            loaded.spill.read_into(manifest.kept_offset, buffer[at : at + manifest.kept_length])
            at += manifest.kept_length

    async def write_part(number: int) -> None:
        # Megabytes read from the spill file: in a worker thread, not on the caller's
        # loop, but into a buffer made here. Memory a pooled worker thread allocates
        # stays in that thread's malloc arena (glibc keeps up to twice the largest block
        # freed, 16 MB here, per arena), and the next commit's part lands in another
        # thread's arena: RSS grew by a part's size per commit until every arena held one.
        buffer = bytearray(sum(m.kept_length for m in parts[number]))
        with memoryview(buffer) as view:
            await anyio.to_thread.run_sync(fill, number, view)
        data = bytes(buffer)
        del buffer
        await context.ops.write_bytes(context.layout.plan_manifests_part(number), data)

    await parallel(range(len(parts)), write_part, workers=PART_WRITES)
    return copies
