"""An interrupted ``replace`` (whole destination, or per partition) whose new files land
on old names is finished by a re-run, and undone by an abort, on every store: memory,
local and the emulated ADLS, GCS and S3 (issue 33, behaviour 3).

Each scenario runs twice per interruption point: the commit is cancelled right after
its Nth change to the store, then (a) committed again: the destination is exactly the
new job's output (and, per partition, the old partitions it did not write), with the new
job's ``_SUCCESS``; (b) on a second copy, aborted: exactly the old output and the old
``_SUCCESS``, or the abort names exactly the old files it cannot restore.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
import pytest

from aiocommit import CommitOptions, abort_job, commit_job, commit_task, setup_job
from aiocommit.committers.common.commit_plan import COMMITTED, decode_plan
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import Store, join
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import exists, output, write_task

T = TypeVar("T")

#: the store calls that change something
MUTATIONS = frozenset(
    {
        "rename",
        "delete",
        "write_bytes",
        "upload_file",
        "mkdirs",
        "complete_upload",
        "link",
        "exchange",
        "move_directory",
    }
)
#: interruption points per store and mode
POINTS = 8


class CancelAfterChanges(StoreWrapper):
    """Cancels ``scope`` right after the ``after``-th change to the store has landed (a
    kill between two store calls); counts the changes in ``changes``."""

    def __init__(self, inner: Store, after: int | None, scope: anyio.CancelScope) -> None:
        super().__init__(inner)
        self.after = after
        self.scope = scope
        self.changes = 0

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        result = await call()
        if operation in MUTATIONS:
            self.changes += 1
            if self.changes == self.after:
                self.scope.cancel()
        return result


@dataclass(frozen=True)
class Scenario:
    old: dict[str, bytes]
    new: dict[str, bytes]
    partitioned: bool

    @property
    def options(self) -> CommitOptions:
        return CommitOptions(
            conflict_mode="replace", replace_partitions=self.partitioned, max_attempts=1
        )

    @property
    def expected(self) -> dict[str, bytes]:
        if not self.partitioned:
            return self.new
        written = {name.split("/")[0] for name in self.new}
        kept = {k: v for k, v in self.old.items() if k.split("/")[0] not in written}
        return {**kept, **self.new}


def scenario(partitioned: bool, new_files: int) -> Scenario:
    """Old output with ``part-00000.csv``; a new job writing it again, and more."""
    if partitioned:
        old = {
            "p=0/part-00000.csv": b"old p0 0",
            "p=0/old-only.csv": b"old p0 x",
            "p=1/part-00000.csv": b"old p1 0",
        }
        new = {f"p=0/part-{n:05d}.csv": f"new p0 {n}".encode() for n in range(new_files)}
    else:
        old = {"part-00000.csv": b"old 0", "old-only.csv": b"old x", "sub/old.csv": b"old sub"}
        new = {f"part-{n:05d}.csv": f"new {n}".encode() for n in range(new_files)}
    return Scenario(old, new, partitioned)


async def _commit_one(store: Store, dest: str, files: dict[str, bytes]) -> str:
    job_id = await setup_job(dest, store=store)
    attempt = await write_task(store, dest, job_id, 0, 0, files)
    await commit_task(attempt, store=store)
    return job_id


async def prepare(store: Store, dest: str, case: Scenario) -> tuple[str, bytes]:
    """The old job committed, the new job's task committed; (new job ID, old _SUCCESS)."""
    old_job = await _commit_one(store, dest, case.old)
    await commit_job(dest, old_job, store=store)
    job_id = await setup_job(dest, store=store)
    attempt = await write_task(store, dest, job_id, 0, 0, case.new)
    await commit_task(attempt, store=store)
    return job_id, await store.read_bytes(join(dest, "_SUCCESS"))


async def interrupted_commit(
    store: Store, dest: str, job_id: str, case: Scenario, after: int | None
) -> int:
    """Commit ``job_id``, cancelled after its ``after``-th change (None: never); returns
    the changes made."""
    with anyio.CancelScope() as scope:
        wrapped = CancelAfterChanges(store, after, scope)
        await commit_job(dest, job_id, store=wrapped, options=case.options)
    assert scope.cancel_called == (after is not None), "the commit ended before the point"
    return wrapped.changes


async def check_rerun(store: Store, dest: str, job_id: str, case: Scenario, label: str) -> None:
    summary = await commit_job(dest, job_id, store=store, options=case.options)
    assert summary.success, label
    assert await output(store, dest) == case.expected, label
    success = decode_success(await store.read_bytes(join(dest, "_SUCCESS")))
    assert success.job_id == job_id, label
    assert not await exists(store, join(dest, "_temporary")), label


