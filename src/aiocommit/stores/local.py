"""The local filesystem: the embedded default store. URLs ``file:///abs``, ``file:/abs``,
or plain paths. Every system call runs in a worker thread, never on the caller's event
loop: the threads are the event loop's one shared, bounded set (``runtime.blocking``)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import secrets
import shutil
import stat as stat_module
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from aiocommit.errors import (
    AlreadyExists,
    InvalidInput,
    NotAFile,
    NotEmpty,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    StoreError,
    Transient,
)
from aiocommit.runtime.blocking import Batcher, loop_is_dedicated, shared_thread_limiter
from aiocommit.stores.base import (
    FileStatus,
    RenameBatch,
    StoreCapabilities,
    StoreOpener,
    check_clean,
    check_counts,
    parent_of,
)

T = TypeVar("T")

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
#: tries of a ``mkdirs`` whose new parent another caller removes while it was still empty
MAKE_DIRS_ATTEMPTS = 8


def _load_renameat2(flags: int = _RENAME_NOREPLACE) -> Callable[[str, str], None] | None:
    """``renameat2(flags)``: by default ``RENAME_NOREPLACE``, an atomic no-overwrite
    rename; ``RENAME_EXCHANGE`` swaps two paths atomically (Linux, glibc 2.28+)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int

    def rename_noreplace(source: str, dest: str) -> None:
        result = function(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(dest), flags)
        if result != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), source, None, dest)

    return rename_noreplace


_renameat2 = _load_renameat2()
_exchange = _load_renameat2(_RENAME_EXCHANGE)


def _etag(info: os.stat_result) -> str:
    """Inode, modification time and size: unchanged by a rename within one filesystem."""
    return f"{info.st_ino:x}-{info.st_mtime_ns:x}-{info.st_size:x}"


def _status(path: str, info: os.stat_result) -> FileStatus:
    if stat_module.S_ISDIR(info.st_mode):
        return FileStatus(path, True, 0, None)
    return FileStatus(path, False, info.st_size, _etag(info))


def _link_status(path: str, info: os.stat_result) -> FileStatus:
    return FileStatus(path, False, info.st_size, _etag(info), is_link=True)


def _translate(error: OSError, path: str, operation: str) -> StoreError:
    """The one place where OS errors become store errors."""
    message = error.strerror or str(error)
    if isinstance(error, FileNotFoundError):
        return NotFound(message, path=path, operation=operation)
    if isinstance(error, FileExistsError | NotADirectoryError | IsADirectoryError):
        return AlreadyExists(message, path=path, operation=operation)
    if isinstance(error, PermissionError):
        return PermissionDenied(message, path=path, operation=operation)
    if error.errno == errno.ENOTEMPTY:
        return NotEmpty(message, path=path, operation=operation)
    if error.errno in (errno.EAGAIN, errno.EINTR, errno.EBUSY, errno.ETIMEDOUT, errno.EIO):
        return Transient(message, path=path, operation=operation)
    return StoreError(message, path=path, operation=operation)


#: with ``inline_metadata``, a write of at most this many bytes runs on the event loop
INLINE_WRITE_BYTES = 64 * 1024


