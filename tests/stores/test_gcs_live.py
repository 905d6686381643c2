"""Opt-in checks against real GCS: the preconditions the emulator does not enforce.

Run with ``AIOCOMMIT_GCS_LIVE_URL=gs://bucket/some/prefix`` and credentials that
gcloud-aio-auth finds (``GOOGLE_APPLICATION_CREDENTIALS``, or
``AIOCOMMIT_GCS_LIVE_METADATA=1`` on a GCE/GKE host). Each run works under a fresh
``<prefix>/aiocommit-live-<uuid>`` and deletes it afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from aiocommit.errors import AlreadyExists, NotFound, PreconditionFailed, StoreError
from aiocommit.stores.base import join
from aiocommit.stores.gcs import GcsStore, open_gcs

LIVE_URL = os.environ.get("AIOCOMMIT_GCS_LIVE_URL", "")
HAS_CREDENTIALS = bool(
    os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    or os.environ.get("AIOCOMMIT_GCS_LIVE_METADATA") == "1"
)

pytestmark = pytest.mark.skipif(
    not (LIVE_URL.startswith("gs://") and HAS_CREDENTIALS),
    reason="set AIOCOMMIT_GCS_LIVE_URL=gs://bucket/prefix and GCS credentials",
)


@pytest.fixture
async def live(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[GcsStore, str]]:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    store, base = open_gcs(LIVE_URL)
    root = join(base, f"aiocommit-live-{uuid.uuid4().hex}")
    try:
        yield store, root
    finally:
        await store.delete(root, recursive=True)
        await store.aclose()


async def test_live_preconditions(live: tuple[GcsStore, str]) -> None:
    gcs, root = live
    v1 = await gcs.write_bytes(join(root, "a"), b"v1")
    with pytest.raises(AlreadyExists):
        await gcs.write_bytes(join(root, "a"), b"v2", overwrite=False)
    v2 = await gcs.write_bytes(join(root, "a"), b"v2")
    old = await gcs.write_bytes(join(root, "b"), b"old")
    with pytest.raises(AlreadyExists):
        await gcs.rename(join(root, "a"), join(root, "b"))
    assert await gcs.stat(join(root, "b")) == old
    with pytest.raises(PreconditionFailed):
        await gcs.rename(join(root, "a"), join(root, "c"), source_etag=v1.etag)
    with pytest.raises(NotFound):
        await gcs.stat(join(root, "c"))
    await gcs.rename(join(root, "a"), join(root, "c"), source_etag=v2.etag)
    moved = await gcs.stat(join(root, "c"))
    assert (moved.checksum, moved.size) == (v2.checksum, v2.size)
    with pytest.raises(NotFound) as caught:
        await gcs.rename(join(root, "a"), join(root, "d"), source_etag=v2.etag)
    assert caught.value.path == join(root, "a")


async def test_live_interrupted_rename(live: tuple[GcsStore, str]) -> None:
    gcs, root = live
    src, dst = join(root, "task/f"), join(root, "out/f")
    recorded = await gcs.write_bytes(src, b"payload")
    await gcs._storage().copy(gcs.bucket, src[1:], gcs.bucket, new_name=dst[1:])
    with pytest.raises(AlreadyExists):
        await gcs.rename(src, dst, source_etag=recorded.etag)
    assert await gcs.complete_interrupted_rename(src, dst) is True
    with pytest.raises(NotFound):
        await gcs.stat(src)


async def test_live_atomic_move_if_offered(live: tuple[GcsStore, str]) -> None:
    """objects.moveTo on this bucket: moves atomically, or is refused with a StoreError."""
    gcs, root = live
    written = await gcs.write_bytes(join(root, "m"), b"x")
    mover = GcsStore(gcs.bucket, atomic_move=True)
    try:
        await mover.rename(join(root, "m"), join(root, "n"), source_etag=written.etag)
    except StoreError as error:
        pytest.skip(f"objects.moveTo not available here: {error}")
    finally:
        await mover.aclose()
    assert (await gcs.stat(join(root, "n"))).checksum == written.checksum
    with pytest.raises(NotFound):
        await gcs.stat(join(root, "m"))
