"""Multipart-upload calls through the same door as every other store call: the job's
limiter, rate limiter, retry policy and statistics (``StoreOperations``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass

from aiocommit.io.operations import StoreOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.stores.base import FileStatus
from aiocommit.stores.multipart import MultipartStore, Upload, as_multipart


@dataclass(frozen=True)
class CreatedUpload:
    """An upload ``create_upload_tracked`` started, and when its create requests went:
    with more than one attempt, an earlier one may have started an upload of the same
    key whose answer was lost (``first_sent`` .. ``last_sent``, client clock, ms)."""

    upload_id: str
    attempts: int
    first_sent: int
    last_sent: int


class MultipartOperations:
    """``StoreOperations`` for a ``MultipartStore``'s upload calls."""

    def __init__(self, ops: StoreOperations):
        self.ops = ops
        self.store: MultipartStore = as_multipart(ops.store)

    async def create_upload(self, path: str) -> str:
        return await self.ops.call(
            S3.OP_CREATE_UPLOAD, lambda: self.store.create_upload(path), path=path
        )

    async def create_upload_tracked(self, path: str) -> CreatedUpload:
        """``create_upload``, counting its attempts and when they were sent."""
        sent: list[int] = []

        def create() -> Awaitable[str]:
            sent.append(int(time.time() * 1000))
            return self.store.create_upload(path)

        upload_id = await self.ops.call(S3.OP_CREATE_UPLOAD, create, path=path)
        return CreatedUpload(upload_id, len(sent), sent[0], sent[-1])

    async def upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        return await self.ops.call(
            S3.OP_UPLOAD_PART,
            lambda: self.store.upload_part(path, upload_id, number, data),
            path=path,
        )

    async def complete_upload(self, path: str, upload_id: str, etags: Sequence[str]) -> FileStatus:
        """Complete; an error after more than one attempt (``error.attempts``) may follow
        an attempt that was applied although its response was lost."""
        return await self.ops.call(
            S3.OP_COMPLETE_UPLOAD,
            lambda: self.store.complete_upload(path, upload_id, etags),
            path=path,
        )

    async def abort_upload(self, path: str, upload_id: str) -> bool:
        return await self.ops.call(
            S3.OP_ABORT_UPLOAD, lambda: self.store.abort_upload(path, upload_id), path=path
        )

    def list_uploads(self, prefix: str) -> AsyncIterator[list[Upload]]:
        """Pages of outstanding uploads under ``prefix``, restarted on a retryable failure
        (``StoreOperations.pages``)."""
        store = self.store
        return self.ops.pages(S3.OP_LIST_UPLOADS, lambda: store.list_uploads(prefix))
