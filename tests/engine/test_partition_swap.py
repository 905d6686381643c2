"""A replace per partition on the local filesystem swaps each partition's directory in
one step (``committers.manifest.swap_partitions``): a reader listing a partition during
the commit sees its old files or its new ones, never both, never none; and what other
jobs on the same destination see (a live one, a failed one)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import pytest

from aiocommit import CommitOptions, abort_job, commit_job, commit_task, setup_job
from aiocommit.committers.common.commit_plan import decode_plan
from aiocommit.errors import OutputConflict
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.base import join
from aiocommit.stores.local import LocalStore, _exchange
from tests.helpers import exists, output, write_task

pytestmark = pytest.mark.skipif(_exchange is None, reason="renameat2 is not available")

PARTITIONS = 10
FILES = 25
REPLACE_PARTITIONS = CommitOptions(conflict_mode="replace", replace_partitions=True)


def files_of(
    tag: str, partitions: range, files: int = FILES, *, shared: bool = True
) -> dict[str, bytes]:
    """``files`` files per partition, named by ``tag`` (old and new never share a name
    but one, with ``shared``: ``shared.dat``, which both write)."""
    found = {
        f"p={p}/{tag}-{n:03d}.dat": f"{tag} {p} {n}".encode()
        for p in partitions
        for n in range(files)
    }
    if shared:
        found.update({f"p={p}/shared.dat": f"{tag} shared {p}".encode() for p in partitions})
    return found


async def committed(store: LocalStore, dest: str, files: dict[str, bytes], **kw: object) -> str:
    job_id = await setup_job(dest, store=store)
    await commit_task(await write_task(store, dest, job_id, 0, 0, files), store=store)
    await commit_job(dest, job_id, store=store, **kw)  # type: ignore[arg-type]
    return job_id


async def task_committed(store: LocalStore, dest: str, files: dict[str, bytes]) -> str:
    job_id = await setup_job(dest, store=store)
    await commit_task(await write_task(store, dest, job_id, 0, 0, files), store=store)
    return job_id


class PartitionReader:
    """A thread listing every partition directory again and again: how many listings it
    made, and those that held old and new files together, or nothing."""

    def __init__(self, dest: str, partitions: range) -> None:
        self.dirs = [os.path.join(dest, f"p={p}") for p in partitions]
        self.listings = 0
        self.mixed: list[list[str]] = []
        self.empty = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for directory in self.dirs:
                try:
                    names = os.listdir(directory)
                except FileNotFoundError:
                    names = []
                self.listings += 1
                if not names:
                    self.empty += 1
                tags = {name.split("-")[0] for name in names if name != "shared.dat"}
                if {"old", "new"} <= tags:
                    self.mixed.append(sorted(names))

    def __enter__(self) -> PartitionReader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.parametrize("shared", [True, False], ids=["a-name-in-common", "no-name-in-common"])
async def test_a_reader_never_sees_a_partition_mixed_or_empty(tmp_path: Path, shared: bool) -> None:
    store = LocalStore()
    dest = str(tmp_path / "out")
    await committed(store, dest, files_of("old", range(PARTITIONS), shared=shared))
    new = files_of("new", range(PARTITIONS), shared=shared)
    job_id = await task_committed(store, dest, new)
    with PartitionReader(dest, range(PARTITIONS)) as reader:
        await commit_job(dest, job_id, store=store, options=REPLACE_PARTITIONS)
        await anyio.sleep(0.01)  # the reader lists the result too
    assert reader.listings > PARTITIONS
    assert reader.mixed == []
    assert reader.empty == 0
    assert await output(store, dest) == new
    assert not await exists(store, JobLayout(dest, job_id).commit_plan_path)  # cleaned up


async def test_the_plan_records_the_swapped_partitions_only(tmp_path: Path) -> None:
    """Partitions with old files are swapped; a new partition is renamed into file by
    file; a partition the job does not write is kept."""
    store = LocalStore()
    dest = str(tmp_path / "out")
    old = files_of("old", range(3), files=2)
    await committed(store, dest, old)
    new = files_of("new", range(1, 5), files=2)
    job_id = await task_committed(store, dest, new)
    options = REPLACE_PARTITIONS.with_values(cleanup_skip=True)
    await commit_job(dest, job_id, store=store, options=options)
    path = JobLayout(dest, job_id).commit_plan_path
    plan = decode_plan(await store.read_bytes(path), path)
    assert plan.conflicts is not None
    assert plan.conflicts.swapped == ["p=1", "p=2"]
    kept = {k: v for k, v in old.items() if k.startswith("p=0/")}
    assert await output(store, dest) == {**kept, **new}


async def test_a_live_job_on_the_destination_commits_after_the_swap(tmp_path: Path) -> None:
    """A job whose tasks committed before another job swapped its partitions keeps its
    files (they are below ``_temporary``, never in a partition) and commits after it."""
    store = LocalStore()
    dest = str(tmp_path / "out")
    await committed(store, dest, files_of("old", range(3)))
    live = files_of("late", range(2, 4), files=3)
    live_job = await task_committed(store, dest, live)
    swapping = files_of("new", range(3))
    await committed(store, dest, swapping, options=REPLACE_PARTITIONS)
    assert await output(store, dest) == swapping
    await commit_job(dest, live_job, store=store, options=REPLACE_PARTITIONS)
    kept = {k: v for k, v in swapping.items() if not k.startswith("p=2/")}
    assert await output(store, dest) == {**kept, **live}


async def test_a_commit_failing_after_its_swaps_is_undone_by_abort(tmp_path: Path) -> None:
    """The commit swaps the old partitions, then fails on a new partition (a directory
    stands where a file goes): the destination shows the new files of the swapped
    partitions until the abort, which brings back exactly the old output."""
    store = LocalStore()
    dest = str(tmp_path / "out")
    old = files_of("old", range(2))
    await committed(store, dest, old)
    new = files_of("new", range(3), files=3)
    job_id = await task_committed(store, dest, new)
    await store.mkdirs(join(dest, "p=2/new-000.dat"))  # p=2 cannot be committed
    with pytest.raises(OutputConflict):
        await commit_job(dest, job_id, store=store, options=REPLACE_PARTITIONS)
    seen = await output(store, dest)
    assert {k for k in seen if k.startswith(("p=0/", "p=1/"))} == {
        k for k in new if k.startswith(("p=0/", "p=1/"))
    }
    assert await abort_job(dest, job_id, store=store) == []
    assert await output(store, dest) == old