class LocalStore:
    """Files on a local (or mounted) filesystem.

    Etags are derived from inode, mtime and size, so they survive a rename and let
    rename recovery and output validation work here as on ADLS.

    Metadata calls (stat, rename, mkdirs, deleting a file) take microseconds, less than a
    thread hop, so the calls made in one event loop turn are batched into one worker
    thread (``runtime.blocking.Batcher``, up to ``batch`` calls); data and tree operations
    (reads, writes, listings, recursive deletes) run in a worker thread each. Threads
    come from the event loop's one shared limiter, unless ``threads`` gives this store
    its own. ``inline_metadata=True``, or a process that called
    ``runtime.blocking.dedicate_loop()`` (a rename worker), makes metadata calls on the
    event loop itself (fastest for a process that does nothing else, but it holds the
    loop while it runs). Batched, it takes twice the calls its batches run at once
    (``max_in_flight``: 256 by default); more would only wait in its queue. With
    ``inline_metadata``, small writes (``INLINE_WRITE_BYTES``: a manifest, a marker) and
    reads of files that fit ``READ_BUFFER`` run on the loop too, but a small tree's
    delete (a task attempt directory) is still batched: each rmdir waits on the disk.
    """

    def __init__(
        self,
        *,
        threads: int | None = None,
        page_size: int = 1000,
        inline_metadata: bool = False,
        batch: int = 64,
    ):
        if threads is None:
            check_counts(page_size=page_size, batch=batch)
        else:
            check_counts(threads=threads, page_size=page_size, batch=batch)
        self.page_size = page_size
        self.inline_metadata = inline_metadata
        self.threads = threads
        self.batch = batch
        self._own_limiter = None if threads is None else anyio.CapacityLimiter(threads)
        self._batcher = Batcher(self._thread_limiter, max_batch=batch)
        # a tree delete is one call but O(entries) and serial: on a busy disk, 300 task
        # attempt trees went in 6 s with one rmtree and 0.8 s in 32 threads, so cleanup
        # deletes attempt directories in parallel here. Batched metadata calls beyond
        # twice what the batcher runs at once only wait in its queue, while each costs
        # the caller's loop a task to schedule, collect and, on a cancel, unwind.
        batched = not (inline_metadata or loop_is_dedicated())
        self._capabilities = StoreCapabilities(
            atomic_rename=_renameat2 is not None,
            fast_directory_delete=False,
            max_in_flight=2 * self._batcher.max_running * batch if batched else None,
        )

    def _thread_limiter(self) -> anyio.CapacityLimiter:
        return self._own_limiter or shared_thread_limiter()

    def opener(self) -> StoreOpener:
        """The same local filesystem, opened in another process."""
        return functools.partial(
            LocalStore,
            threads=self.threads,
            page_size=self.page_size,
            inline_metadata=self.inline_metadata,
            batch=self.batch,
        )

    @property
    def capabilities(self) -> StoreCapabilities:
        return self._capabilities

    def qualify(self, path: str) -> str:
        return "file:" + path

    def unqualify(self, uri: str) -> str:
        if uri.startswith("file://"):
            rest = uri[len("file://") :]
            if not rest.startswith("/"):
                raise InvalidInput(f"{uri!r} names a remote host")
            return rest
        if uri.startswith("file:"):
            return uri[len("file:") :]
        if uri.startswith("/"):
            return uri
        if "://" in uri:
            raise InvalidInput(f"{uri!r} is not a local file URI")
        return os.path.abspath(uri)  # a relative path, as open_store reads it

    async def _run(self, function: Callable[[], T], path: str, operation: str) -> T:
        try:
            return await anyio.to_thread.run_sync(function, limiter=self._thread_limiter())
        except StoreError:
            raise
        except OSError as error:
            raise _translate(error, path, operation) from error

    async def _metadata(
        self, path: str, operation: str, function: Callable[..., T], *args: Any
    ) -> T:
        """A metadata call, ``function(*args)``: batched into a worker thread (on the
        event loop with ``inline_metadata``)."""
        try:
            if self.inline_metadata or loop_is_dedicated():
                return function(*args)
            return await self._batcher.run(function, *args)
        except StoreError:
            raise
        except OSError as error:
            raise _translate(error, path, operation) from error

    async def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        def first() -> list[os.DirEntry[str]]:
            with os.scandir(path) as entries:
                return list(entries)

        entries = await self._run(first, path, "list_dir")
        for start in range(0, len(entries), self.page_size):
            chunk = entries[start : start + self.page_size]

            def page(chunk: list[os.DirEntry[str]] = chunk) -> list[FileStatus]:
                out = []
                for entry in chunk:
                    try:
                        if entry.is_symlink():  # listed as itself, never as its target
                            out.append(_link_status(entry.path, entry.stat(follow_symlinks=False)))
                            continue
                        out.append(_status(entry.path, entry.stat(follow_symlinks=True)))
                    except FileNotFoundError:
                        continue
                return out

            yield await self._run(page, path, "list_dir")

    async def stat(self, path: str) -> FileStatus:
        return await self._metadata(path, "stat", _stat_path, path)

    async def mkdirs(self, path: str) -> None:
        check_clean(path)
        await self._metadata(path, "mkdirs", _make_dirs, path)

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        if not recursive:
            return await self._metadata(path, "delete", _remove, path, False)
        if not loop_is_dedicated():
            # a small tree (a task attempt directory after its renames: a few checksum
            # files) goes with the batched metadata calls, never on the loop (even with
            # ``inline_metadata``): an rmdir waits on the filesystem's journal, and a job
            # commit deletes a directory per task attempt
            try:
                deleted = await self._batcher.run(_remove_small_tree, path)
            except OSError as error:
                raise _translate(error, path, "delete") from error
            if deleted is not None:
                return deleted
        # a larger tree, or any tree in a rename worker (whose metadata calls run on its
        # loop), in a thread of its own: each rmdir waits on the filesystem (ext4: ~65 of
        # its ~80 us), which a worker's renames would otherwise wait through
        return await self._run(lambda: _remove(path, True), path, "delete")

    async def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> None:
        check_clean(dest)
        await self._metadata(source, "rename", _move, source, dest, overwrite, source_etag)

    # -- directory swaps (local only: ``committers.manifest.swap_partitions``)

    def can_swap_directories(self, scratch: str) -> bool:
        """Whether ``exchange_directories`` works on the filesystem of ``scratch`` (an
        existing directory): two empty directories made in it are swapped and removed."""
        if _exchange is None:
            return False
        first, second = (
            os.path.join(scratch, ".swap-probe-a"),
            os.path.join(scratch, ".swap-probe-b"),
        )
        try:
            for path in (first, second):
                os.makedirs(path, exist_ok=True)
            _exchange(first, second)
            return True
        except OSError:
            return False
        finally:
            for path in (first, second):
                with contextlib.suppress(OSError):
                    os.rmdir(path)

    async def exchange_directories(self, first: str, second: str) -> None:
        """Swap two existing directories in one atomic step (``renameat2``
        ``RENAME_EXCHANGE``): a reader sees either both as they were or both swapped.
        ``StoreError`` where the filesystem cannot (``can_swap_directories``)."""
        if _exchange is None:
            raise StoreError(
                "this system cannot swap directories", path=first, operation="exchange"
            )
        await self._metadata(first, "exchange", _exchange, first, second)

    async def move_directory(self, source: str, dest: str) -> None:
        """Rename the directory ``source`` to ``dest``, which must not exist (its parent
        is made); ``AlreadyExists`` if it does."""
        check_clean(dest)
        await self._metadata(source, "move_directory", _move_directory, source, dest)

    async def link(self, source: str, dest: str) -> None:
        """A hard link ``dest`` to the file ``source`` (the same file, so the same etag;
        parents made); a link to the same file already at ``dest`` is kept,
        ``AlreadyExists`` for another file there."""
        check_clean(dest)
        await self._metadata(source, "link", _link, source, dest)

    def rename_batcher(self) -> RenameBatch:
        """Renames in one call (``stores.base.RenameBatch``): on the event loop where
        metadata calls run there, else in one worker thread."""
        return self._rename_batch

    async def _rename_batch(
        self, renames: list[tuple[str, str, str | None]]
    ) -> list[StoreError | None]:
        if self.inline_metadata or loop_is_dedicated():
            return _move_each(renames)
        return await anyio.to_thread.run_sync(_move_each, renames, limiter=self._thread_limiter())

    async def read_bytes(self, path: str) -> bytes:
        # The buffer is allocated here, by the caller's thread, and the worker thread only
        # fills it. Memory a pool thread allocates comes from glibc's malloc arena for that
        # thread (up to 8 per core), each keeping what is freed back to it: reads of
        # manifests through rotating pool threads grew a long-lived caller's RSS commit
        # after commit (``bench loop``'s rss part), where reads allocated by the caller's
        # own thread stayed flat.
        buffer = bytearray(READ_BUFFER)
        if self.inline_metadata:
            # a file that fits the buffer (a manifest, a record) is read on the loop
            try:
                small = _read_small(path, buffer)
            except OSError as error:
                raise _translate(error, path, "read_bytes") from error
            if small is not None:
                return small
        read = await self._run(functools.partial(_read_into, path, buffer), path, "read_bytes")
        if isinstance(read, bytes):
            return read
        with memoryview(buffer) as view:
            return bytes(view[:read])

    def _publish(self, temporary: str, path: str, overwrite: bool) -> FileStatus:
        try:
            if overwrite:
                os.replace(temporary, path)
            elif _renameat2 is not None:
                _renameat2(temporary, path)
            else:
                os.link(temporary, path)
                os.unlink(temporary)
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
        return _status(path, os.stat(path))

    async def write_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> FileStatus:
        check_clean(path)

        def write() -> FileStatus:
            handle, temporary = _create_temporary_in(parent_of(path))
            try:
                _write_all(handle, data)
            except BaseException:
                os.close(handle)
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
            os.close(handle)
            try:
                # the status is stat'ed once the file is in place (after its last write is
                # flushed, on every filesystem)
                return self._publish(temporary, path, overwrite)
            except IsADirectoryError as error:  # the rename refuses it: no stat ahead
                raise AlreadyExists(
                    "a directory is at the path", path=path, operation="write_bytes"
                ) from error

        if self.inline_metadata and len(data) <= INLINE_WRITE_BYTES:
            return await self._metadata(path, "write_bytes", write)
        return await self._run(write, path, "write_bytes")

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus:
        check_clean(path)

        def upload() -> FileStatus:
            handle, temporary = _create_temporary_in(parent_of(path))
            os.close(handle)
            shutil.copyfile(local_path, temporary)
            return self._publish(temporary, path, overwrite)

        return await self._run(upload, path, "upload_file")

    async def aclose(self) -> None:
        return None


