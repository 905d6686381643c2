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
from aiocommit.stores.base import REQUEST_RETRY, check_clean


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


class KnownDirectories:
    """Directories this store client made or found (their ``dir/`` marker is there), so
    ``mkdirs`` asks the store nothing about them again; a delete through the same client
    forgets the path and everything below it. A directory another client deletes stays
    known here: ``mkdirs`` of it is then a no-op (its files still land, as keys need no
    parent), so a job's directories are made by the clients that use them."""

    def __init__(self) -> None:
        self._dirs: set[str] = set()

    def __contains__(self, path: str) -> bool:
        return path.rstrip("/") in self._dirs

    def add(self, path: str) -> None:
        self._dirs.add(path.rstrip("/"))

    def forget(self, path: str) -> None:
        """Forget ``path`` and every directory below it (they are being deleted)."""
        root = path.rstrip("/")
        self._dirs = {d for d in self._dirs if d != root and not d.startswith(root + "/")}


async def mkdirs_with_markers(
    path: str,
    probe: Callable[[str], Awaitable[object | None]],
    place: Callable[[str], Coroutine[Any, Any, None]],
    known: KnownDirectories,
) -> None:
    """``mkdirs`` on a prefix store with the fewest requests its semantics need.

    Nothing at all for a directory in ``known``. Else walk up from ``path`` one level at
    a time, probing the level as a file and as a marker (two requests at once): a file
    raises ``AlreadyExists`` before anything is written; a marker, or a level in
    ``known``, ends the walk (what is above it exists). Then ``place`` the missing
    markers (``dir/``), all at once. Every marker found or placed joins ``known``, so a
    retry of a call that failed part-way (the engine retries the call) resumes where it
    stopped instead of walking again. Each request runs in ``REQUEST_RETRY``: the engine
    retries it on its own, not the walk. An error names ``path``, the directory asked for,
    and the level it was about."""
    check_clean(path)
    if path in known or not path.strip("/"):
        return
    retry = REQUEST_RETRY.get()

    async def level(directory: str) -> tuple[bool, bool]:
        """(a file is at ``directory``, its marker is there): two probes at once."""
        found: dict[str, object | None] = {}

        async def look(name: str) -> None:
            found[name] = await retry(lambda: probe(name))

        await gather(partial(look, name) for name in (directory, directory + "/"))
        return found[directory] is not None, found[directory + "/"] is not None

    missing: list[str] = []
    try:
        for directory in reversed(directory_chain(path)):
            if directory in known:
                break
            is_file, has_marker = await level(directory)
            if is_file:
                raise AlreadyExists(
                    f"a file is in the way at {directory}", path=path, operation="mkdirs"
                )
            if has_marker:
                known.add(directory)
                break
            missing.append(directory)

        async def make(directory: str) -> None:
            await retry(lambda: place(directory + "/"))
            known.add(directory)

        await gather(partial(make, d) for d in missing)
    except StoreError as error:
        if error.path is not None and error.path != path:
            if error.path.rstrip("/") != path.rstrip("/"):
                error.message = f"{error.message} (at {error.path})"
            error.path = path
        raise


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
    if not pending:
        return
    if len(pending) == 1:
        await pending[0]()
        return
    try:
        async with anyio.create_task_group() as group:
            for call in pending:
                group.start_soon(call)
    except BaseExceptionGroup as group_error:
        raise first_error(group_error) from None
