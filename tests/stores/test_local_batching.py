"""The local store deletes small trees with its batched metadata calls (one thread hop per
batch, not per call: a job commit of 200 small manifests deleted their task attempt
directories in 200 hops); larger ones still take a thread each, and give the same
results. (Reads stay a thread each: read on the batch's threads, the manifests' bytes
made a long-lived process's RSS creep, ``tests/stress/test_rss.py``.)"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

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


def test_small_tree_deletes_are_batched(tmp_path: Path, thread_hops: list[int]) -> None:
    store = LocalStore()
    attempts = [attempt_dir(tmp_path / "tasks", index) for index in range(200)]
    deleted: list[bool] = []

    async def delete_one(path: Path) -> None:
        deleted.append(await store.delete(str(path), recursive=True))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for path in attempts:
                group.start_soon(delete_one, path)
        assert thread_hops[0] <= 8, f"{thread_hops[0]} thread hops for 200 small trees"

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
