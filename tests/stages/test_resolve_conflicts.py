"""The resolve-conflicts stage on its own, on the memory store: what each mode does to
the destination, what it records in the commit plan, and how a re-run and an abort
honour the record."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import pytest

from aiocommit.committers.common.commit_plan import COMMITTING, REFUSED, CommitPlan, read_plan
from aiocommit.committers.common.context import StageContext
from aiocommit.committers.common.resolve_conflicts import (
    clear_conflicts_stage,
    finish_conflicts_stage,
    partition_roots,
    resolve_conflicts_stage,
    restore_replaced_stage,
    settle_conflict_mode,
    unrestorable,
)
from aiocommit.committers.common.session import open_context
from aiocommit.errors import ManifestError, OutputConflict
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import StoreCapabilities, join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import exists, walk

DEST = "/out"
OLD = {
    "_SUCCESS": b"old success",
    "top.txt": b"top",
    "k=a/a1.txt": b"a1",
    "k=b/b1.txt": b"b1",
    "k=b/deep/b2.txt": b"b2",
}

#: the old output a replace takes: everything but _SUCCESS (the frame sets that aside)
OLD_OUTPUT = {k: v for k, v in OLD.items() if k != "_SUCCESS"}


class NoRenameStore(StoreWrapper):
    """The memory store, saying it has no atomic rename (as S3 and flat GCS do)."""

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(atomic_rename=False)


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    memory = MemoryStore(f"conflicts-{id(object())}")
    for relative, data in OLD.items():
        await memory.write_bytes(join(DEST, relative), data)
    await memory.mkdirs(join(DEST, "empty"))
    await memory.mkdirs(join(DEST, "_temporary", "job_1", "00"))
    yield memory
    await memory.aclose()


async def run(
    store: object,
    mode: str,
    *,
    partitioned: bool = False,
    targets: Iterable[str] = (),
    plan: CommitPlan | None = None,
    finish: bool = True,
    options: CommitOptions | None = None,
) -> tuple[CommitPlan, StageContext]:
    """The check, the first change before the job's files arrive and, with ``finish``,
    the rest after."""
    plan = plan or CommitPlan(job_id="job_1", manifests={})
    async with open_context(DEST, "job_1", store=store, options=options) as context:  # type: ignore[arg-type]
        await resolve_conflicts_stage(
            context, plan, mode, partitioned=partitioned, targets=lambda: list(targets)
        )
        await clear_conflicts_stage(context, plan)
        if finish:
            await finish_conflicts_stage(context, plan)
    return plan, context


async def visible(store: MemoryStore) -> dict[str, bytes]:
    return {k: v for k, v in (await walk(store, DEST)).items() if not k.startswith("_temporary")}


async def test_append_changes_nothing_and_records_the_mode(store: MemoryStore) -> None:
    plan, _ = await run(store, "append", targets=[join(DEST, "k=a/new.txt")])
    assert await visible(store) == OLD
    assert plan.conflicts is not None
    assert (plan.conflicts.mode, plan.conflicts.done, plan.conflicts.replaced) == (
        "append",
        True,
        [],
    )


async def test_fail_refuses_a_destination_with_files(store: MemoryStore) -> None:
    with pytest.raises(OutputConflict, match="already holds 5 file"):
        await run(store, "fail")
    assert await visible(store) == OLD


async def test_fail_per_partition_checks_only_the_written_partitions(store: MemoryStore) -> None:
    plan, _ = await run(store, "fail", partitioned=True, targets=[join(DEST, "k=c/new.txt")])
    assert plan.conflicts is not None and plan.conflicts.roots == ["k=c"]
    with pytest.raises(OutputConflict, match="partition already holds 2 file"):
        await run(store, "fail", partitioned=True, targets=[join(DEST, "k=b/new.txt")])


async def test_replace_moves_the_old_output_aside_and_records_it(store: MemoryStore) -> None:
    """The old files in the way of the job's go first, recorded; the rest once the
    job's files are in, so a reader never sees a partition with neither. ``_SUCCESS`` is
    the frame's to set aside, not the stage's."""
    in_the_way = join(DEST, "k=a/a1.txt")
    plan, _ = await run(store, "replace", targets=[in_the_way], finish=False)
    record = plan.conflicts
    assert record is not None and record.aside and not record.done and record.cleared
    assert record.replaced == sorted(set(OLD) - {"_SUCCESS"})
    assert record.collisions == ["k=a/a1.txt"]
    assert set(record.directories) == {"empty", "k=a", "k=b", "k=b/deep"}
    assert await visible(store) == {k: v for k, v in OLD.items() if k != "k=a/a1.txt"}
    # the plan on the store says the same, for a re-run or an abort
    async with open_context(DEST, "job_1", store=store) as fresh:
        saved = await read_plan(fresh)
    assert saved is not None and saved.conflicts == record
    # the job's files arrive; then the rest goes, and the emptied directories too
    await store.write_bytes(in_the_way, b"new")
    async with open_context(DEST, "job_1", store=store) as context:
        await finish_conflicts_stage(context, plan)
    assert record.done
    assert await visible(store) == {"k=a/a1.txt": b"new", "_SUCCESS": b"old success"}
    assert await walk(store, context.layout.replaced_dir) == OLD_OUTPUT
    assert not await exists(store, join(DEST, "k=b"))
    assert not await exists(store, join(DEST, "empty"))
    assert await exists(store, join(DEST, "k=a"))  # refilled: stays
    assert context.stats.counters[S.COMMITTER_FILES_REPLACED] == len(OLD) - 2


async def test_replace_per_partition_leaves_other_partitions(store: MemoryStore) -> None:
    targets = [join(DEST, "k=b/new.txt"), join(DEST, "k=c/new.txt")]
    plan, _ = await run(store, "replace", partitioned=True, targets=targets)
    assert plan.conflicts is not None
    assert plan.conflicts.roots == ["k=b", "k=c"]
    assert plan.conflicts.replaced == ["k=b/b1.txt", "k=b/deep/b2.txt"]
    assert await visible(store) == {k: v for k, v in OLD.items() if not k.startswith("k=b/")}


def test_partition_roots_are_outermost_and_a_file_in_dest_takes_all() -> None:
    assert partition_roots("/d", ["/d/a=1/b=2/f", "/d/a=1/g", "/d/c=3/f"]) == ["/d/a=1", "/d/c=3"]
    assert partition_roots("/d", ["/d/a=1/f", "/d/f"]) == ["/d"]
    assert partition_roots("/d", []) == []


async def test_abort_restores_exactly(store: MemoryStore) -> None:
    plan, context = await run(store, "replace")
    async with open_context(DEST, "job_1", store=store) as fresh:
        await restore_replaced_stage(fresh, plan)
        await restore_replaced_stage(fresh, plan)  # idempotent
        assert await unrestorable(fresh, plan) == []
        assert fresh.stats.counters[S.COMMITTER_FILES_RESTORED] == len(OLD_OUTPUT)
    assert await visible(store) == OLD
    assert await exists(store, join(DEST, "empty"))
    assert await walk(store, context.layout.replaced_dir) == {}


async def test_without_atomic_rename_old_files_are_deleted_and_reported(
    store: MemoryStore,
) -> None:
    plan, context = await run(NoRenameStore(store), "replace")
    assert plan.conflicts is not None and not plan.conflicts.aside
    assert await visible(store) == {"_SUCCESS": b"old success"}
    assert context.stats.counters[S.COMMITTER_TARGET_FILES_DELETED] == len(OLD_OUTPUT)
    lost = [join(DEST, f) for f in sorted(OLD_OUTPUT)]
    async with open_context(DEST, "job_1", store=NoRenameStore(store)) as fresh:
        await restore_replaced_stage(fresh, plan)
        assert await unrestorable(fresh, plan) == lost
        # an old file the replace had not reached is not reported
        await store.write_bytes(join(DEST, "top.txt"), b"top")
        assert await unrestorable(fresh, plan) == [p for p in lost if not p.endswith("top.txt")]


async def test_an_interrupted_replace_is_resumed_from_its_record(store: MemoryStore) -> None:
    """The stage fails part-way (a move that keeps failing): what moved stays recorded;
    a re-run finishes it, and never counts files that arrived since as old."""
    failing = FaultyStore(
        store, Faults(fail_paths=lambda op, path: op == "rename" and path.endswith("b2.txt"))
    )
    plan = CommitPlan(job_id="job_1", manifests={})

    async def replace() -> None:
        async with open_context(
            DEST, "job_1", store=failing, options=CommitOptions(max_attempts=1)
        ) as context:
            await resolve_conflicts_stage(
                context, plan, "replace", partitioned=False, targets=lambda: []
            )
            await clear_conflicts_stage(context, plan)
            await finish_conflicts_stage(context, plan)

    with pytest.raises(Exception, match=r"b2\.txt"):
        await replace()
    assert plan.conflicts is not None and not plan.conflicts.done
    left = await visible(store)  # which other moves finished first is the scheduler's
    assert "k=b/deep/b2.txt" in left and left.items() <= OLD.items()
    # a file of the job that arrived meanwhile is not old output
    await store.write_bytes(join(DEST, "k=a/new.txt"), b"new")
    async with open_context(DEST, "job_1", store=store) as context:
        saved = await read_plan(context)
    assert saved is not None
    await run(store, "replace", plan=saved)
    assert saved.conflicts is not None and saved.conflicts.done
    assert await visible(store) == {"k=a/new.txt": b"new", "_SUCCESS": b"old success"}
    aside = await walk(store, context.layout.replaced_dir)
    assert aside == OLD_OUTPUT


async def test_a_rerun_takes_the_recorded_mode_and_refuses_another(store: MemoryStore) -> None:
    plan, context = await run(store, "replace", partitioned=True, targets=[DEST + "/k=a/f"])
    assert settle_conflict_mode(context, plan, None, None) == ("replace", True)
    assert settle_conflict_mode(context, plan, "replace", True) == ("replace", True)
    with pytest.raises(ManifestError, match="started earlier with conflict mode 'replace'"):
        settle_conflict_mode(context, plan, "append", None)
    with pytest.raises(ManifestError, match="per partition"):
        settle_conflict_mode(context, plan, None, False)
    fresh = CommitPlan(job_id="job_1", manifests={})
    assert settle_conflict_mode(context, fresh, None, None) == ("append", False)


def test_options_validate_and_take_hadoop_names() -> None:
    assert CommitOptions(conflict_mode="REPLACE").conflict_mode == "replace"
    with pytest.raises(ValueError, match="conflict_mode must be one of fail, append, replace"):
        CommitOptions(conflict_mode="merge")
    options = CommitOptions.from_mapping(
        {
            "spark.hadoop.fs.s3a.committer.staging.conflict-mode": "fail",
            "aiocommit.replace-partitions": "true",
        }
    )
    assert (options.conflict_mode, options.replace_partitions) == ("fail", True)


async def test_a_rerun_never_replaces_cleared_collisions_again(store: MemoryStore) -> None:
    """Issue 33, behaviour 3: once the old file at a new file's name is aside and the job's
    file took the name, a re-run (the record says cleared) leaves it in place, on a
    store with atomic rename and on one without (where it was deleted)."""
    name = join(DEST, "k=a/a1.txt")
    for wrapped in (store, NoRenameStore(store)):
        await store.write_bytes(name, b"a1")
        await run(wrapped, "replace", targets=[name], finish=False)
        await store.write_bytes(name, b"the job's own file")  # the rename landed
        async with open_context(DEST, "job_1", store=wrapped) as context:
            saved = await read_plan(context)
            assert saved is not None and saved.conflicts is not None
            assert saved.conflicts.cleared
            await resolve_conflicts_stage(
                context, saved, "replace", partitioned=False, targets=lambda: [name]
            )
            await clear_conflicts_stage(context, saved)
            await finish_conflicts_stage(context, saved)
        assert await store.read_bytes(name) == b"the job's own file"
        await store.delete(context.layout.job_attempt_dir, recursive=True)
        await store.mkdirs(context.layout.job_attempt_dir)


async def test_append_refuses_a_name_clash_before_anything_changes(store: MemoryStore) -> None:
    plan = CommitPlan(job_id="job_1", manifests={})
    clash = [join(DEST, "k=a/a1.txt"), join(DEST, "k=z/new.txt")]
    with pytest.raises(OutputConflict, match=r"1 of the job's file\(s\).*delete_target_files"):
        await run(store, "append", targets=clash, plan=plan)
    assert await visible(store) == OLD
    assert plan.state == REFUSED and plan.conflicts is not None
    assert plan.conflicts.mode == "append"
    # overwriting asked for: accepted, and nothing changes before the renames
    allowed, _ = await run(
        store, "append", targets=clash, options=CommitOptions(delete_target_files=True)
    )
    assert allowed.state == COMMITTING and allowed.conflicts is not None
    assert await visible(store) == OLD
    # a directory where a file goes is refused whatever the options
    with pytest.raises(OutputConflict, match="destination is a directory"):
        await run(
            store,
            "append",
            targets=[join(DEST, "k=b/deep")],
            options=CommitOptions(delete_target_files=True),
        )


async def test_a_refused_fail_stays_refused_on_a_rerun_without_options(
    store: MemoryStore,
) -> None:
    """Issue 33, behaviour 6: the plan records the refusal and the mode; a re-run with no
    mode checks again with ``fail``; one given another mode decides anew (nothing had
    changed)."""
    plan = CommitPlan(job_id="job_1", manifests={})
    with pytest.raises(OutputConflict, match="conflict mode is 'fail'"):
        await run(store, "fail", plan=plan)
    async with open_context(DEST, "job_1", store=store) as context:
        saved = await read_plan(context)
        assert saved is not None and saved.state == REFUSED
        assert settle_conflict_mode(context, saved, None, None) == ("fail", False)
        assert settle_conflict_mode(context, saved, "replace", None) == ("replace", False)
    with pytest.raises(OutputConflict, match="conflict mode is 'fail'"):
        await run(store, "fail", plan=saved)
    assert await visible(store) == OLD
