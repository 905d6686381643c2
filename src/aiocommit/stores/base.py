"""The store contract: the few coroutines the Manifest Committer protocol needs, no more.

Paths are absolute POSIX strings inside the store (``"/dest/part=1/f.parquet"``),
never URL-escaped: spaces, ``%``, ``#``, ``?`` and unicode are ordinary characters.
``qualify`` and ``unqualify`` convert between such a path and its URL, nothing escaped
(Hadoop's ``Path.toString()`` form, e.g. ``file:/dest/a b``), as people type and read it.
Manifests and ``_SUCCESS`` hold the escaped URI form of that URL instead
(``file:/dest/a%20b``): ``aiocommit.protocol.uris`` converts, for every scheme alike.

Contract (every adapter; checked by ``tests/contract``):

* ``list_dir`` yields pages of the direct children of a directory; a missing
  directory raises ``NotFound``; a file raises ``NotFound`` too (it has no children).
  A symbolic link is listed as itself (``is_link``), never as what it points at.
* ``stat`` returns the status of a file or directory, or raises ``NotFound``.
* ``mkdirs`` creates a directory and its missing parents; an existing directory is fine;
  a file at the path or at an ancestor raises ``AlreadyExists``.
* ``delete`` removes a file, or a directory (``recursive=True`` for a non-empty one,
  else ``NotEmpty``). It returns ``False`` when nothing was there.
* ``rename`` moves one file. Without ``overwrite`` an existing destination raises
  ``AlreadyExists``. A missing source raises ``NotFound`` whose ``path`` is the source;
  a missing destination parent raises ``NotFound`` whose ``path`` is that parent (stores
  without directories never do). With ``source_etag``, a source whose etag differs raises
  ``PreconditionFailed`` and nothing moves. A source that is a directory or a link raises
  ``NotAFile`` and nothing moves (stores with real directories; a store that cannot
  check cheaply says ``rename_checks_source=False`` and the engine checks before renaming).
* ``read_bytes`` / ``write_bytes`` / ``upload_file`` move small files in and out;
  ``write_bytes`` makes missing parents; readers never see a partial file where
  the store allows it.
* Every failure is a ``StoreError`` subclass from ``aiocommit.errors``; nothing else leaks.
"""

from __future__ import annotations

import contextvars
import posixpath
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

import msgspec

from aiocommit.errors import InvalidInput, StoreError


class FileStatus(msgspec.Struct, frozen=True, gc=False):
    """One entry of a listing, or the answer to ``stat``."""

    path: str
    is_dir: bool
    size: int = 0
    etag: str | None = None
    #: a content checksum that a copy keeps (GCS crc32c); None where the store has none
    checksum: str | None = None
    #: a symbolic link (listed as itself, never followed); only local stores have them
    is_link: bool = False

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


#: ``StoreCapabilities.loop_in_flight`` of the remote stores (ADLS, GCS, S3): enough calls
#: to keep one loop busy at a store call's usual latency (docs/performance.md, the loop)
REMOTE_LOOP_IN_FLIGHT = 128


class StoreCapabilities(msgspec.Struct, frozen=True):
    """What a store promises; stages branch on these answers, never on the store's type.

    Attributes:
        etags: files carry an etag (or an equivalent identity such as a generation).
        etags_preserved_in_rename: a renamed file keeps its etag, so a rename can be
            recognised at its destination by the etag recorded in the manifest.
        atomic_rename: a file rename is one atomic store operation.
        directories: the store has real directories (mkdirs and parents matter).
        fast_directory_delete: deleting a directory tree is one cheap call (ADLS Gen2
            with HNS, memory), so cleanup need not spread it over parallel deletes (a
            local disk's tree delete is serial: spreading it pays).
        max_in_flight: most calls this client serves at once (e.g. its connection pool);
            the job's in-flight limit is capped to it. None: no limit of its own.
        loop_in_flight: most calls worth having in flight on an event loop the job
            shares with its host (``processes=1``, ``concurrency`` left at its default):
            a remote store's calls beyond it add little throughput (the loop's CPU per
            call bounds it), and each keeps its HTTP objects alive for the garbage
            collector (promoted by young collections, they set off full ones). None: no
            such cap (local, memory: a call holds next to nothing while it waits).
        rename_checks_source: ``rename`` of a directory source raises ``NotAFile`` (as the
            contract asks of stores with directories). False where checking would cost a
            call per rename (ADLS Gen2): the engine then checks sources before renaming.
        rate_per_prefix: the store limits requests per second per key prefix (S3: the key
            up to its last ``/``), not per account or bucket: the job's adaptive rate is
            kept per prefix, so one throttled partition does not hold back the others.
        atomic_write: ``write_bytes`` makes the file appear whole or not at all (one
            request, or invisible until completed: GCS, S3, local, memory). False where a
            write is several requests and a failed one leaves a partial file (ADLS Gen2:
            create, append, flush): ``StoreOperations.write_bytes`` then writes a temporary
            name and renames it into place.
    """

    etags: bool = True
    etags_preserved_in_rename: bool = True
    atomic_rename: bool = True
    directories: bool = True
    fast_directory_delete: bool = False
    max_in_flight: int | None = None
    loop_in_flight: int | None = None
    rename_checks_source: bool = True
    atomic_write: bool = True
    rate_per_prefix: bool = False


