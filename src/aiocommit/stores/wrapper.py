"""``StoreWrapper``: a store that passes every call to another through one hook.

Fault injection (``FaultyStore``) and the stress harness's metering wrap a store this
way: they override ``intercept`` and inherit the rest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from aiocommit.stores.base import REQUEST_RETRY, FileStatus, Store, StoreCapabilities, StoreOpener
from aiocommit.stores.multipart import Upload

T = TypeVar("T")


class StoreWrapper:
    """Delegates to ``inner``; every store call goes through ``intercept``. A listing is
    one call per page, and its end costs no call (a real store says so with the last
    page); an empty directory's listing is one call that yields an empty page."""

    def __init__(self, inner: Store):
        self.inner = inner

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` (the wrapped store's ``operation`` on ``path``)."""
        return await call()

    def opener(self) -> StoreOpener | None:
        """None: re-opening only the inner store would drop what the wrapper adds."""
        return None

    @property
    def capabilities(self) -> StoreCapabilities:
        return self.inner.capabilities

    def qualify(self, path: str) -> str:
        return self.inner.qualify(path)

    def unqualify(self, uri: str) -> str:
        return self.inner.unqualify(uri)

    async def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        iterator = self.inner.list_dir(path).__aiter__()
        first = True
        try:
            while True:
                try:
                    page = await iterator.__anext__()
                except StopAsyncIteration:
                    if not first:
                        return
                    page = []
                first = False
                yield await self._page("list_dir", path, page)
                if not page:
                    return
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    def _page(self, operation: str, path: str, page: list[T]) -> Awaitable[list[T]]:
        """One page of a listing served as one call, in ``REQUEST_RETRY``: a page whose
        call fails is retried alone, as a store's page request is."""

        async def served() -> list[T]:
            return page

        return REQUEST_RETRY.get()(partial(self.intercept, operation, path, served))

    async def stat(self, path: str) -> FileStatus:
        return await self.intercept("stat", path, lambda: self.inner.stat(path))

    async def mkdirs(self, path: str) -> None:
        await self.intercept("mkdirs", path, lambda: self.inner.mkdirs(path))

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        return await self.intercept(
            "delete", path, lambda: self.inner.delete(path, recursive=recursive)
        )

    async def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> None:
        await self.intercept(
            "rename",
            source,
            lambda: self.inner.rename(source, dest, overwrite=overwrite, source_etag=source_etag),
        )

    # -- directory swaps, where the inner store has them (``LocalStore``)

    def can_swap_directories(self, scratch: str) -> bool:
        probe = getattr(self.inner, "can_swap_directories", None)
        return bool(probe(scratch)) if probe is not None else False

    async def exchange_directories(self, first: str, second: str) -> None:
        await self.intercept(
            "exchange",
            first,
            lambda: self.inner.exchange_directories(first, second),  # type: ignore[attr-defined]
        )

    async def move_directory(self, source: str, dest: str) -> None:
        await self.intercept(
            "move_directory",
            source,
            lambda: self.inner.move_directory(source, dest),  # type: ignore[attr-defined]
        )

    async def link(self, source: str, dest: str) -> None:
        await self.intercept("link", source, lambda: self.inner.link(source, dest))  # type: ignore[attr-defined]

    async def read_bytes(self, path: str) -> bytes:
        return await self.intercept("read_bytes", path, lambda: self.inner.read_bytes(path))

    async def write_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> FileStatus:
        return await self.intercept(
            "write_bytes", path, lambda: self.inner.write_bytes(path, data, overwrite=overwrite)
        )

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus:
        return await self.intercept(
            "upload_file",
            path,
            lambda: self.inner.upload_file(local_path, path, overwrite=overwrite),
        )

    # multipart uploads (``stores.multipart``): forwarded when the inner store has them;
    # ``as_multipart`` refuses a wrapper whose inner store has not

    async def create_upload(self, path: str) -> str:
        inner: Any = self.inner
        return await self.intercept("create_upload", path, lambda: inner.create_upload(path))

    async def upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        inner: Any = self.inner
        return await self.intercept(
            "upload_part", path, lambda: inner.upload_part(path, upload_id, number, data)
        )

    async def complete_upload(
        self, path: str, upload_id: str, etags: Sequence[str], *, if_none_match: bool = False
    ) -> FileStatus:
        inner: Any = self.inner
        return await self.intercept(
            "complete_upload",
            path,
            lambda: inner.complete_upload(path, upload_id, etags, if_none_match=if_none_match),
        )

    async def abort_upload(self, path: str, upload_id: str) -> bool:
        inner: Any = self.inner
        return await self.intercept(
            "abort_upload", path, lambda: inner.abort_upload(path, upload_id)
        )

    async def list_uploads(self, prefix: str) -> AsyncIterator[list[Upload]]:
        inner: Any = self.inner
        async for page in inner.list_uploads(prefix):
            yield await self._page("list_uploads", prefix, page)

    async def aclose(self) -> None:
        await self.inner.aclose()
