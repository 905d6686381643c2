"""Directories as key prefixes: what the object-store adapters (GCS, S3) share.

Store path ``/a/b`` is object key ``a/b``; the directory ``/a`` is every key under
``a/``, plus a zero-byte marker ``a/`` that ``mkdirs`` writes so an empty directory
exists. How a key is read or written is each adapter's; the rules are here once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from aiocommit.errors import AlreadyExists, InvalidInput, NotFound, StoreError, first_error
from aiocommit.stores.base import check_clean


def object_key(path: str) -> str:
    """The object key of an absolute store path: ``/a/b`` -> ``a/b``."""
    if not path.startswith("/"):
        raise InvalidInput(f"not an absolute store path: {path!r}")
    return path[1:]


def listing_prefix(path: str) -> str:
    """The listing prefix of the directory at ``path`` (``""`` for the root)."""
    name = path.strip("/")
    return f"{name}/" if name else ""


def directory_chain(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b", "/a/b/c"]``: the directory and its ancestors, top
    down (none for the root)."""
    segments = path.strip("/").split("/") if path.strip("/") else []
    return ["/" + "/".join(segments[: i + 1]) for i in range(len(segments))]


async def mkdirs_with_markers(
    path: str,
    probe: Callable[[str], Awaitable[object | None]],
    place: Callable[[str], Coroutine[Any, Any, None]],
) -> None:
    """``mkdirs`` on a prefix store: probe (concurrently) each directory of the chain as a
    file and as a marker; a file at any raises ``AlreadyExists`` before anything is
    written; then ``place`` each missing marker (``dir/``). ``probe`` answers None for
    nothing there."""
    check_clean(path)
    dirs = directory_chain(path)
    if not dirs:
        return
    found: dict[str, object | None] = {}

    async def look(name: str) -> None:
        found[name] = await probe(name)

    await gather(partial(look, name) for d in dirs for name in (d, d + "/"))
    for directory in dirs:
        if found[directory] is not None:
            raise AlreadyExists("a file is in the way", path=directory, operation="mkdirs")
    await gather(partial(place, d + "/") for d in dirs if found[d + "/"] is None)


async def read_local_file(local_path: str) -> bytes:
    """A local file's bytes for ``upload_file`` (in a worker thread); a missing file is
    ``NotFound``, another failure a ``StoreError``, both naming the local path."""
    try:
        return await anyio.to_thread.run_sync(Path(local_path).read_bytes)
    except FileNotFoundError as error:
        raise NotFound("no such local file", path=local_path, operation="upload_file") from error
    except OSError as error:
        raise StoreError(str(error), path=local_path, operation="upload_file") from error


async def gather(calls: Iterable[Callable[[], Coroutine[Any, Any, None]]]) -> None:
    """Run ``calls`` concurrently; the first failure cancels the rest and is raised as is
    (not wrapped in an exception group)."""
    pending = list(calls)
    if len(pending) == 1:
        await pending[0]()
        return
    try:
        async with anyio.create_task_group() as group:
            for call in pending:
                group.start_soon(call)
    except BaseExceptionGroup as group_error:
        raise first_error(group_error) from None
