"""What the engine tests share: reading back what a job committed to S3 (moto)."""

from __future__ import annotations

import anyio

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
