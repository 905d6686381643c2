"""Whole-file writes on every store, over the store-call door: a reader finds no file (or
the one replaced) or all of what was written, never a part; where one store write is
several requests, by a write to a hidden temporary name and a rename into place."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable
from typing import Protocol

import anyio
import msgspec.structs

from aiocommit.errors import AlreadyExists, NotFound, StoreError
from aiocommit.stores.base import FileStatus, Store, StoreCapabilities

#: how long a failed whole write may spend removing its temporary file
TEMPORARY_DELETE_SECONDS = 10.0


class Door(Protocol):
    """What the whole-file writes need of the store-call door (``StoreOperations``)."""

    @property
    def store(self) -> Store: ...

    @property
    def capabilities(self) -> StoreCapabilities: ...

    def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> Awaitable[None]: ...

    async def stat_or_none(self, path: str) -> FileStatus | None: ...

    def write_once(self, path: str, data: bytes, *, overwrite: bool) -> Awaitable[FileStatus]: ...


async def write_whole(
    door: Door, path: str, data: bytes, *, overwrite: bool, temporary_dir: str | None = None
) -> FileStatus:
    """Write ``data`` to ``path`` whole or not at all. Where one store write is several
    requests (``capabilities.atomic_write`` false: ADLS), ``data`` goes to a hidden
    temporary name beside ``path`` (or in ``temporary_dir``) and is renamed into place
    (without ``overwrite``, by a rename that refuses an existing file); a write that
    fails removes its temporary file, one whose process dies leaves it there.
    Postcondition: the status returned names ``path``."""
    if door.capabilities.atomic_write:
        return await door.write_once(path, data, overwrite=overwrite)
    temporary = temporary_name(path, temporary_dir)
    try:
        written = await door.write_once(temporary, data, overwrite=True)
        await rename_written(door, temporary, path, written, overwrite=overwrite)
    except BaseException:
        with anyio.move_on_after(TEMPORARY_DELETE_SECONDS, shield=True):
            with contextlib.suppress(StoreError):
                await door.store.delete(temporary)
        raise
    return msgspec.structs.replace(written, path=path)


async def publish(door: Door, temporary: str, final: str, data: bytes) -> None:
    """Write ``data`` to ``temporary`` and rename it over ``final``, so readers see the
    old file or the new one, whole."""
    written = await door.write_once(temporary, data, overwrite=True)
    await rename_written(door, temporary, final, written, overwrite=True)


async def rename_written(
    door: Door, temporary: str, final: str, written: FileStatus, *, overwrite: bool
) -> None:
    """Rename a just-written ``temporary`` to ``final``. A retried rename that finds the
    source gone (or, without ``overwrite``, the destination there) after an earlier
    attempt whose answer was lost is done when ``final`` is what was written: the same
    etag where renames keep etags, else the same size."""
    try:
        await door.rename(temporary, final, overwrite=overwrite)
    except (NotFound, AlreadyExists) as error:
        if error.attempts < 2:
            raise
        landed = await door.stat_or_none(final)
        keeps_etags = door.capabilities.etags_preserved_in_rename
        if (
            landed is None
            or landed.size != written.size
            or (keeps_etags and written.etag and landed.etag and landed.etag != written.etag)
        ):
            raise
        if isinstance(error, AlreadyExists) and await door.stat_or_none(temporary):
            raise  # another writer's file is at ``final``; ours is still temporary


def temporary_name(path: str, directory: str | None = None) -> str:
    """A hidden name beside ``path`` (or in ``directory``), unique to this write (two
    writers of one path never share one): ``/d/.f.json.<hex>.tmp``. Listings that look
    for a suffix never match it."""
    parent, _, name = path.rpartition("/")
    if directory is not None:
        parent = directory.rstrip("/")
    return f"{parent}/.{name}.{uuid.uuid4().hex[:16]}.tmp"