# The metadata calls, module-level functions of their arguments (a rename allocates no
# closure: every object allocated per file is one more for the garbage collector).


def _stat_path(path: str) -> FileStatus:
    return _status(path, os.stat(path))


def _make_dirs(path: str) -> None:
    """``path`` and its missing parents made. One ``mkdir`` when only ``path`` is
    missing (a task attempt's directory); ``AlreadyExists`` if a file is in the way."""
    try:
        os.mkdir(path)
        return
    except FileExistsError as error:
        if os.path.isdir(path):
            return
        raise AlreadyExists("a file is in the way", path=path, operation="mkdirs") from error
    except NotADirectoryError as error:
        raise AlreadyExists("a file is in the way", path=path, operation="mkdirs") from error
    except FileNotFoundError:
        pass  # a parent is missing
    for _ in range(MAKE_DIRS_ATTEMPTS):
        try:
            os.makedirs(path, exist_ok=True)
            return
        except (FileExistsError, NotADirectoryError) as error:
            raise AlreadyExists("a file is in the way", path=path, operation="mkdirs") from error
        except FileNotFoundError:
            # a parent made here was removed before its child was (another job's cleanup
            # removing an empty ``_temporary``): make the parents again
            continue
    os.makedirs(path, exist_ok=True)


def _remove(path: str, recursive: bool) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    try:
        if not stat_module.S_ISDIR(info.st_mode):
            os.unlink(path)
        elif recursive:
            _remove_tree(path)
        else:
            os.rmdir(path)
    except FileNotFoundError:
        return False  # removed meanwhile (another job's cleanup of an empty directory)
    return True


