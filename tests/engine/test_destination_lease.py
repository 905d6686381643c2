"""The destination's publish lease: concurrent job commits into one destination land as
if one after another (issue 33, behaviour 5), a dead holder's lease is taken over."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import anyio.abc
import msgspec
import pytest

from aiocommit import (
    CommitError,
    CommitOptions,
    OutputConflict,
    abort_job,
    commit_job,
    commit_task,
    list_jobs,
    setup_job,
)
from aiocommit.committers.common.lease import CLAIM_INFIX, LEASE_NAME, LeaseRecord
from aiocommit.errors import AiocommitError, PermissionDenied
from aiocommit.stores.base import Store, StoreCapabilities, join
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.wrapper import StoreWrapper
from tests.engine.test_job_states import part_way_commit
from tests.helpers import MANIFEST, exists, output, write_task

T = TypeVar("T")

ROUNDS = 6


async def _job(store: Store, dest: str, files: dict[str, bytes]) -> str:
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    attempt = await write_task(store, dest, job_id, 0, 0, files)
    await commit_task(attempt, store=store)
    return job_id


async def _commit_all(
    store: Store, dest: str, jobs: list[str], options: CommitOptions
) -> dict[str, BaseException | None]:
    """Commit ``jobs`` together; each job's outcome (None: committed)."""
    outcome: dict[str, BaseException | None] = {}

    async def one(job_id: str) -> None:
        try:
            await commit_job(dest, job_id, store=store, options=options)
            outcome[job_id] = None
        except CommitError as error:
            outcome[job_id] = error

    async with anyio.create_task_group() as group:
        for job_id in jobs:
            group.start_soon(one, job_id)
    return outcome


async def test_two_fail_mode_jobs_into_an_empty_destination(
    any_store_root: tuple[Store, str],
) -> None:
    """As if one after another: the first commits, the second finds its output."""
    store, root = any_store_root
    rounds = ROUNDS if isinstance(store, LocalStore | MemoryStore) else 2
    for round_number in range(rounds):
        dest = join(root, f"out{round_number}")
        jobs = [await _job(store, dest, {f"j{n}/f.dat": b"%d" % n}) for n in range(2)]
        outcome = await _commit_all(store, dest, jobs, CommitOptions(conflict_mode="fail"))
        winners = [job for job, error in outcome.items() if error is None]
        assert len(winners) == 1, outcome
        (loser,) = set(jobs) - set(winners)
        assert isinstance(outcome[loser], OutputConflict)
        await abort_job(dest, loser, store=store)
        n = jobs.index(winners[0])
        assert await output(store, dest) == {f"j{n}/f.dat": b"%d" % n}
        assert not await exists(store, join(dest, LEASE_NAME))
        assert not await exists(store, join(dest, "_temporary"))


async def test_two_jobs_replacing_one_partition_leave_one_job_in_it(
    store_root: tuple[Store, str],
) -> None:
    store, root = store_root
    options = CommitOptions(conflict_mode="replace", replace_partitions=True)
    for round_number in range(ROUNDS):
        dest = join(root, f"out{round_number}")
        jobs = [await _job(store, dest, {f"p=0/j{n}.dat": b"%d" % n}) for n in range(2)]
        outcome = await _commit_all(store, dest, jobs, options)
        assert all(error is None for error in outcome.values()), outcome
        left = await output(store, dest)
        assert left in ({"p=0/j0.dat": b"0"}, {"p=0/j1.dat": b"1"}), left


class LeaseLooks(StoreWrapper):
    """Sets ``looked`` once the lease at ``lease`` was read ``looks`` times."""

    def __init__(self, inner: Store, lease: str, looks: int):
        super().__init__(inner)
        self.lease = lease
        self.left = looks
        self.looked = anyio.Event()

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        result = await call()
        if operation == "read_bytes" and path == self.lease:
            self.left -= 1
            if self.left <= 0:
                self.looked.set()
        return result


class RenewalsInFlight(StoreWrapper):
    """Every lease write after the first (the renewals) is a request in flight for
    ``FLIGHT`` seconds that lands even when its caller stops waiting for it (as a sent
    request does); the first rename waits until a renewal is in flight."""

    FLIGHT = 0.5

    def __init__(self, inner: Store, lease: str, landings: anyio.abc.TaskGroup) -> None:
        super().__init__(inner)
        self.lease = lease
        self.landings = landings
        self.lease_writes = 0
        self.renewal_sent = anyio.Event()

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        if operation == "rename":
            await self.renewal_sent.wait()
        if operation != "write_bytes" or path != self.lease:
            return await call()
        self.lease_writes += 1
        if self.lease_writes == 1:
            return await call()
        landed: list[T] = []
        done = anyio.Event()

        async def land() -> None:
            await anyio.sleep(self.FLIGHT)
            landed.append(await call())
            done.set()

        self.landings.start_soon(land)
        self.renewal_sent.set()
        await done.wait()
        return landed[0]


