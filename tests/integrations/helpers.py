"""What the engine tests share: a destination on local or memory, and reading back what
a job committed there or to S3 (moto)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import anyio

from aiocommit.stores.memory import MemoryStore
from tests.helpers import walk


def s3_files(endpoint: str, bucket: str, root: str = "/out") -> dict[str, bytes]:
    """Every file below ``root`` of ``bucket`` on the S3 endpoint (relative path -> bytes).
    Blocking: the engine tests call it outside an event loop."""

    async def read() -> dict[str, bytes]:
        from aiocommit.stores.s3 import S3Store

        store = S3Store(bucket, endpoint_url=endpoint)
        try:
            return await walk(store, root)
        finally:
            await store.aclose()

    return anyio.run(read)


def destination(kind: str, tmp_path: Path) -> str:
    """A new destination ``.../out`` on ``kind`` (``local`` or ``memory``)."""
    if kind == "local":
        return str(tmp_path / "out")
    return f"memory://engines-{uuid.uuid4().hex}/out"


def committed_files(dest: str) -> dict[str, bytes]:
    """The files of ``dest`` (a local path or a ``destination`` memory URL), by relative
    name."""
    if dest.startswith("memory://"):
        name = dest.removeprefix("memory://").split("/")[0]
        return anyio.run(walk, MemoryStore.named(name), "/out")
    found: dict[str, bytes] = {}
    for root, _, names in os.walk(dest):
        for name in names:
            path = os.path.join(root, name)
            found[os.path.relpath(path, dest)] = Path(path).read_bytes()
    return found
