"""The task stages: set up an attempt, commit it (scan and save its manifest), abort it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiocommit import setup_job
from aiocommit.committers.common.context import StageContext
from aiocommit.committers.common.session import open_context
from aiocommit.committers.manifest.task import abort_task_stage, commit_task_stage, setup_task_stage
from aiocommit.errors import CommitError
from aiocommit.protocol import statistics as S
from aiocommit.protocol.manifest import DirState, decode_manifest
from aiocommit.stores.base import join
from aiocommit.stores.faulty import Faults, FaultyStore, InjectedFailure
from aiocommit.stores.memory import MemoryStore
from tests.helpers import exists
from tests.stages.conftest import memory_store

TASK = "task_202611240000_0001_m_000003"


def attempt_of(task: str, attempt: int) -> str:
    return f"attempt_{task[5:]}_{attempt}"


async def test_commit_lists_every_file_and_the_last_attempt_wins() -> None:
    store = memory_store()
    job_id = await setup_job("/out", "job_202611240000_0001", store=store)
    await store.write_bytes("/out/p=1/old.dat", b"already there")
    async with open_context("/out", job_id, store=store) as context:
        for attempt, files in enumerate(
            ({"p=1/a.dat": b"first"}, {"p=1/b.dat": b"second", "p=2/c.dat": b"2"})
        ):
            attempt_dir = context.layout.task_attempt_dir(attempt_of(TASK, attempt))
            await setup_task_stage(context, attempt_dir)
            for relative, data in files.items():
                await store.write_bytes(join(attempt_dir, relative), data)
            manifest = await commit_task_stage(context, TASK, attempt_of(TASK, attempt))
        saved = decode_manifest(await store.read_bytes(context.layout.manifest_path(TASK)))
        counters = context.stats.snapshot().counters
    assert saved.task_attempt_id == attempt_of(TASK, 1) == manifest.task_attempt_id
    assert sorted((store.unqualify(f.dest), f.size) for f in saved.files) == [
        ("/out/p=1/b.dat", 6),
        ("/out/p=2/c.dat", 1),
    ]
    states = {store.unqualify(d.dest): d.state for d in saved.directories}
    assert states == {"/out/p=1": DirState.DIR, "/out/p=2": DirState.NOT_FOUND}
    assert counters[S.COMMITTER_TASK_FILE_COUNT] == 3  # both attempts' files


@asynccontextmanager
async def set_up_attempt(job_id: str) -> AsyncIterator[tuple[MemoryStore, StageContext, str]]:
    """A job on a fresh memory store, its stage context, and attempt 0 of ``TASK`` set up."""
    store = memory_store()
    await setup_job("/out", job_id, store=store)
    async with open_context("/out", job_id, store=store) as context:
        attempt_dir = context.layout.task_attempt_dir(attempt_of(TASK, 0))
        await setup_task_stage(context, attempt_dir)
        yield store, context, attempt_dir


async def test_commit_refused_once_the_job_is_not_active() -> None:
    async with set_up_attempt("job_202611240000_0002") as (store, context, _):
        await store.delete(context.layout.manifests_dir, recursive=True)
        with pytest.raises(CommitError, match="job is not active"):
            await commit_task_stage(context, TASK, attempt_of(TASK, 0))


async def test_commit_of_an_attempt_never_set_up() -> None:
    async with set_up_attempt("job_202611240000_0003") as (store, context, attempt_dir):
        await store.delete(attempt_dir, recursive=True)
        with pytest.raises(CommitError, match="does not exist"):
            await commit_task_stage(context, TASK, attempt_of(TASK, 0))


async def test_abort_removes_the_attempt() -> None:
    async with set_up_attempt("job_202611240000_0004") as (store, context, attempt_dir):
        await store.write_bytes(join(attempt_dir, "x.dat"), b"x")
        await abort_task_stage(context, attempt_of(TASK, 0))
        await abort_task_stage(context, attempt_of(TASK, 0))  # idempotent
        assert not await exists(store, attempt_dir)
        assert not await exists(store, context.layout.manifest_path(TASK))


async def test_commit_of_listed_files_equals_the_scan_and_saves_under_the_given_name() -> None:
    """``written`` (the caller's list of the attempt's files) gives the manifest a scan
    gives, without listing the attempt directory; ``save_as`` saves it under that name
    only, leaving the task's manifest to others."""
    files = {"p=1/q=a/b.dat": b"second", "p=2/c.dat": b"2", "top.dat": b"top"}
    store = memory_store()
    job_id = await setup_job("/out", "job_202611240000_0005", store=store)
    await store.write_bytes("/out/p=1/old.dat", b"already there")
    manifests = []
    # attempt 1's context fails any listing
    no_listing = FaultyStore(store, Faults(fail_paths=lambda op, _: op == "list_dir"))
    for attempt, through in ((0, store), (1, no_listing)):
        async with open_context("/out", job_id, store=through) as context:
            attempt_dir = context.layout.task_attempt_dir(attempt_of(TASK, attempt))
            await setup_task_stage(context, attempt_dir)
            for relative, data in files.items():
                await store.write_bytes(join(attempt_dir, relative), data)
            if attempt == 0:
                with pytest.raises(InjectedFailure):  # the fault is there
                    await no_listing.list_dir(attempt_dir).__anext__()
                manifests.append(await commit_task_stage(context, TASK, attempt_of(TASK, 0)))
                continue
            own = join(context.layout.manifests_dir, "own.json")
            written = [(relative, len(data)) for relative, data in files.items()]
            manifests.append(
                await commit_task_stage(
                    context, TASK, attempt_of(TASK, 1), written=written, save_as=own
                )
            )
    scanned, listed = manifests
    saved = decode_manifest(await store.read_bytes(own))
    assert saved.task_attempt_id == attempt_of(TASK, 1)
    # the task's manifest is still attempt 0's: a save under its own name replaces nothing
    task_manifest = decode_manifest(await store.read_bytes(context.layout.manifest_path(TASK)))
    assert task_manifest.task_attempt_id == attempt_of(TASK, 0)

    def entries(manifest: object) -> tuple[object, object]:
        files = [(f.dest, f.size, f.source.replace("_0/", "_1/")) for f in manifest.files]  # type: ignore[attr-defined]
        dirs = [(d.dest, d.state, d.level) for d in manifest.directories]  # type: ignore[attr-defined]
        return files, dirs

    assert entries(saved) == entries(listed) == entries(scanned)
    states = {store.unqualify(d.dest): (d.state, d.level) for d in saved.directories}
    assert states == {
        "/out/p=1": (DirState.DIR, 1),
        "/out/p=1/q=a": (DirState.NOT_FOUND, 2),
        "/out/p=2": (DirState.NOT_FOUND, 1),
    }


