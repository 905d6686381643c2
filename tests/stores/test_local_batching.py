"""The local store deletes small trees with its batched metadata calls (one thread hop per
batch, not per call: a job commit of 200 small manifests deleted their task attempt
directories in 200 hops); larger ones still take a thread each, and give the same
results. (Reads stay a thread each: read on the batch's threads, the manifests' bytes
made a long-lived process's RSS creep, ``tests/stress/test_rss.py``.)"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aiocommit.runtime import blocking
from aiocommit.stores import local
from aiocommit.stores.local import LocalStore


@pytest.fixture
def thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every ``anyio.to_thread.run_sync`` (each is one hop to a worker thread)."""
    hops = [0]
    real = anyio.to_thread.run_sync

    async def counted(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        hops[0] += 1
        return await real(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return hops


def attempt_dir(root: Path, index: int) -> Path:
    """What Hadoop leaves of a task attempt directory after its renames: checksums."""
    directory = root / f"attempt_{index:05d}"
    (directory / "p=1").mkdir(parents=True)
    (directory / f".part-{index:05d}.parquet.crc").write_bytes(b"crc")
    (directory / "p=1" / f".part-{index:05d}.parquet.crc").write_bytes(b"crc")
    return directory


@pytest.mark.parametrize("inline_metadata", [False, True])
def test_small_tree_deletes_are_batched(
    tmp_path: Path, thread_hops: list[int], inline_metadata: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batched, off the loop, with ``inline_metadata`` too (each rmdir waits on the disk:
    on the loop, a job commit's attempt directories went one after another)."""
    store = LocalStore(inline_metadata=inline_metadata)
    attempts = [attempt_dir(tmp_path / "tasks", index) for index in range(200)]
    deleted: list[bool] = []
    rmdir_threads: set[int] = set()
    rmdir = os.rmdir

    def recorded_rmdir(path: Any) -> None:
        rmdir_threads.add(threading.get_ident())
        rmdir(path)

    monkeypatch.setattr(os, "rmdir", recorded_rmdir)

    async def delete_one(path: Path) -> None:
        deleted.append(await store.delete(str(path), recursive=True))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for path in attempts:
                group.start_soon(delete_one, path)
        assert thread_hops[0] <= 8, f"{thread_hops[0]} thread hops for 200 small trees"
        assert rmdir_threads and threading.get_ident() not in rmdir_threads

    anyio.run(main)
    assert deleted == [True] * 200 and os.listdir(tmp_path / "tasks") == []


def test_large_trees_links_and_files_give_the_same_results(
    tmp_path: Path, thread_hops: list[int]
) -> None:
    store = LocalStore()
    tree = tmp_path / "tree"
    for index in range(local.SMALL_TREE_ENTRIES):
        (tree / f"d{index % 7}" / "sub").mkdir(parents=True, exist_ok=True)
        (tree / f"d{index % 7}" / "sub" / f"f{index}").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_bytes(b"kept")
    (tree / "link").symlink_to(outside, target_is_directory=True)
    small_tree = tmp_path / "small-tree"
    (small_tree / "a" / "b").mkdir(parents=True)
    (small_tree / "a" / "b" / "f").write_bytes(b"x")
    (small_tree / "link").symlink_to(outside, target_is_directory=True)
    empty = tmp_path / "empty"
    empty.mkdir()

    async def main() -> None:
        assert await store.delete(str(tree), recursive=True)
        assert await store.delete(str(small_tree), recursive=True)
        assert not await store.delete(str(tree), recursive=True)  # gone: False
        assert await store.delete(str(outside / "kept"), recursive=True)  # a file
        assert await store.delete(str(empty), recursive=True)

    anyio.run(main)
    assert not tree.exists() and not small_tree.exists()
    assert outside.is_dir() and not (outside / "kept").exists() and not empty.exists()
    # five batched deletes, one after another, and the big tree in a thread of its own
    assert thread_hops[0] >= 5 + 1


def test_a_dedicated_loop_deletes_any_tree_in_one_thread_hop(
    tmp_path: Path, thread_hops: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a process whose loop runs nothing but store calls (a rename worker), a tree of
    any size is deleted in one thread hop, never on the loop: each ``rmdir`` waits on the
    filesystem (ext4 here: ~65 of its ~80 us), and W1's rename workers, deleting 1,000
    attempt directories of ten empty subdirectories on their loops, waited through
    those instead of renaming. Links are removed, not followed."""
    tree = tmp_path / "tree"
    for index in range(2 * local.SMALL_TREE_ENTRIES):
        (tree / f"d{index}").mkdir(parents=True)
    (tree / "d0" / "f").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_bytes(b"kept")
    (tree / "link").symlink_to(outside, target_is_directory=True)
    rmdir_threads: set[int] = set()
    real_rmdir = os.rmdir

    def rmdir(path: str, *args: Any, **kwargs: Any) -> None:
        rmdir_threads.add(threading.get_ident())
        real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir)

    async def main() -> None:
        blocking.dedicate_loop()  # as a rename worker does, first thing on its loop
        store = LocalStore()
        assert await store.delete(str(tree), recursive=True)
        assert thread_hops[0] == 1
        assert not await store.delete(str(tree), recursive=True)

    anyio.run(main)
    assert not tree.exists() and (outside / "kept").read_bytes() == b"kept"
    assert rmdir_threads and threading.get_ident() not in rmdir_threads


def test_empty_directories_of_a_tree_go_with_one_rmdir_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recursive delete removes an empty child directory with one ``rmdir`` and leaves
    ``shutil.rmtree`` (~7 calls per directory) to non-empty ones: a task attempt
    directory after its renames is mostly empty directories."""
    trees: list[str] = []
    real = shutil.rmtree

    def rmtree(path: str) -> None:
        trees.append(path)
        real(path)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    tree = tmp_path / "tree"
    for index in range(2 * local.SMALL_TREE_ENTRIES):
        (tree / f"d{index}").mkdir(parents=True)
    (tree / "d1" / "sub").mkdir()
    (tree / "d1" / "sub" / "f").write_bytes(b"x")
    (tree / "file").write_bytes(b"x")
    assert anyio.run(lambda: LocalStore().delete(str(tree), recursive=True))
    assert not tree.exists() and trees == [str(tree / "d1")]
