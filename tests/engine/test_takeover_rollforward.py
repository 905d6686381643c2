"""A dead lease holder's commit is settled by the job that takes its lease over, so the
destination is what "the dead job, then the taker" leaves (issue 33, behaviour 5; the
rule is in docs/protocol.md, "what a dead job's lease means"):

* aborted when an abort is exact (a rename store moves a replace's old files aside);
* finished (rolled forward) when its plan passed a change an abort cannot undo (a
  replace that deleted old files on a store without atomic rename: S3, flat GCS); its
  re-run then reports it committed;
* when it can be neither finished nor undone exactly, the taker fails with
  ``UnfinishedCommit`` naming the lost files, and the lease goes back to the dead job.

Memory and local stand in for S3 by saying they have no atomic rename (a replace then
deletes old files): memory through the staging committer (it has multipart uploads),
local through the manifest committer. The same path on S3 itself:
``test_concurrent_jobs.py::test_killed_s3_replace_taken_over_is_a_serial_order``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import msgspec
import pytest

from aiocommit import (
    CommitOptions,
    JobNotFound,
    OutputConflict,
    abort_job,
    commit_job,
    commit_task,
    job_info,
    setup_job,
)
from aiocommit.committers.common.lease import LEASE_NAME, LeaseRecord
from aiocommit.errors import UnfinishedCommit
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.pending import pendingsets_dir
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import Store, StoreCapabilities, join, relative_to
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import exists, output, write_task

T = TypeVar("T")

OLD = {"p=0/part-0.dat": b"old 0", "p=0/old-only.dat": b"old x", "p=7/d.dat": b"d"}
#: the dead job: replaces partition p=0, writing the old part-0.dat's name again
DEAD = {"p=0/part-0.dat": b"a 0", "p=0/a-1.dat": b"a 1"}
REPLACE_PARTITIONS = CommitOptions(conflict_mode="replace", replace_partitions=True, max_attempts=1)


class NoRename(StoreWrapper):
    """The store, saying it has no atomic rename (as S3 and flat GCS): a replace deletes
    the old files. ``kill`` (a cancel scope) is cancelled right after the first
    ``operation`` on ``path`` landed: the commit stops there, as if killed."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.kill: tuple[str, str, anyio.CancelScope] | None = None
        #: run once, just before the first ``operation`` on ``path``
        self.before: tuple[str, str, Callable[[], Awaitable[object]]] | None = None

    @property
    def capabilities(self) -> StoreCapabilities:
        return msgspec.structs.replace(self.inner.capabilities, atomic_rename=False)

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        if self.before is not None and (operation, path) == self.before[:2]:
            first, self.before = self.before[2], None
            await first()
        result = await call()
        if self.kill is not None and (operation, path) == self.kill[:2]:
            self.kill[2].cancel()
            self.kill = None
        return result


class Renaming(NoRename):
    """The store as it is (atomic rename: a replace moves old files aside)."""

    @property
    def capabilities(self) -> StoreCapabilities:
        return self.inner.capabilities