async def test_a_large_manifest_is_joined_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The entries are encoded a slice at a time; the whole manifest is then one new
    buffer (~300 bytes an entry). Joined on the loop, its copy and the page faults of its
    fresh pages were a task commit's longest loop turn (17-60 ms at 100,000 entries, and
    what failed ``test_a_task_commit_never_holds_the_loop`` late in long test runs). It
    is joined in a worker thread now, and is byte for byte ``encode_manifest``."""
    import threading

    import anyio.to_thread

    from aiocommit.committers.manifest.task import SLICE_ENTRIES, encode_manifest_in_slices
    from aiocommit.protocol.manifest import FileEntry, TaskManifest, encode_manifest

    joined: list[tuple[threading.Thread, int]] = []
    run_sync = anyio.to_thread.run_sync

    async def recording(function: Any, *args: Any, **kwargs: Any) -> Any:
        def run(*inner: Any) -> Any:
            result = function(*inner)
            if isinstance(result, bytes):
                joined.append((threading.current_thread(), len(result)))
            return result

        return await run_sync(run, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", recording)
    files = [
        FileEntry(f"file:/out/_temporary/a/f{n}", f"file:/out/f{n}", n, None)
        for n in range(3 * SLICE_ENTRIES + 5)
    ]
    manifest = TaskManifest(job_id="job_1", task_id=TASK, files=files)
    data = await encode_manifest_in_slices(manifest)
    assert data == encode_manifest(manifest)
    assert [(thread is threading.current_thread(), size) for thread, size in joined] == [
        (False, len(data))
    ]
