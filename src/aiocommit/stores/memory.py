"""An in-process store with real directories and etags, for tests and the stress harness."""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import AsyncIterator
from typing import ClassVar

import anyio.lowlevel

from aiocommit.errors import AlreadyExists, NotAFile, NotEmpty, NotFound, PreconditionFailed
from aiocommit.stores.base import FileStatus, StoreCapabilities, check_clean, parent_of

_CAPABILITIES = StoreCapabilities(fast_directory_delete=True)
_METADATA_SUFFIXES = (".json", ".json.tmp", "_SUCCESS", "_SUCCESS.tmp")


class _File:
    __slots__ = ("data", "etag", "size")

    def __init__(self, data: bytes | None, size: int, etag: str):
        self.data = data
        self.size = size
        self.etag = etag


class MemoryStore:
    """A store held in a dict. Renames keep etags, as on ADLS Gen2 with HNS.

    Creating a store registers it under its name, for ``open_store``.
    ``keep_data=False`` keeps only sizes and etags of data files (reads return zero bytes
    of the right length) and the content of the committer's own JSON files (manifests,
    plans, ``_SUCCESS``), so the stress harness can hold millions of files.
    URLs: ``memory://NAME/path``; ``MemoryStore.named(NAME)`` is one instance per process.
    """

    _named: ClassVar[dict[str, MemoryStore]] = {}
    _etags = itertools.count(1)

    def __init__(self, name: str = "default", *, page_size: int = 1000, keep_data: bool = True):
        self.name = name
        self.page_size = page_size
        self.keep_data = keep_data
        self._dirs: dict[str, dict[str, bool]] = {"/": {}}
        self._files: dict[str, _File] = {}
        MemoryStore._named[name] = self  # memory://NAME/ URLs find the newest of that name

    @classmethod
    def named(cls, name: str) -> MemoryStore:
        store = cls._named.get(name)
        if store is None:
            store = cls._named[name] = cls(name)
        return store

    def opener(self) -> None:
        """None: the files live in this process; another process cannot open them."""
        return None

    @property
    def capabilities(self) -> StoreCapabilities:
        return _CAPABILITIES

    def qualify(self, path: str) -> str:
        return f"memory://{self.name}{path}"

    def unqualify(self, uri: str) -> str:
        prefix = f"memory://{self.name}/"
        if not uri.startswith(prefix):
            raise ValueError(f"{uri!r} is not in memory store {self.name!r}")
        return uri[len(prefix) - 1 :]

    # -- helpers -------------------------------------------------------------------------

    def _new_etag(self) -> str:
        return f"0x{next(self._etags):016X}"

    def _status(self, path: str) -> FileStatus | None:
        file = self._files.get(path)
        if file is not None:
            return FileStatus(path, False, file.size, file.etag)
        if path in self._dirs:
            return FileStatus(path, True, 0, None)
        return None

    def _make_dirs(self, path: str, op: str) -> None:
        missing: list[str] = []
        current = path
        while current not in self._dirs:
            if current in self._files:
                raise AlreadyExists("a file is in the way", path=current, operation=op)
            missing.append(current)
            current = parent_of(current)
        for directory in reversed(missing):
            self._dirs[directory] = {}
            self._dirs[parent_of(directory)][posixpath.basename(directory)] = True

    def _put(self, path: str, data: bytes, overwrite: bool, op: str) -> FileStatus:
        check_clean(path)
        if path in self._dirs:
            raise AlreadyExists("a directory is at the path", path=path, operation=op)
        if not overwrite and path in self._files:
            raise AlreadyExists("file exists", path=path, operation=op)
        self._make_dirs(parent_of(path), op)
        keep = self.keep_data or path.endswith(_METADATA_SUFFIXES)
        file = _File(data if keep else None, len(data), self._new_etag())
        self._files[path] = file
        self._dirs[parent_of(path)][posixpath.basename(path)] = False
        return FileStatus(path, False, file.size, file.etag)

    # -- the store contract ----------------------------------------------------------------

    async def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        children = self._dirs.get(path)
        if children is None:
            raise NotFound("no such directory", path=path, operation="list_dir")
        names = sorted(children)
        base = path.rstrip("/")
        for start in range(0, len(names), self.page_size):
            page = []
            for name in names[start : start + self.page_size]:
                status = self._status(f"{base}/{name}")
                if status is not None:
                    page.append(status)
            yield page

    async def stat(self, path: str) -> FileStatus:
        await anyio.lowlevel.checkpoint()  # a call suspends, as on a real store
        status = self._status(path)
        if status is None:
            raise NotFound("no such file or directory", path=path, operation="stat")
        return status

    async def mkdirs(self, path: str) -> None:
        await anyio.lowlevel.checkpoint()  # a call suspends, as on a real store
        check_clean(path)
        self._make_dirs(path, "mkdirs")

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        await anyio.lowlevel.checkpoint()  # a call suspends, as on a real store
        if path in self._files:
            del self._files[path]
            del self._dirs[parent_of(path)][posixpath.basename(path)]
            return True
        children = self._dirs.get(path)
        if children is None:
            return False
        if path == "/":
            raise PreconditionFailed("refusing to delete the root", path=path, operation="delete")
        if children and not recursive:
            raise NotEmpty("directory is not empty", path=path, operation="delete")
        pending = [path]
        while pending:
            directory = pending.pop()
            base = directory.rstrip("/")
            for name, is_dir in self._dirs[directory].items():
                child = f"{base}/{name}"
                if is_dir:
                    pending.append(child)
                else:
                    del self._files[child]
            if directory != path:
                del self._dirs[directory]
        del self._dirs[path]
        del self._dirs[parent_of(path)][posixpath.basename(path)]
        return True

    async def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> None:
        await anyio.lowlevel.checkpoint()  # a call suspends, as on a real store
        check_clean(dest)
        file = self._files.get(source)
        if file is None:
            if source in self._dirs:
                raise NotAFile(
                    "rename source is a directory; only files are renamed",
                    path=source,
                    operation="rename",
                )
            raise NotFound("rename source not found", path=source, operation="rename")
        if source_etag is not None and file.etag != source_etag:
            raise PreconditionFailed(
                f"source etag is {file.etag}, expected {source_etag}",
                path=source,
                operation="rename",
            )
        parent = parent_of(dest)
        if parent not in self._dirs:
            raise NotFound("rename destination parent not found", path=parent, operation="rename")
        if dest in self._dirs or (dest in self._files and not overwrite):
            raise AlreadyExists("rename destination exists", path=dest, operation="rename")
        if source == dest:
            return
        del self._files[source]
        del self._dirs[parent_of(source)][posixpath.basename(source)]
        self._files[dest] = file
        self._dirs[parent][posixpath.basename(dest)] = False

    async def read_bytes(self, path: str) -> bytes:
        await anyio.lowlevel.checkpoint()  # a call suspends, as on a real store
        file = self._files.get(path)
        if file is None:
            raise NotFound("no such file", path=path, operation="read_bytes")
        return file.data if file.data is not None else bytes(file.size)

    async def write_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> FileStatus:
        await anyio.lowlevel.checkpoint()  # a call suspends, as on a real store
        return self._put(path, bytes(data), overwrite, "write_bytes")

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus:
        with open(local_path, "rb") as handle:  # noqa: ASYNC230 - an in-memory store for tests
            data = handle.read()
        return self._put(path, data, overwrite, "upload_file")

    async def aclose(self) -> None:
        return None

    def file_count(self) -> int:
        return len(self._files)