async def plan_state(store: Store, dest: str, job_id: str) -> str | None:
    path = JobLayout(dest, job_id).commit_plan_path
    try:
        return decode_plan(await store.read_bytes(path), path).state
    except FileNotFoundError:
        return None


async def success_job(store: Store, dest: str) -> str | None:
    try:
        return decode_success(await store.read_bytes(join(dest, "_SUCCESS"))).job_id
    except FileNotFoundError:
        return None


async def check_abort(
    store: Store, dest: str, job_id: str, case: Scenario, old_success: bytes, label: str
) -> None:
    """Abort: the old output and ``_SUCCESS`` back (or exactly what cannot come back
    named); after the commit point the job is committed and abort only cleans up."""
    committed = await plan_state(store, dest, job_id) == COMMITTED or (
        await success_job(store, dest) == job_id
    )
    lost = await abort_job(dest, job_id, store=store)
    assert not await exists(store, join(dest, "_temporary")), label
    if committed:
        assert lost == [], label
        assert await output(store, dest) == case.expected, label
        return
    left = await output(store, dest)
    assert left == {k: v for k, v in case.old.items() if join(dest, k) not in lost}, label
    assert sorted(lost) == sorted(join(dest, k) for k in case.old if k not in left), label
    if store.capabilities.atomic_rename:
        assert lost == [], label
    assert await store.read_bytes(join(dest, "_SUCCESS")) == old_success, label


@pytest.mark.parametrize("partitioned", [False, True], ids=["replace", "replace_partitions"])
async def test_rerun_finishes_a_replace_cancelled_after_a_new_file_took_an_old_name(
    any_store_root: tuple[Store, str], partitioned: bool
) -> None:
    """The issue's case: the new ``part-00000.csv`` is in place when the commit is
    cancelled; the re-run must not move or delete it (it failed, or lost the file)."""
    store, root = any_store_root
    case = scenario(partitioned, new_files=51)
    dest = join(root, "out")
    job_id, _ = await prepare(store, dest, case)
    new_name = "p=0/part-00000.csv" if partitioned else "part-00000.csv"
    with anyio.CancelScope() as scope:

        class CancelWhenNewFileLands(StoreWrapper):
            async def intercept(
                self, operation: str, path: str, call: Callable[[], Awaitable[T]]
            ) -> T:
                result = await call()
                if operation in MUTATIONS and await _holds(store, dest, new_name, case):
                    scope.cancel()
                return result

        await commit_job(dest, job_id, store=CancelWhenNewFileLands(store), options=case.options)
    assert scope.cancel_called
    await check_rerun(store, dest, job_id, case, "re-run")


async def _holds(store: Store, dest: str, name: str, case: Scenario) -> bool:
    try:
        return await store.read_bytes(join(dest, name)) == case.new[name]
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("partitioned", [False, True], ids=["replace", "replace_partitions"])
async def test_replace_with_overlapping_names_killed_anywhere(
    store_root: tuple[Store, str], partitioned: bool
) -> None:
    """At seeded interruption points over the whole commit (memory, local): re-run
    exact, abort exact."""
    await kill_sweep(*store_root, partitioned)


@pytest.mark.slow
@pytest.mark.timeout(300)  # 16 commits and checks on moto: slow on a loaded machine
@pytest.mark.parametrize("partitioned", [False, True], ids=["replace", "replace_partitions"])
async def test_replace_with_overlapping_names_killed_anywhere_on_the_emulators(
    cloud_store_root: tuple[Store, str], partitioned: bool
) -> None:
    """The same on ADLS, GCS and S3: re-run exact, abort exact or naming exactly the old
    files it cannot restore (S3, flat GCS)."""
    await kill_sweep(*cloud_store_root, partitioned)


async def kill_sweep(store: Store, root: str, partitioned: bool) -> None:
    """``POINTS`` seeded interruption points over the whole commit, each on two copies of
    the scenario: one re-run, one aborted."""
    case = scenario(partitioned, new_files=4)
    probe = join(root, "probe")
    job_id, _ = await prepare(store, probe, case)
    total = await interrupted_commit(store, probe, job_id, case, None)
    assert total > POINTS
    points = sorted(random.Random(33).sample(range(1, total), POINTS))
    for point in points:
        label = f"cancelled after change {point} of {total}"
        dest = join(root, f"rerun-{point}")
        job_id, _ = await prepare(store, dest, case)
        await interrupted_commit(store, dest, job_id, case, point)
        await check_rerun(store, dest, job_id, case, label)

        dest = join(root, f"abort-{point}")
        job_id, old_success = await prepare(store, dest, case)
        await interrupted_commit(store, dest, job_id, case, point)
        await check_abort(store, dest, job_id, case, old_success, label)
