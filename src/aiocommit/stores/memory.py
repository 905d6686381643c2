"""An in-process store with real directories and etags, for tests and the stress harness."""

from __future__ import annotations

import hashlib
import itertools
import posixpath
import time
from collections.abc import AsyncIterator, Sequence
from typing import ClassVar

import anyio.lowlevel

from aiocommit.errors import (
    AlreadyExists,
    InvalidInput,
    NotAFile,
    NotEmpty,
    NotFound,
    PreconditionFailed,
    StoreError,
)
from aiocommit.stores.base import (
    FileStatus,
    StoreCapabilities,
    check_clean,
    check_counts,
    parent_of,
)
from aiocommit.stores.multipart import Upload, multipart_etag

#: every call is answered in the caller's loop, one at a time: calls in flight beyond a
#: few only cost the loop a task each (scheduled, collected, unwound on a cancel)
_CAPABILITIES = StoreCapabilities(fast_directory_delete=True, max_in_flight=64)
_METADATA_SUFFIXES = (
    ".json",
    ".json.tmp",
    ".pending",
    ".pendingset",
    ".upload",
    "_SUCCESS",
    "_SUCCESS.tmp",
)


class _File:
    __slots__ = ("data", "etag", "size")

    def __init__(self, data: bytes | None, size: int, etag: str):
        self.data = data
        self.size = size
        self.etag = etag


#: S3's limits: parts are numbered 1 to 10,000; every part but the last is at least 5 MiB
MAX_PARTS = 10_000
MIN_PART_SIZE = 5 * 1024 * 1024


class _Upload:
    __slots__ = ("initiated", "parts", "path", "upload_id")

    def __init__(self, path: str, upload_id: str, initiated: int):
        self.path = path
        self.upload_id = upload_id
        self.initiated = initiated
        #: part number -> (etag, size, data: None where the store keeps no data)
        self.parts: dict[int, tuple[str, int, bytes | None]] = {}


class MemoryStore:
    """A store held in a dict. Renames keep etags, as on ADLS Gen2 with HNS.

    Creating a store registers it under its name, for ``open_store``.
    ``keep_data=False`` keeps only sizes and etags of data files (reads return zero bytes
    of the right length) and the content of the committers' own files (manifests, plans,
    pending sets and upload records, ``_SUCCESS``, any ``_``-prefixed name such as the
    destination's lease), so the stress harness can hold millions of files.
    URLs: ``memory://NAME/path``; ``MemoryStore.named(NAME)`` is one instance per process.

    Multipart uploads (``stores.multipart``) behave as S3's: parts are MD5-etagged, a
    completed object's etag is ``multipart_etag`` of its parts, every part but the last
    must be at least ``MIN_PART_SIZE`` (S3's EntityTooSmall), and completing or aborting
    an upload that is gone (never created, completed, aborted) answers NoSuchUpload
    (``NotFound``), as S3 documents.
    """

    _named: ClassVar[dict[str, MemoryStore]] = {}
    _etags = itertools.count(1)

    def __init__(self, name: str = "default", *, page_size: int = 1000, keep_data: bool = True):
        if not isinstance(name, str) or not name or "/" in name:
            raise InvalidInput(f"a memory store's name: a str without '/', not {name!r}")
        check_counts(page_size=page_size)
        self.name = name
        self.page_size = page_size
        self.keep_data = keep_data
        self._dirs: dict[str, dict[str, bool]] = {"/": {}}
        self._files: dict[str, _File] = {}
        self._uploads: dict[str, _Upload] = {}
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
            raise InvalidInput(f"{uri!r} is not in memory store {self.name!r}")
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
        keep = (
            self.keep_data
            or path.endswith(_METADATA_SUFFIXES)
            or posixpath.basename(path).startswith("_")  # the protocol's own (the lease)
        )
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

    # -- multipart uploads -----------------------------------------------------------------

    def _upload(self, path: str, upload_id: str, op: str) -> _Upload:
        upload = self._uploads.get(upload_id)
        if upload is None or upload.path != path:
            raise NotFound(
                f"NoSuchUpload: no upload {upload_id} (never created, completed or aborted)",
                path=path,
                operation=op,
            )
        return upload

    async def create_upload(self, path: str) -> str:
        check_clean(path)
        upload_id = f"memory-upload-{next(self._etags)}"
        self._uploads[upload_id] = _Upload(path, upload_id, int(time.time() * 1000))
        return upload_id

    async def upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        upload = self._upload(path, upload_id, "upload_part")
        if not 1 <= number <= MAX_PARTS:
            raise StoreError(
                f"InvalidArgument: part number {number} is not in 1..{MAX_PARTS}",
                path=path,
                operation="upload_part",
            )
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        upload.parts[number] = (etag, len(data), bytes(data) if self.keep_data else None)
        return etag

    async def complete_upload(
        self, path: str, upload_id: str, etags: Sequence[str], *, if_none_match: bool = False
    ) -> FileStatus:
        upload = self._upload(path, upload_id, "complete_upload")
        if not etags:
            raise StoreError(
                "MalformedXML: an upload completes with at least one part",
                path=path,
                operation="complete_upload",
            )
        chunks: list[bytes | None] = []
        for number, etag in enumerate(etags, 1):
            part = upload.parts.get(number)
            if part is None or part[0] != etag.strip('"'):
                raise StoreError(
                    f"InvalidPart: part {number} was not uploaded with etag {etag}",
                    path=path,
                    operation="complete_upload",
                )
            if number < len(etags) and part[1] < MIN_PART_SIZE:
                raise StoreError(
                    f"EntityTooSmall: part {number} is {part[1]} bytes, under "
                    f"{MIN_PART_SIZE} and not the last",
                    path=path,
                    operation="complete_upload",
                )
            chunks.append(part[2])
        if if_none_match and path in self._files:
            raise AlreadyExists("file exists", path=path, operation="complete_upload")
        kept = [chunk for chunk in chunks if chunk is not None]
        data = (
            b"".join(kept)
            if len(kept) == len(chunks)
            else bytes(sum(upload.parts[n][1] for n in range(1, len(etags) + 1)))
        )
        status = self._put(path, data, True, "complete_upload")
        del self._uploads[upload_id]
        file = self._files[path]
        file.etag = multipart_etag(etags)
        return FileStatus(path, False, status.size, file.etag)

    async def abort_upload(self, path: str, upload_id: str) -> bool:
        upload = self._uploads.get(upload_id)
        if upload is None or upload.path != path:
            return False
        del self._uploads[upload_id]
        return True

    async def list_uploads(self, prefix: str) -> AsyncIterator[list[Upload]]:
        start = prefix if prefix.startswith("/") else "/" + prefix
        found = sorted(
            (Upload(u.path, u.upload_id, u.initiated) for u in self._uploads.values()),
            key=lambda u: (u.path, u.initiated, u.upload_id),
        )
        found = [u for u in found if u.path.startswith(start)]
        for begin in range(0, len(found), self.page_size):
            yield found[begin : begin + self.page_size]

    async def aclose(self) -> None:
        return None

    def file_count(self) -> int:
        return len(self._files)
