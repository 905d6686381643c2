"""Multipart-upload calls through the same door as every other store call: the job's
limiter, rate limiter, retry policy and statistics (``StoreOperations``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from aiocommit.errors import StoreError
from aiocommit.io.operations import StoreOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.stores.base import FileStatus
from aiocommit.stores.multipart import MultipartStore, Upload, as_multipart


class MultipartOperations:
    """``StoreOperations`` for a ``MultipartStore``'s upload calls."""

    def __init__(self, ops: StoreOperations):
        self.ops = ops
        self.store: MultipartStore = as_multipart(ops.store)

    async def create_upload(self, path: str) -> str:
        return await self.ops._call(S3.OP_CREATE_UPLOAD, lambda: self.store.create_upload(path))

    async def upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        return await self.ops._call(
            S3.OP_UPLOAD_PART, lambda: self.store.upload_part(path, upload_id, number, data)
        )

    async def complete_upload(self, path: str, upload_id: str, etags: Sequence[str]) -> FileStatus:
        """Complete; an error after more than one attempt (``error.attempts``) may follow
        an attempt that was applied although its response was lost."""
        return await self.ops._call(
            S3.OP_COMPLETE_UPLOAD, lambda: self.store.complete_upload(path, upload_id, etags)
        )

    async def abort_upload(self, path: str, upload_id: str) -> bool:
        return await self.ops._call(
            S3.OP_ABORT_UPLOAD, lambda: self.store.abort_upload(path, upload_id)
        )

    async def list_uploads(self, prefix: str) -> AsyncIterator[list[Upload]]:
        """Pages of outstanding uploads under ``prefix``; a failed page is retried by
        listing again from the start and skipping what was yielded (listings are stable)."""
        yielded = 0
        attempt = 0
        delay = 0.0
        started = self.ops.retry.clock()
        while True:
            attempt += 1
            iterator = self.store.list_uploads(prefix).__aiter__()
            skip = yielded
            try:
                while True:
                    try:
                        page = await self.ops._attempt(S3.OP_LIST_UPLOADS, iterator.__anext__)
                    except StopAsyncIteration:
                        return
                    dropped = min(skip, len(page))
                    page, skip = page[dropped:], skip - dropped
                    if page:
                        yielded += len(page)
                        yield page
            except StoreError as error:
                delay = await self.ops._backoff(error, attempt, delay, started)
            finally:
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
