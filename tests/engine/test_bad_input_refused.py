"""Issue #12, bad input: links, borrowed attempt directories, directory sources,
file/directory clashes, the job's own names and Unicode twins are refused with a clear
message, and nothing is lost."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import anyio
import pytest

from aiocommit import (
    CommitError,
    CommitOptions,
    ManifestError,
    OutputConflict,
    ReservedName,
    abort_job,
    commit_job,
    commit_task,
    setup_job,
)
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.manifest import DirEntry, FileEntry, decode_manifest, encode_manifest
from aiocommit.stores.base import Store, join
from aiocommit.stores.local import LocalStore
from tests.helpers import MANIFEST, exists, output, task_files, write_task


async def job_of(store: Store, dest: str, tasks: dict[int, dict[str, bytes]]) -> str:
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    for task, files in tasks.items():
        await commit_task(await write_task(store, dest, job_id, task, 0, files), store=store)
    return job_id


# -- 7: links -------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["directory", "file"])
async def test_task_commit_refuses_a_link(tmp_path: Path, target: str) -> None:
    store = LocalStore()
    dest = str(tmp_path / "out")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.dat").write_bytes(b"secret")
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    attempt = await write_task(store, dest, job_id, 0, 0, {"a.dat": b"a"})
    link_to = outside if target == "directory" else outside / "secret.dat"
    os.symlink(link_to, attempt.path("linked"))
    with pytest.raises(CommitError, match="symbolic link") as caught:
        await commit_task(attempt, store=store)
    assert caught.value.path is not None and caught.value.path.endswith("/linked")
    assert (outside / "secret.dat").read_bytes() == b"secret"


async def test_job_commit_never_moves_a_link(tmp_path: Path) -> None:
    """A hand-made manifest naming a link as a source: refused at its rename; the link's
    target stays where it is and abort leaves nothing visible."""
    store = LocalStore()
    dest = str(tmp_path / "out")
    outside = tmp_path / "outside.dat"
    outside.write_bytes(b"outside")
    job_id = await job_of(store, dest, {0: {"a.dat": b"a"}})
    layout = JobLayout(dest, job_id)
    path = layout.manifest_path(f"task_{job_id[4:]}_m_000000")
    manifest = decode_manifest(await store.read_bytes(path))
    link = join(manifest.task_attempt_dir.removeprefix("file:"), "link.dat")
    os.symlink(outside, link)
    manifest.files.append(
        FileEntry(source="file:" + link, dest="file:" + join(dest, "link.dat"), size=7)
    )
    await store.write_bytes(path, encode_manifest(manifest))
    with pytest.raises(CommitError, match="not a regular file"):
        await commit_job(dest, job_id, store=store)
    assert outside.read_bytes() == b"outside"
    assert not await anyio.Path(dest, "link.dat").is_symlink()
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {}


# -- 8: a manifest that borrows another attempt's directory -----------------------------


@pytest.mark.parametrize("borrow", ["directory only", "directory and attempt ID"])
async def test_manifest_with_another_attempts_directory_is_refused(
    store_root: tuple[Store, str], borrow: str
) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await job_of(store, dest, {0: task_files(0, 3), 1: task_files(1, 3)})
    failed = await write_task(store, dest, job_id, 0, 1, task_files(0, 2, tag="-failed"))
    layout = JobLayout(dest, job_id)
    path = layout.manifest_path(f"task_{job_id[4:]}_m_000001")
    manifest = decode_manifest(await store.read_bytes(path))
    manifest.task_attempt_dir = store.qualify(failed.work_dir)
    if borrow == "directory and attempt ID":
        manifest.task_attempt_id = failed.task_attempt_id
    manifest.files = [
        FileEntry(
            source=store.qualify(failed.path(name)), dest=store.qualify(join(dest, name)), size=1
        )
        for name in task_files(0, 2, tag="-failed")
    ]
    await store.write_bytes(path, encode_manifest(manifest))
    message = "not the directory of" if borrow == "directory only" else "not an attempt of task"
    with pytest.raises(ManifestError, match=message):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {}


# -- 9: a source that is a directory ------------------------------------------------------


async def test_a_directory_source_is_never_moved(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    if not store.capabilities.directories:
        pytest.skip("no directories on this store")
    dest = join(root, "out")
    job_id = await job_of(store, dest, {0: task_files(0, 4)})
    layout = JobLayout(dest, job_id)
    path = layout.manifest_path(f"task_{job_id[4:]}_m_000000")
    manifest = decode_manifest(await store.read_bytes(path))
    attempt_dir = store.unqualify(manifest.task_attempt_dir)
    manifest.files.append(
        FileEntry(
            source=store.qualify(join(attempt_dir, "part=0")),
            dest=store.qualify(join(dest, "moved-dir")),
            size=0,
        )
    )
    await store.write_bytes(path, encode_manifest(manifest))
    with pytest.raises(CommitError, match="is a directory"):
        await commit_job(dest, job_id, store=store, options=CommitOptions(max_attempts=1))
    assert not await exists(store, join(dest, "moved-dir"))
    assert await exists(store, join(attempt_dir, "part=0"))
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {}


# -- 10: file/directory clashes -------------------------------------------------------------


@pytest.mark.parametrize("delete_target_files", [False, True])
async def test_file_and_directory_clash_within_the_job(
    store_root: tuple[Store, str], delete_target_files: bool
) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await job_of(store, dest, {0: {"a": b"file a"}, 1: {"a/b": b"file a/b"}})
    with pytest.raises(OutputConflict, match="where the job's output has a directory"):
        await commit_job(
            dest,
            job_id,
            store=store,
            options=CommitOptions(delete_target_files=delete_target_files),
        )
    assert await output(store, dest) == {}


async def test_a_deeper_clash_within_one_hand_made_manifest(store_root: tuple[Store, str]) -> None:
    """No directory entries to help: ``x`` and ``x/y/z`` still clash."""
    store, root = store_root
    dest = join(root, "out")
    job_id = await job_of(store, dest, {0: {"x": b"x", "q/y/z": b"z"}})
    layout = JobLayout(dest, job_id)
    path = layout.manifest_path(f"task_{job_id[4:]}_m_000000")
    manifest = decode_manifest(await store.read_bytes(path))
    manifest.directories = []
    for entry in manifest.files:
        entry.dest = entry.dest.replace("/q/y/z", "/x/y/z")
    await store.write_bytes(path, encode_manifest(manifest))
    with pytest.raises(OutputConflict, match="directory"):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {}


@pytest.mark.parametrize("delete_target_files", [False, True])
async def test_file_onto_an_existing_directory_says_so(
    store_root: tuple[Store, str], delete_target_files: bool
) -> None:
    store, root = store_root
    if not store.capabilities.directories:
        pytest.skip("no directories on this store")
    dest = join(root, "out")
    await store.write_bytes(join(dest, "d", "kept.dat"), b"kept")
    job_id = await job_of(store, dest, {0: {"d": b"a file named d"}})
    with pytest.raises(OutputConflict, match="destination is a directory") as caught:
        await commit_job(
            dest,
            job_id,
            store=store,
            options=CommitOptions(delete_target_files=delete_target_files),
        )
    assert "delete_target_files" not in str(caught.value)
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {"d/kept.dat": b"kept"}


# -- 11: the job's own names ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["_SUCCESS/x", "_SUCCESS/deeper/y"])
async def test_success_is_reserved(store_root: tuple[Store, str], name: str) -> None:
    """A tool writing below the attempt's ``work_dir`` itself (the attempt's own writes
    refuse the name: ``ReservedName``) is stopped at job commit."""
    store, root = store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    attempt = await write_task(store, dest, job_id, 0, 0, {"ok.dat": b"ok"})
    with pytest.raises(ReservedName):
        await attempt.write_bytes(name, b"x", store=store)
    await store.write_bytes(join(attempt.work_dir, name), b"x")
    await commit_task(attempt, store=store)
    with pytest.raises(ManifestError, match="_SUCCESS is the job's own name"):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {}


async def test_success_directory_entry_is_reserved(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await job_of(store, dest, {0: {"ok.dat": b"ok"}})
    path = JobLayout(dest, job_id).manifest_path(f"task_{job_id[4:]}_m_000000")
    manifest = decode_manifest(await store.read_bytes(path))
    manifest.directories.append(DirEntry(store.qualify(join(dest, "_SUCCESS")), 1, 1))
    await store.write_bytes(path, encode_manifest(manifest))
    with pytest.raises(ManifestError, match="_SUCCESS is the job's own name"):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {}


# -- 12: NFC and NFD spellings --------------------------------------------------------------


async def test_unicode_normalisation_twins_conflict(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    nfc = unicodedata.normalize("NFC", "café.dat")
    nfd = unicodedata.normalize("NFD", "café.dat")
    assert nfc != nfd
    job_id = await job_of(store, dest, {0: {nfc: b"nfc"}, 1: {nfd: b"nfd"}})
    with pytest.raises(OutputConflict, match="Unicode normalisation"):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {}


async def test_one_spelling_of_a_unicode_name_commits(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    nfd = unicodedata.normalize("NFD", "naïve/ü.dat")
    job_id = await job_of(store, dest, {0: {nfd: b"nfd"}, 1: {"plain.dat": b"p"}})
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {nfd: b"nfd", "plain.dat": b"p"}
