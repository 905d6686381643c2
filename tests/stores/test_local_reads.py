"""``LocalStore.read_bytes`` reads in a worker thread into memory its caller's thread
allocated: what a pool thread allocates stays in that thread's malloc arena, and a
long-lived caller reading manifests through rotating pool threads grew its RSS commit
after commit (``bench loop``'s rss part with ``processes=1``)."""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from aiocommit.errors import NotFound
from aiocommit.stores import local
from aiocommit.stores.local import LocalStore


def _read_traced(path: Path) -> tuple[bytes, tracemalloc.Traceback | None]:
    tracemalloc.start(100)
    try:
        data = anyio.run(LocalStore().read_bytes, str(path))
        return data, tracemalloc.get_object_traceback(data)
    finally:
        tracemalloc.stop()


def test_a_manifest_sized_read_is_allocated_by_the_callers_thread(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_bytes(os.urandom(40_000))
    data, traceback = _read_traced(path)
    assert data == path.read_bytes()
    assert traceback is not None
    # a block allocated in a pool thread has the thread's bootstrap at the bottom of its stack
    threads = [frame for frame in traceback if frame.filename == threading.__file__]
    assert not threads, f"allocated in a worker thread: {traceback.format()}"


@pytest.mark.parametrize(
    "size",
    [0, 1, local.READ_BUFFER - 1, local.READ_BUFFER, local.READ_BUFFER + 1, 3 * local.READ_BUFFER],
)
def test_every_size_reads_whole(tmp_path: Path, size: int) -> None:
    path = tmp_path / "file"
    content = os.urandom(size)
    path.write_bytes(content)
    data = anyio.run(LocalStore().read_bytes, str(path))
    assert type(data) is bytes
    assert data == content


def test_a_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        anyio.run(LocalStore().read_bytes, str(tmp_path / "missing"))


@pytest.mark.parametrize("size", [10, 64 * 1024 + 1])
def test_an_inline_store_writes_small_files_on_the_loop(
    tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``inline_metadata``, a write of at most ``INLINE_WRITE_BYTES`` runs on the
    event loop's own thread; a larger one in a worker thread."""
    threads: list[int] = []
    original = local._create_temporary

    def recording(directory: str) -> tuple[int, str]:
        threads.append(threading.get_ident())
        return original(directory)

    monkeypatch.setattr(local, "_create_temporary", recording)

    async def main() -> None:
        await LocalStore(inline_metadata=True).write_bytes(str(tmp_path / "d" / "f"), b"y" * size)
        assert threads
        assert (set(threads) == {threading.get_ident()}) == (size <= local.INLINE_WRITE_BYTES)

    anyio.run(main)
    assert (tmp_path / "d" / "f").read_bytes() == b"y" * size


@pytest.mark.parametrize(
    "size", [0, 10, local.READ_BUFFER, local.READ_BUFFER + 1, 3 * local.READ_BUFFER]
)
def test_an_inline_store_reads_files_that_fit_its_buffer_on_the_loop(
    tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``inline_metadata``, a file of at most ``READ_BUFFER`` bytes (a manifest) is
    read on the event loop, with no worker thread; a larger one in a worker thread."""
    hops: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def counting(function: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(function)
        return await run_sync(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    path = tmp_path / "file"
    content = os.urandom(size)
    path.write_bytes(content)
    data = anyio.run(LocalStore(inline_metadata=True).read_bytes, str(path))
    assert type(data) is bytes
    assert data == content
    assert len(hops) == (0 if size <= local.READ_BUFFER else 1)


def test_an_inline_store_reads_a_missing_file_as_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        anyio.run(LocalStore(inline_metadata=True).read_bytes, str(tmp_path / "missing"))


@pytest.mark.parametrize("operation", ["write_bytes", "upload_file"])
def test_a_write_makes_its_directory_only_when_missing(
    tmp_path: Path, operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written into an existing directory costs no ``mkdir``; into a missing one,
    its parents are made."""
    made: list[str] = []
    mkdir = os.mkdir

    def recording(path: Any, *args: Any, **kwargs: Any) -> None:
        made.append(str(path))
        mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", recording)
    source = tmp_path / "source"
    source.write_bytes(b"data")
    store = LocalStore(inline_metadata=True)

    async def write(path: Path) -> None:
        if operation == "write_bytes":
            await store.write_bytes(str(path), b"data")
        else:
            await store.upload_file(str(source), str(path))

    anyio.run(write, tmp_path / "here")
    assert made == []
    anyio.run(write, tmp_path / "a" / "b" / "there")
    assert made == [str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    assert (tmp_path / "here").read_bytes() == (tmp_path / "a" / "b" / "there").read_bytes()