@runtime_checkable
class Store(Protocol):
    """An async store adapter. See the module docstring for the contract."""

    @property
    def capabilities(self) -> StoreCapabilities: ...

    def qualify(self, path: str) -> str:
        """The URL of a store path, nothing escaped (``protocol.uris.manifest_uri`` makes
        the form manifests hold)."""
        ...

    def unqualify(self, uri: str) -> str:
        """The store path of a URL as ``qualify`` writes it; ``ValueError`` if it names
        another store or account."""
        ...

    def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        """Pages of the direct children of ``path``."""
        ...

    async def stat(self, path: str) -> FileStatus: ...

    async def mkdirs(self, path: str) -> None: ...

    async def delete(self, path: str, *, recursive: bool = False) -> bool: ...

    async def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> None: ...

    async def read_bytes(self, path: str) -> bytes: ...

    async def write_bytes(
        self, path: str, data: bytes, *, overwrite: bool = True
    ) -> FileStatus: ...

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus: ...

    async def aclose(self) -> None: ...


#: runs one request of a call made of several (a prefix store's ``mkdirs``), retrying it on
#: its own; the engine's door sets it for the calls it makes, else a request runs once
RequestRetry = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def _once(request: Callable[[], Awaitable[Any]]) -> Any:
    return await request()


REQUEST_RETRY: contextvars.ContextVar[RequestRetry] = contextvars.ContextVar(
    "aiocommit_request_retry", default=_once
)


#: a picklable callable that opens an equivalent store client in another process
StoreOpener = Callable[[], Store]


def opener_of(store: object) -> StoreOpener | None:
    """How another process opens this store again: the store's ``opener()`` (a store may
    define it; None where it cannot, e.g. data that lives in this process), else None."""
    opener = getattr(store, "opener", None)
    return opener() if callable(opener) else None


#: renames made as one store call: (source, destination, source etag or None) each, none
#: replacing an existing file; the outcome of each, in order: None when it was renamed,
#: else the ``StoreError`` its ``rename`` would raise. One latency for the whole batch:
#: what a store whose calls cost round trips it can overlap does with the renames of a
#: batch (the rename stage's workers use it, ``rename_batcher``)
RenameBatch = Callable[[list[tuple[str, str, str | None]]], Awaitable[list[StoreError | None]]]


def rename_batcher(store: object) -> RenameBatch | None:
    """The store's batched renames (``RenameBatch``): its ``rename_batcher()`` (a store
    may define it; None where renames are not batched, as for a wrapper that must see
    each call), else None."""
    batcher = getattr(store, "rename_batcher", None)
    return batcher() if callable(batcher) else None


#: pages of everything below a directory (files and subdirectories at every depth)
TreeListing = Callable[[str], AsyncIterator[list[FileStatus]]]


def tree_lister(store: object) -> TreeListing | None:
    """The store's listing of a whole tree in one call (``TreeListing``): its
    ``list_tree`` (a store may define it, where one request lists a tree, as ADLS's
    recursive Path-List), else None (a wrapper that must see each call has none)."""
    lister = getattr(store, "list_tree", None)
    return lister if callable(lister) else None


def join(parent: str, *names: str) -> str:
    """Join store path parts with ``/`` without normalising anything."""
    out = parent
    for name in names:
        out = out.rstrip("/") + "/" + name.lstrip("/") if out else name
    return out


def parent_of(path: str) -> str:
    parent = posixpath.dirname(path.rstrip("/"))
    return parent or "/"


def is_under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or below it, comparing whole segments."""
    root = root.rstrip("/")
    return path == root or path.startswith(root + "/") or root == ""


def relative_to(path: str, root: str) -> str:
    """``path`` relative to ``root``; ``ValueError`` when it is not below it."""
    root = root.rstrip("/")
    if not path.startswith(root + "/"):
        raise InvalidInput(f"{path!r} is not below {root!r}")
    return path[len(root) + 1 :]


def check_counts(**values: object) -> None:
    """``InvalidInput`` unless every value is an int >= 1 (a store's page size, threads)."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidInput(f"{name} must be an int >= 1, not {value!r}")


def check_clean(path: str) -> None:
    """Raise ``ValueError`` for a path with ``.``/``..``/empty segments or a NUL byte."""
    if not path.startswith("/"):
        raise InvalidInput(f"not an absolute store path: {path!r}")
    if "//" not in path and "/." not in path and "\x00" not in path and not path.endswith("/"):
        return  # the common case: no segment can be empty, "." or ".."
    if "\x00" in path:
        raise InvalidInput(f"NUL byte in path: {path!r}")
    segments = path.split("/")[1:]
    if path != "/" and any(s in ("", ".", "..") for s in segments):
        raise InvalidInput(f"path has an empty, '.' or '..' segment: {path!r}")


async def missing_container(store: Store) -> str | None:
    """What is missing when a path of a cloud store is not found and its bucket or
    filesystem is not there either (``bucket 'x' does not exist``, from the store's own
    ``missing_container`` probe); None otherwise (it exists, the store has no such
    probe, or the answer says nothing)."""
    probe = getattr(store, "missing_container", None)
    if probe is None:
        return None
    found: str | None = await probe()
    return found