async def test_a_renewal_in_flight_never_outlives_the_release(
    store_root: tuple[Store, str],
) -> None:
    """The commit ends while a renewal of its lease is in flight: the release waits for
    it, so no lease is left behind (a left lease holds the next job off until expiry)."""
    store, root = store_root
    dest = join(root, "out")
    lease = join(dest, LEASE_NAME)
    job_id = await _job(store, dest, {"a.dat": b"a"})
    options = CommitOptions(lease_seconds=0.3)
    async with anyio.create_task_group() as landings:
        renewing = RenewalsInFlight(store, lease, landings)
        with anyio.fail_after(10):
            await commit_job(dest, job_id, store=renewing, options=options)
    assert renewing.lease_writes >= 2  # a renewal was in flight as the commit ended
    assert await output(store, dest) == {"a.dat": b"a"}
    assert not await exists(store, lease)


class DiesRenamingItsLease(StoreWrapper):
    """A store that writes a file whole by writing a temporary one and renaming it
    (``atomic_write`` false, as ADLS), for a process that dies as it renames the lease's
    temporary file into place: that rename and every call after it fail (nothing of a
    killed process reaches the store, not even the removal of its temporary file)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.dead = False

    @property
    def capabilities(self) -> StoreCapabilities:
        return msgspec.structs.replace(self.inner.capabilities, atomic_write=False)

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        name = path.rsplit("/", 1)[-1]
        if operation == "rename" and name.startswith("." + LEASE_NAME) and name.endswith(".tmp"):
            self.dead = True
        if self.dead:
            raise PermissionDenied("the process is gone", path=path, operation=operation)
        return await call()


async def test_a_lease_write_killed_before_its_rename_leaves_nothing_in_the_destination(
    any_store_root: tuple[Store, str],
) -> None:
    """Its temporary file is in the writer's job directory, not the destination's root,
    where it would count as output (a ``fail`` job refused) and outlive every job."""
    store, root = any_store_root
    dest = join(root, "out")
    dead = await _job(store, dest, {"p=0/dead.dat": b"dead"})
    dying = DiesRenamingItsLease(store)
    with pytest.raises(AiocommitError):
        await commit_job(dest, dead, store=dying)
    assert dying.dead
    live = await _job(store, dest, {"p=1/live.dat": b"live"})
    await commit_job(dest, live, store=store, options=CommitOptions(conflict_mode="fail"))
    await abort_job(dest, dead, store=store)
    assert await output(store, dest) == {"p=1/live.dat": b"live"}
    assert not await exists(store, join(dest, "_temporary"))


async def test_a_live_lease_makes_a_commit_wait(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await _job(store, dest, {"a.dat": b"a"})
    live = LeaseRecord(job_id="job_other_0001", token="t0", expires=time.time() + 60)
    await store.write_bytes(join(dest, LEASE_NAME), msgspec.json.encode(live))
    watched = LeaseLooks(store, join(dest, LEASE_NAME), looks=3)
    with anyio.move_on_after(30) as waited:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: commit_job(dest, job_id, store=watched))
            await watched.looked.wait()  # the commit looked at the live lease three times
            group.cancel_scope.cancel()
    assert not waited.cancelled_caught and watched.looked.is_set()
    assert await output(store, dest, ignore=("_SUCCESS", LEASE_NAME)) == {}
    await store.delete(join(dest, LEASE_NAME))  # the holder releases it
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {"a.dat": b"a"}


async def test_an_expired_lease_is_taken_over_and_its_commit_aborted(
    any_store_root: tuple[Store, str],
) -> None:
    """A holder that died part-way through its renames: the next job aborts its commit
    (its renamed files go back) before publishing, and the dead job is gone."""
    store, root = any_store_root
    dest = join(root, "out")
    dead = await _job(store, dest, {f"part={n}/dead.dat": b"dead" for n in range(3)})
    await part_way_commit(store, dest, dead)  # renamed some, then failed
    lease = join(dest, LEASE_NAME)
    record = msgspec.json.decode(await store.read_bytes(lease), type=LeaseRecord)
    assert record.job_id == dead and record.state == "abandoned"
    # as if it had died holding it: publishing, expired
    dead_lease = msgspec.structs.replace(record, state="publishing", expires=time.time() - 1)
    await store.write_bytes(lease, msgspec.json.encode(dead_lease))
    if isinstance(store, LocalStore | MemoryStore):  # elsewhere none may have landed yet
        assert any("dead.dat" in path for path in await output(store, dest))
    live = await _job(store, dest, {"part=9/live.dat": b"live"})
    await commit_job(dest, live, store=store)
    assert await output(store, dest) == {"part=9/live.dat": b"live"}
    assert [job.job_id for job in await list_jobs(dest, store=store)] == []
    assert not await exists(store, lease)


async def test_claims_a_killed_take_over_left_are_deleted(store_root: tuple[Store, str]) -> None:
    """A take-over killed between its claim and the claim's delete leaves a claim file: a
    killed abort of the lease's own job, before it wrote its lease (the abort's re-run
    deletes it), and a killed taker after it wrote its lease (the next taker deletes it)."""
    store, root = store_root
    dest = join(root, "out")
    lease = join(dest, LEASE_NAME)
    dead = await _job(store, dest, {f"part={n}/dead.dat": b"dead" for n in range(3)})
    await part_way_commit(store, dest, dead)  # its lease left abandoned
    record = msgspec.json.decode(await store.read_bytes(lease), type=LeaseRecord)
    killed_abort = msgspec.structs.replace(record, token="t-abort", expires=time.time() + 60)
    await store.write_bytes(
        f"{lease}{CLAIM_INFIX}{record.token}", msgspec.json.encode(killed_abort)
    )
    await abort_job(dest, dead, store=store)
    assert await output(store, dest) == {}  # neither the lease nor the claim is left

    other = LeaseRecord(job_id="job_other_0001", token="t2", expires=time.time() - 1)
    killed_taker = msgspec.structs.replace(other, token="t3", claimed="t2")
    await store.write_bytes(f"{lease}{CLAIM_INFIX}t2", msgspec.json.encode(killed_taker))
    await store.write_bytes(lease, msgspec.json.encode(killed_taker))  # expired, its claim left
    live = await _job(store, dest, {"a.dat": b"a"})
    await commit_job(dest, live, store=store)
    assert await output(store, dest) == {"a.dat": b"a"}


async def test_a_cancelled_commit_is_finished_by_its_rerun(store_root: tuple[Store, str]) -> None:
    """Cancelled while publishing, the job leaves its lease abandoned; its re-run takes
    it back at once and finishes."""
    store, root = store_root
    dest = join(root, "out")
    files = {f"part={n % 4}/f{n}.dat": b"x" for n in range(40)}
    job_id = await _job(store, dest, files)
    with anyio.move_on_after(0.002):
        await commit_job(dest, job_id, store=store, options=CommitOptions(concurrency=1))
    with anyio.fail_after(5):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == files
    assert not await exists(store, join(dest, LEASE_NAME))


async def test_a_job_resuming_its_own_lease_does_not_warn_of_a_take_over(
    store_root: tuple[Store, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The abort of a job whose commit failed part-way takes back its own abandoned lease:
    an INFO line saying so, not a warning that it took over another job's lease."""
    store, root = store_root
    dest = join(root, "out")
    dead = await _job(store, dest, {f"part={n}/dead.dat": b"dead" for n in range(3)})
    await part_way_commit(store, dest, dead)  # its lease left abandoned
    with caplog.at_level(logging.INFO, logger="aiocommit"):
        await abort_job(dest, dead, store=store)
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert not [m for level, m in messages if level >= logging.WARNING and "took over" in m]
    assert (logging.INFO, "resuming this job's own abandoned lease on the destination") in [
        (level, m.rsplit(" [", 1)[0]) for level, m in messages
    ], messages
    assert await output(store, dest) == {}


async def test_jobs_into_disjoint_partitions_all_commit(store_root: tuple[Store, str]) -> None:
    """Append jobs into disjoint partitions all commit."""
    store, root = store_root
    dest = join(root, "out")
    jobs = 3
    ids = [await _job(store, dest, {f"p={n}/f.dat": b"%d" % n}) for n in range(jobs)]
    outcome = await _commit_all(store, dest, ids, CommitOptions())
    assert all(error is None for error in outcome.values()), outcome
    assert await output(store, dest) == {f"p={n}/f.dat": b"%d" % n for n in range(jobs)}
