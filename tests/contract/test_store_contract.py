"""The store contract (``aiocommit.stores.base``), run against every store."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiocommit.errors import AlreadyExists, NotEmpty, NotFound, PreconditionFailed
from aiocommit.stores.base import Store, join


async def names_in(store: Store, directory: str) -> dict[str, bool]:
    found: dict[str, bool] = {}
    async for page in store.list_dir(directory):
        assert len(page) <= 1000
        for status in page:
            found[status.name] = status.is_dir
    return found


async def test_write_stat_read(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    written = await store.write_bytes(join(root, "a/b/file.txt"), b"hello")
    status = await store.stat(join(root, "a/b/file.txt"))
    assert (status.is_dir, status.size) == (False, 5)
    assert status.etag == written.etag
    assert await store.read_bytes(join(root, "a/b/file.txt")) == b"hello"
    assert (await store.stat(join(root, "a/b"))).is_dir


async def test_etag_changes_on_rewrite(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    first = await store.write_bytes(join(root, "f"), b"one")
    second = await store.write_bytes(join(root, "f"), b"three")
    if store.capabilities.etags:
        assert first.etag != second.etag


async def test_write_without_overwrite(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    await store.write_bytes(join(root, "f"), b"one")
    with pytest.raises(AlreadyExists):
        await store.write_bytes(join(root, "f"), b"two", overwrite=False)
    assert await store.read_bytes(join(root, "f")) == b"one"


async def test_racing_creates_have_one_winner(any_store_root: tuple[Store, str]) -> None:
    """``write_bytes`` without overwrite is a create-if-absent: of writers racing to
    create one file exactly one succeeds and its bytes are there (the destination's
    publish lease rests on it)."""
    store, root = any_store_root
    path = join(root, "_lease")
    won: list[int] = []

    async def create(n: int) -> None:
        try:
            await store.write_bytes(path, b"%d" % n, overwrite=False)
        except AlreadyExists:
            return
        won.append(n)

    async with anyio.create_task_group() as group:
        for n in range(6):
            group.start_soon(create, n)
    assert len(won) == 1, won
    assert await store.read_bytes(path) == b"%d" % won[0]


async def test_listing_pages_and_kinds(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    for n in range(23):
        await store.write_bytes(join(root, f"d/file-{n:02d}"), bytes(n))
    await store.mkdirs(join(root, "d/sub"))
    pages = [page async for page in store.list_dir(join(root, "d"))]
    assert len(pages) > 1, "the fixtures use small pages so paging is exercised"
    listed = {s.name: (s.is_dir, s.size) for page in pages for s in page}
    assert listed == {**{f"file-{n:02d}": (False, n) for n in range(23)}, "sub": (True, 0)}


async def test_list_missing_directory(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    with pytest.raises(NotFound):
        await names_in(store, join(root, "missing"))


async def test_stat_missing(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    with pytest.raises(NotFound) as caught:
        await store.stat(join(root, "nothing"))
    assert isinstance(caught.value, FileNotFoundError)


async def test_rename_moves_and_keeps_etag(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    written = await store.write_bytes(join(root, "src/f"), b"data")
    await store.mkdirs(join(root, "dst"))
    await store.rename(join(root, "src/f"), join(root, "dst/g"))
    moved = await store.stat(join(root, "dst/g"))
    assert moved.size == 4
    if store.capabilities.etags_preserved_in_rename:
        assert moved.etag == written.etag
    with pytest.raises(NotFound):
        await store.stat(join(root, "src/f"))


async def test_rename_does_not_overwrite(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    await store.write_bytes(join(root, "a"), b"new")
    await store.write_bytes(join(root, "b"), b"old")
    with pytest.raises(AlreadyExists):
        await store.rename(join(root, "a"), join(root, "b"))
    assert await store.read_bytes(join(root, "b")) == b"old"
    assert await store.read_bytes(join(root, "a")) == b"new"


async def test_rename_overwrite_replaces(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    await store.write_bytes(join(root, "a"), b"new")
    await store.write_bytes(join(root, "b"), b"old")
    await store.rename(join(root, "a"), join(root, "b"), overwrite=True)
    assert await store.read_bytes(join(root, "b")) == b"new"


async def test_rename_missing_source_names_source(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    await store.mkdirs(join(root, "d"))
    with pytest.raises(NotFound) as caught:
        await store.rename(join(root, "nope"), join(root, "d/x"))
    assert caught.value.path == join(root, "nope")


async def test_rename_missing_parent_names_parent(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    if not store.capabilities.directories:
        pytest.skip("stores without directories have no parents to miss")
    await store.write_bytes(join(root, "f"), b"x")
    with pytest.raises(NotFound) as caught:
        await store.rename(join(root, "f"), join(root, "no/such/dir/f"))
    assert caught.value.path != join(root, "f")
    assert await store.read_bytes(join(root, "f")) == b"x"


async def test_rename_with_wrong_etag(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    written = await store.write_bytes(join(root, "a"), b"v1")
    await store.write_bytes(join(root, "a"), b"v2")
    with pytest.raises(PreconditionFailed):
        await store.rename(join(root, "a"), join(root, "b"), source_etag=written.etag or "bogus")
    assert await store.read_bytes(join(root, "a")) == b"v2"
    current = await store.stat(join(root, "a"))
    await store.rename(join(root, "a"), join(root, "b"), source_etag=current.etag)
    assert await store.read_bytes(join(root, "b")) == b"v2"


async def test_delete_missing_returns_false(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    assert await store.delete(join(root, "missing")) is False
    assert await store.delete(join(root, "missing"), recursive=True) is False


async def test_delete_file_and_tree(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    for n in range(12):
        await store.write_bytes(join(root, f"t/{n % 3}/f{n}"), b"x")
    await store.write_bytes(join(root, "single"), b"x")
    assert await store.delete(join(root, "single")) is True
    with pytest.raises(NotEmpty):
        await store.delete(join(root, "t"))
    assert await store.delete(join(root, "t"), recursive=True) is True
    assert await names_in(store, root) == {}


async def test_mkdirs_is_idempotent_and_makes_parents(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    await store.mkdirs(join(root, "x/y/z"))
    await store.mkdirs(join(root, "x/y/z"))
    assert (await store.stat(join(root, "x/y"))).is_dir
    assert await names_in(store, join(root, "x/y")) == {"z": True}


async def test_mkdirs_over_a_file(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    await store.write_bytes(join(root, "f"), b"x")
    with pytest.raises(AlreadyExists):
        await store.mkdirs(join(root, "f"))
    with pytest.raises(AlreadyExists):
        await store.mkdirs(join(root, "f/below"))
    assert await store.read_bytes(join(root, "f")) == b"x"


async def test_qualify_round_trip(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    path = join(root, "dir with space/f#1%?.txt")
    assert store.unqualify(store.qualify(path)) == path
    with pytest.raises(ValueError, match="other"):
        store.unqualify("other://elsewhere/x")


ODD_NAME = st.text(
    alphabet=st.sampled_from([*"aZ09 %#?&+=,;@!~'()[]{}-_.", "é", "ß", "中", "🙂", "ñ"]),
    min_size=1,
    max_size=24,
).filter(lambda name: name not in (".", "..") and not name.startswith(".aiocommit"))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(directory=ODD_NAME, name=ODD_NAME)
async def test_odd_path_characters(
    any_store_root: tuple[Store, str], directory: str, name: str
) -> None:
    store, root = any_store_root
    source = join(root, "src", directory, name)
    dest = join(root, "dst", directory, name)
    await store.write_bytes(source, name.encode())
    await store.mkdirs(join(root, "dst", directory))
    listed = await names_in(store, join(root, "src", directory))
    assert name in listed
    await store.rename(source, dest)
    assert await store.read_bytes(dest) == name.encode()
    assert store.unqualify(store.qualify(dest)) == dest
    await store.delete(join(root, "src"), recursive=True)
    await store.delete(join(root, "dst"), recursive=True)