@pytest.fixture(params=["memory", "local"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Memory (the staging committer) or local (the manifest committer)."""
    inner: Store
    if request.param == "memory":
        inner = MemoryStore(f"takeover-{time.monotonic_ns()}")
    else:
        inner = LocalStore()
    yield inner
    await inner.aclose()


def _dest(store: Store, tmp_path: Path) -> str:
    return str(tmp_path / "dest") if isinstance(store, LocalStore) else "/dest"


async def _job(store: Store, dest: str, files: dict[str, bytes]) -> str:
    job_id = await setup_job(dest, store=store)
    attempt = await write_task(store, dest, job_id, 0, 0, files)
    await commit_task(attempt, store=store)
    return job_id


async def _killed_after(store: NoRename, dest: str, job_id: str, operation: str, path: str) -> None:
    """Commit ``job_id`` (replace per partition), stopped right after ``operation`` on
    ``path``; its lease then looks as a SIGKILL leaves it: publishing, expired."""
    with anyio.CancelScope() as scope:
        store.kill = (operation, join(dest, path), scope)
        await commit_job(dest, job_id, store=store, options=REPLACE_PARTITIONS)
    assert scope.cancelled_caught, "the commit ended before the kill point"
    assert (await _expire_lease(store, dest)).job_id == job_id


async def _expire_lease(store: Store, dest: str) -> LeaseRecord:
    """Make the destination's lease look abandoned mid-publish (expired); its record."""
    lease = join(dest, LEASE_NAME)
    record = msgspec.json.decode(await store.read_bytes(lease), type=LeaseRecord)
    dead = msgspec.structs.replace(record, state="publishing", expires=time.time() - 1)
    await store.write_bytes(lease, msgspec.json.encode(dead))
    return record


async def _scene(
    store: Store, tmp_path: Path | str, wrapper: type[NoRename]
) -> tuple[NoRename, str, str]:
    """Old output committed (p=0 and p=7); the dead job's task committed; (store, dest,
    dead job). ``tmp_path``: a directory for a local store, or a store root."""
    wrapped = wrapper(store)
    dest = join(tmp_path, "dest") if isinstance(tmp_path, str) else _dest(store, tmp_path)
    await commit_job(dest, await _job(wrapped, dest, OLD), store=wrapped)
    return wrapped, dest, await _job(wrapped, dest, DEAD)


async def test_a_dead_replace_past_its_deletes_is_finished_by_the_taker(
    store: Store, tmp_path: Path
) -> None:
    """Killed right after it deleted the old ``p=0/part-0.dat``: a live neighbour (set up
    before) takes the lease over and finishes the dead job's commit first; the dead job's
    re-run reports it committed; a later neighbour's append clashing with it is refused.
    The destination is the serial order: old, dead job, neighbour."""
    await _finished_by_the_taker(store, tmp_path)


async def test_a_dead_replace_past_its_deletes_is_finished_on_the_emulators(
    cloud_store_root: tuple[Store, str],
) -> None:
    """The same on S3 (staging) and GCS (manifest; no atomic move), and ADLS saying it
    has no atomic rename."""
    await _finished_by_the_taker(*cloud_store_root)


async def _finished_by_the_taker(store: Store, where: Path | str) -> None:
    wrapped, dest, dead = await _scene(store, where, NoRename)
    live = await _job(wrapped, dest, {"p=5/b.dat": b"b"})
    clashing = await _job(wrapped, dest, {"p=0/a-1.dat": b"c"})
    await _killed_after(wrapped, dest, dead, "delete", "p=0/part-0.dat")
    assert not await exists(wrapped, join(dest, "p=0/part-0.dat"))  # no abort restores it

    summary = await commit_job(dest, live, store=wrapped)  # the live neighbour
    assert summary.job_id == live
    expected = {"p=0/part-0.dat": b"a 0", "p=0/a-1.dat": b"a 1", "p=7/d.dat": b"d"}
    assert await output(wrapped, dest) == {**expected, "p=5/b.dat": b"b"}
    assert decode_success(await wrapped.read_bytes(join(dest, "_SUCCESS"))).job_id == live
    assert (await job_info(dest, dead, store=wrapped)).state == "committed"

    with pytest.raises(OutputConflict):  # the dead job's file counts as committed output
        await commit_job(dest, clashing, store=wrapped, options=CommitOptions(max_attempts=1))
    await abort_job(dest, clashing, store=wrapped)

    rerun = await commit_job(dest, dead, store=wrapped, options=REPLACE_PARTITIONS)
    assert rerun.job_id == dead and rerun.success  # finished, not "unknown job"
    assert sorted(rerun.filenames) == sorted(wrapped.qualify(join(dest, f)) for f in DEAD)
    assert await output(wrapped, dest) == {**expected, "p=5/b.dat": b"b"}
    assert not await exists(wrapped, join(dest, "_temporary"))
    assert not await exists(wrapped, join(dest, LEASE_NAME))
    with pytest.raises(JobNotFound):  # cleaned up by its re-run: gone now
        await job_info(dest, dead, store=wrapped)


async def test_a_rerun_waiting_while_the_taker_finishes_it_only_cleans_up(
    store: Store, tmp_path: Path
) -> None:
    """The dead job's re-run loads its plan, then waits for the lease while a neighbour
    takes it over and finishes the dead commit: the re-run, once it holds the lease,
    finds its commit finished and publishes nothing (the neighbour's ``_SUCCESS``
    stays)."""
    wrapped, dest, dead = await _scene(store, tmp_path, NoRename)
    live = await _job(wrapped, dest, {"p=5/b.dat": b"b"})
    await _killed_after(wrapped, dest, dead, "delete", "p=0/part-0.dat")
    await wrapped.delete(join(dest, LEASE_NAME))  # the dead job's re-run creates it anew
    lease = join(dest, LEASE_NAME)
    expired = LeaseRecord(job_id=dead, token="dead", expires=time.time() - 1)

    async def neighbour_takes_over() -> None:
        await wrapped.write_bytes(lease, msgspec.json.encode(expired))
        await commit_job(dest, live, store=wrapped)

    wrapped.before = ("write_bytes", lease, neighbour_takes_over)
    rerun = await commit_job(dest, dead, store=wrapped, options=REPLACE_PARTITIONS)
    assert wrapped.before is None, "the re-run never took the lease"
    assert rerun.job_id == dead
    assert decode_success(await wrapped.read_bytes(join(dest, "_SUCCESS"))).job_id == live
    assert await output(wrapped, dest) == {
        "p=0/part-0.dat": b"a 0",
        "p=0/a-1.dat": b"a 1",
        "p=7/d.dat": b"d",
        "p=5/b.dat": b"b",
    }
    assert not await exists(wrapped, join(dest, "_temporary"))
    assert not await exists(wrapped, lease)


async def test_a_dead_replace_an_abort_undoes_exactly_is_aborted(
    store: Store, tmp_path: Path
) -> None:
    """On a rename store the old ``part-0.dat`` went aside, not away (on the local
    filesystem with its partition, swapped whole): the taker aborts the dead commit (the
    old output comes back), and the dead job's re-run is refused."""
    wrapped, dest, dead = await _scene(store, tmp_path, Renaming)
    aside = join(JobLayout(dest, dead).replaced_dir, "p=0/part-0.dat")
    if isinstance(store, LocalStore):  # partition p=0 is swapped whole, then moved aside
        swapped = relative_to(join(JobLayout(dest, dead).job_attempt_dir, "swap/p=0"), dest)
        await _killed_after(wrapped, dest, dead, "move_directory", swapped)
    else:
        await _killed_after(wrapped, dest, dead, "rename", "p=0/part-0.dat")
    assert await exists(wrapped, aside)
    live = await _job(wrapped, dest, {"p=5/b.dat": b"b"})
    await commit_job(dest, live, store=wrapped)
    assert await output(wrapped, dest) == {**OLD, "p=5/b.dat": b"b"}
    with pytest.raises(JobNotFound):
        await commit_job(dest, dead, store=wrapped)


async def test_a_dead_replace_before_its_deletes_is_aborted(store: Store, tmp_path: Path) -> None:
    """Killed before deleting anything (``_SUCCESS`` set aside only): abort is exact, so
    the taker aborts it, and the old ``_SUCCESS`` is back until the taker's own."""
    wrapped, dest, dead = await _scene(store, tmp_path, NoRename)
    # the first change: the old _SUCCESS deleted, after its copy was saved aside
    await _killed_after(wrapped, dest, dead, "delete", "_SUCCESS")
    live = await _job(wrapped, dest, {"p=5/b.dat": b"b"})
    await commit_job(dest, live, store=wrapped)
    assert await output(wrapped, dest) == {**OLD, "p=5/b.dat": b"b"}
    with pytest.raises(JobNotFound):
        await commit_job(dest, dead, store=wrapped)


async def test_a_dead_replace_that_cannot_be_finished_blocks_the_destination(
    tmp_path: Path,
) -> None:
    """Killed after deleting an old file, its pending sets then lost: the taker cannot
    finish it and an abort cannot restore the file. The taker fails with
    ``UnfinishedCommit`` naming exactly that file, changing nothing; the lease goes back
    to the dead job, so no job publishes over it. Its abort (the way out) returns the
    same file, and then the taker commits."""
    memory = MemoryStore(f"takeover-{time.monotonic_ns()}")
    wrapped, dest, dead = await _scene(memory, tmp_path, NoRename)
    live = await _job(wrapped, dest, {"p=5/b.dat": b"b"})
    await _killed_after(wrapped, dest, dead, "delete", "p=0/part-0.dat")
    await wrapped.delete(pendingsets_dir(JobLayout(dest, dead)), recursive=True)
    before = await output(wrapped, dest, ignore=(LEASE_NAME,))

    with pytest.raises(UnfinishedCommit) as caught:
        await commit_job(dest, live, store=wrapped)
    lost = [wrapped.qualify(join(dest, "p=0/part-0.dat"))]
    assert caught.value.job_id == dead and caught.value.lost == lost
    assert dead in str(caught.value) and "aiocommit abort" in str(caught.value)
    assert await output(wrapped, dest, ignore=(LEASE_NAME,)) == before
    lease = msgspec.json.decode(await wrapped.read_bytes(join(dest, LEASE_NAME)), type=LeaseRecord)
    assert (lease.job_id, lease.state) == (dead, "abandoned")

    assert await abort_job(dest, dead, store=wrapped) == [join(dest, "p=0/part-0.dat")]
    await commit_job(dest, live, store=wrapped)
    assert await output(wrapped, dest) == {
        "p=0/old-only.dat": b"old x",
        "p=7/d.dat": b"d",
        "p=5/b.dat": b"b",
    }
    assert not await exists(wrapped, join(dest, LEASE_NAME))
    await memory.aclose()


APPEND_OVERWRITING = CommitOptions(conflict_mode="append", delete_target_files=True, max_attempts=1)


async def test_a_dead_append_that_overwrote_old_files_is_finished_by_the_taker(
    store: Store, tmp_path: Path
) -> None:
    """An append with ``delete_target_files`` killed right after it overwrote the old
    ``p=0/part-0.dat`` (memory through the staging committer, as on S3: an upload
    completed over it; local through the manifest committer: deleted before the rename):
    no abort brings that file back, so the taker finishes the dead commit first. The
    destination is the serial order: old, dead job, neighbour."""
    staging = isinstance(store, MemoryStore)
    wrapped = NoRename(store) if staging else Renaming(store)
    dest = _dest(store, tmp_path)
    await commit_job(dest, await _job(wrapped, dest, OLD), store=wrapped)
    dead = await _job(wrapped, dest, DEAD)
    live = await _job(wrapped, dest, {"p=5/b.dat": b"b"})
    operation = "complete_upload" if staging else "delete"
    with anyio.CancelScope() as scope:
        wrapped.kill = (operation, join(dest, "p=0/part-0.dat"), scope)
        await commit_job(dest, dead, store=wrapped, options=APPEND_OVERWRITING)
    assert scope.cancelled_caught, "the commit ended before the kill point"
    await _expire_lease(wrapped, dest)

    await commit_job(dest, live, store=wrapped)
    assert await output(wrapped, dest) == {**OLD, **DEAD, "p=5/b.dat": b"b"}
    assert (await job_info(dest, dead, store=wrapped)).state == "committed"


async def test_a_dead_append_before_it_overwrote_anything_is_aborted(
    store: Store, tmp_path: Path
) -> None:
    """The same append killed before its first change (the old ``_SUCCESS`` set aside):
    the old files are all there with their etags, so the taker aborts it."""
    wrapped = Renaming(store)
    dest = _dest(store, tmp_path)
    await commit_job(dest, await _job(wrapped, dest, OLD), store=wrapped)
    dead = await _job(wrapped, dest, DEAD)
    live = await _job(wrapped, dest, {"p=5/b.dat": b"b"})
    with anyio.CancelScope() as scope:
        wrapped.kill = ("delete", join(dest, "_SUCCESS"), scope)
        await commit_job(dest, dead, store=wrapped, options=APPEND_OVERWRITING)
    assert scope.cancelled_caught, "the commit ended before the kill point"
    await _expire_lease(wrapped, dest)

    await commit_job(dest, live, store=wrapped)
    assert await output(wrapped, dest) == {**OLD, "p=5/b.dat": b"b"}
    with pytest.raises(JobNotFound):
        await commit_job(dest, dead, store=wrapped)