def _remove_tree(path: str) -> None:
    """``shutil.rmtree(path)`` at a fraction of its calls for what task attempt directories
    hold after their renames, empty directories: each child directory goes with one
    ``rmdir`` when empty (else by ``rmtree``), each other child with one ``unlink``. Links
    are removed, never followed (``rmdir`` of a link fails; ``rmtree`` does not follow)."""
    with os.scandir(path) as entries:
        children = [(entry.path, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for child, is_dir in children:
        try:
            if is_dir:
                os.rmdir(child)
            else:
                os.unlink(child)
        except FileNotFoundError:
            continue
        except OSError as error:
            if not is_dir or error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            shutil.rmtree(child)
    os.rmdir(path)


#: ``read_bytes`` reads a file up to this size into a buffer the caller's thread allocated
#: (a manifest of a few hundred files); a larger one is read by the worker thread
READ_BUFFER = 64 * 1024


def _read_small(path: str, buffer: bytearray) -> bytes | None:
    """``path``'s bytes when its size fits ``buffer`` (read into it); None, reading
    nothing, for a larger file."""
    with open(path, "rb", buffering=0) as handle:
        if os.fstat(handle.fileno()).st_size > len(buffer):
            return None
        with memoryview(buffer) as view:
            filled = 0
            while filled < len(buffer):
                got = handle.readinto(view[filled:])
                if not got:
                    return bytes(view[:filled])
                filled += got
            return bytes(view) + handle.read()  # it grew since fstat


def _read_into(path: str, buffer: bytearray) -> int | bytes:
    """In a worker thread: ``path`` read into ``buffer``, returning how many bytes it
    filled; a file that does not fit is returned whole, as bytes read by this thread."""
    with open(path, "rb", buffering=0) as handle, memoryview(buffer) as view:
        filled = 0
        while filled < len(buffer):
            got = handle.readinto(view[filled:])
            if not got:
                return filled
            filled += got
        rest = handle.read()
        return bytes(view) + rest if rest else filled


#: trees of up to this many entries are deleted with the batched metadata calls (a flat
#: task attempt directory after its renames; a larger tree would hold up the renames
#: batched with it)
SMALL_TREE_ENTRIES = 8


def _remove_small_tree(path: str) -> bool | None:
    """``_remove(path, True)`` for a file or a tree of at most ``SMALL_TREE_ENTRIES``
    entries; None (nothing deleted) for a larger tree. Links are removed, never followed."""
    try:
        return _remove(path, False)  # a file, an empty directory, or nothing
    except OSError as error:
        if error.errno != errno.ENOTEMPTY:
            raise
    files: list[str] = []
    directories = [path]
    for directory in directories:  # grows as subdirectories are found: breadth first
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    directories.append(entry.path)
                else:
                    files.append(entry.path)
        if len(files) + len(directories) > SMALL_TREE_ENTRIES:
            return None
    for file in files:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(file)
    for directory in reversed(directories):  # the deepest first
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(directory)
    return True


def _move_directory(source: str, dest: str) -> None:
    os.makedirs(parent_of(dest), exist_ok=True)
    if _renameat2 is not None:
        _renameat2(source, dest)
    elif os.path.lexists(dest):
        raise FileExistsError(errno.EEXIST, "destination exists", dest)
    else:
        os.rename(source, dest)


def _link(source: str, dest: str) -> None:
    os.makedirs(parent_of(dest), exist_ok=True)
    try:
        os.link(source, dest)
    except FileExistsError:
        if not os.path.samestat(os.stat(source), os.stat(dest)):
            raise


def _move(source: str, dest: str, overwrite: bool, source_etag: str | None) -> None:
    info = os.lstat(source)  # one call: the kind check and the etag precondition
    if not stat_module.S_ISREG(info.st_mode):
        kind = "a directory" if stat_module.S_ISDIR(info.st_mode) else "not a regular file"
        raise NotAFile(
            f"rename source is {kind}; only files are renamed", path=source, operation="rename"
        )
    if source_etag is not None:
        actual = _etag(info)
        if actual != source_etag:
            raise PreconditionFailed(
                f"source etag is {actual}, expected {source_etag}",
                path=source,
                operation="rename",
            )
    try:
        if overwrite:
            if os.path.isdir(dest):
                raise AlreadyExists("a directory is at the destination", path=dest)
            os.replace(source, dest)
        elif _renameat2 is not None:
            _renameat2(source, dest)
        else:  # link + unlink: no-overwrite, not atomic; recovery handles the gap
            os.link(source, dest)
            os.unlink(source)
    except FileNotFoundError as error:
        missing = source if not os.path.lexists(source) else parent_of(dest)
        raise NotFound("rename: no such file", path=missing, operation="rename") from error
    except (FileExistsError, IsADirectoryError, NotADirectoryError) as error:
        raise AlreadyExists("rename destination exists", path=dest, operation="rename") from error


def _move_each(renames: list[tuple[str, str, str | None]]) -> list[StoreError | None]:
    """``_move`` of each rename, none replacing a file: the error each raised, or None."""
    outcomes: list[StoreError | None] = []
    for source, dest, source_etag in renames:
        try:
            check_clean(dest)
            _move(source, dest, False, source_etag)
        except StoreError as error:
            outcomes.append(error)
            continue
        except OSError as error:
            outcomes.append(_translate(error, source, "rename"))
            continue
        outcomes.append(None)
    return outcomes


def _write_all(handle: int, data: bytes) -> None:
    """Every byte of ``data`` to the open file ``handle`` (no file object around it)."""
    with memoryview(data) as view:
        done = os.write(handle, view)
        while done < len(view):
            done += os.write(handle, view[done:])


def _create_temporary_in(directory: str) -> tuple[int, str]:
    """``_create_temporary``, making ``directory`` and its parents only when missing (a
    task's files and manifests mostly go into a directory that exists)."""
    try:
        return _create_temporary(directory)
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)
        return _create_temporary(directory)


def _create_temporary(directory: str) -> tuple[int, str]:
    """A new empty file in ``directory`` with the mode ``open()`` gives (0666 less the
    umask; ``mkstemp``'s 0600 would hide committed output from other readers)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    while True:
        path = os.path.join(directory, f".aiocommit-{secrets.token_hex(8)}.tmp")
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:  # pragma: no cover - 64 random bits collided
            continue
