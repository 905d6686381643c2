"""The system calls of the local store's metadata steps: a task attempt's directory and
its manifest cost no ``stat`` ahead of the call that would fail anyway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from aiocommit.errors import AlreadyExists
from aiocommit.stores.local import LocalStore
from tests.helpers import counted_stats_and_mkdirs


@pytest.fixture
def calls() -> Iterator[list[tuple[str, str]]]:
    """Every ``os.stat`` and ``os.mkdir`` made, with its path."""
    with counted_stats_and_mkdirs() as made:
        yield made


@pytest.mark.parametrize("inline", [True, False])
def test_a_directory_whose_parent_exists_is_one_mkdir(
    tmp_path: Path, calls: list[tuple[str, str]], inline: bool
) -> None:
    target = tmp_path / "attempt"
    anyio.run(LocalStore(inline_metadata=inline).mkdirs, str(target))
    assert calls == [("mkdir", str(target))]
    assert target.is_dir()


def test_mkdirs_makes_missing_parents_and_accepts_an_existing_directory(tmp_path: Path) -> None:
    store = LocalStore(inline_metadata=True)
    deep = tmp_path / "a" / "b" / "c"
    anyio.run(store.mkdirs, str(deep))
    anyio.run(store.mkdirs, str(deep))
    assert deep.is_dir()


@pytest.mark.parametrize("below", [False, True])
def test_mkdirs_refuses_a_file_in_the_way(tmp_path: Path, below: bool) -> None:
    (tmp_path / "file").write_bytes(b"x")
    target = tmp_path / "file" / "d" if below else tmp_path / "file"
    with pytest.raises(AlreadyExists, match="a file is in the way"):
        anyio.run(LocalStore(inline_metadata=True).mkdirs, str(target))


@pytest.mark.parametrize("inline", [True, False])
def test_a_small_write_stats_only_the_file_it_wrote(
    tmp_path: Path, calls: list[tuple[str, str]], inline: bool
) -> None:
    """``write_bytes`` checks for a directory at the path by its rename (no ``stat``
    ahead); the status it returns is the written file's, stat'ed once in place."""
    path = tmp_path / "manifest.json"
    status = anyio.run(LocalStore(inline_metadata=inline).write_bytes, str(path), b"data")
    assert [call for call in calls if call[0] == "stat"] == [("stat", str(path))]
    assert path.read_bytes() == b"data"
    again = anyio.run(LocalStore().stat, str(path))
    assert (status.size, status.etag, status.is_dir) == (again.size, again.etag, False)


@pytest.mark.parametrize("overwrite", [True, False])
def test_a_write_onto_a_directory_is_refused_and_leaves_nothing(
    tmp_path: Path, overwrite: bool
) -> None:
    (tmp_path / "taken").mkdir()

    async def write() -> None:
        await LocalStore(inline_metadata=True).write_bytes(
            str(tmp_path / "taken"), b"data", overwrite=overwrite
        )

    with pytest.raises(AlreadyExists):
        anyio.run(write)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert list((tmp_path / "taken").iterdir()) == []
