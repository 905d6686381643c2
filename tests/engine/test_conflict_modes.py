"""Conflict modes through the public API on every store (memory, local and the emulated
ADLS, GCS and S3): replace, replace per partition, fail; an abort of a failed replace
restores the old output, or names what it cannot restore."""

from __future__ import annotations

import re

import pytest

from aiocommit import (
    CommitOptions,
    OutputConflict,
    abort_job,
    commit_job,
    commit_task,
    job_info,
    setup_job,
)
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from tests.helpers import MANIFEST, exists, output, run_tasks, task_files, write_task


async def _job(
    store: Store, dest: str, files: dict[str, bytes], setup: CommitOptions | None = None
) -> str:
    """A set-up job with one committed task writing ``files`` (``setup``: the job's
    options; by default the store's committer)."""
    job_id = await setup_job(dest, store=store, options=setup)
    attempt = await write_task(store, dest, job_id, 0, 0, files)
    await commit_task(attempt, store=store)
    return job_id


async def _seed(store: Store, dest: str) -> dict[str, bytes]:
    job_id, old = await run_tasks(store, dest, tasks=2, files_per_task=6)
    await commit_job(dest, job_id, store=store)
    return old


async def test_replace_replaces_the_destination_exactly(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    dest = join(root, "out")
    old = await _seed(store, dest)
    new = {"part=9/new.dat": b"new", **dict(list(task_files(0, 2, tag="").items())[:1])}
    same_name = next(iter(task_files(0, 2)))  # an old file's name, new bytes
    new[same_name] = b"replaced bytes"
    job_id = await _job(store, dest, new)
    summary = await commit_job(
        dest, job_id, store=store, options=CommitOptions(conflict_mode="replace")
    )
    assert await output(store, dest) == new
    assert set(old) - set(new)  # something old really went
    success = decode_success(await store.read_bytes(join(dest, "_SUCCESS")))
    assert success.job_id == job_id == summary.job_id
    assert not await exists(store, join(dest, "_temporary"))
    if store.capabilities.directories:
        assert not await exists(store, join(dest, "part=2"))  # emptied: removed


async def test_replace_per_partition_keeps_the_other_partitions(
    any_store_root: tuple[Store, str],
) -> None:
    store, root = any_store_root
    dest = join(root, "out")
    old = await _seed(store, dest)
    new = {"part=1/new-1.dat": b"one", "part=7/new-7.dat": b"seven"}
    job_id = await _job(store, dest, new)
    options = CommitOptions(conflict_mode="replace", replace_partitions=True)
    await commit_job(dest, job_id, store=store, options=options)
    kept = {k: v for k, v in old.items() if not k.startswith("part=1/")}
    assert await output(store, dest) == {**kept, **new}


async def test_fail_refuses_and_changes_nothing(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    dest = join(root, "out")
    old = await _seed(store, dest)
    job_id = await _job(store, dest, {"part=9/new.dat": b"new"})
    with pytest.raises(OutputConflict, match="conflict mode is 'fail'"):
        await commit_job(dest, job_id, store=store, options=CommitOptions(conflict_mode="fail"))
    assert await output(store, dest) == old
    assert await abort_job(dest, job_id, store=store) == []
    assert await output(store, dest) == old
    # into an empty destination, fail commits
    empty = join(root, "empty")
    job_id = await _job(store, empty, {"a.dat": b"a"})
    await commit_job(empty, job_id, store=store, options=CommitOptions(conflict_mode="fail"))
    assert await output(store, empty) == {"a.dat": b"a"}


async def test_abort_of_a_failed_replace_restores_or_names_what_it_cannot(
    any_store_root: tuple[Store, str],
) -> None:
    """The replace fails once the job's files are in, while the old ones go (moved
    aside, or deleted on a store without atomic rename)."""
    store, root = any_store_root
    dest = join(root, "out")
    old = await _seed(store, dest)
    old_success = await store.read_bytes(join(dest, "_SUCCESS"))
    victim = sorted(old)[len(old) // 2]
    job_id = await _job(store, dest, {"part=0/new-a.dat": b"a", "part=1/new-b.dat": b"b"})
    failing = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op in ("rename", "delete") and path.endswith(victim)),
    )
    options = CommitOptions(conflict_mode="replace", max_attempts=1, concurrency=2)
    with pytest.raises(Exception, match=re.escape(victim)):
        await commit_job(dest, job_id, store=failing, options=options)
    lost = await abort_job(dest, job_id, store=store)
    assert not await exists(store, join(dest, "_temporary"))
    # the old _SUCCESS was set aside, not deleted: back on every store
    assert await store.read_bytes(join(dest, "_SUCCESS")) == old_success
    if store.capabilities.atomic_rename:  # moved aside: all back
        assert lost == []
        assert await output(store, dest) == old
    else:  # deleted: the abort names exactly the old files that are gone
        left = await output(store, dest)
        assert victim in left
        assert sorted(lost) == sorted(join(dest, f) for f in old if f not in left)
        assert left == {f: old[f] for f in left}  # nothing new, nothing changed


async def test_abort_before_the_old_files_go_keeps_them_all(
    any_store_root: tuple[Store, str],
) -> None:
    """A replace fails while the job's files arrive: the old files have not gone yet
    (only ``_SUCCESS``, set aside), on every store; abort puts all back."""
    store, root = any_store_root
    dest = join(root, "out")
    old = await _seed(store, dest)
    new = {"part=0/new-a.dat": b"a", "part=1/new-b.dat": b"b"}
    job_id = await _job(store, dest, new, MANIFEST)  # its files arrive by rename
    old_success = await store.read_bytes(join(dest, "_SUCCESS"))
    failing = FaultyStore(
        store, Faults(fail_paths=lambda op, path: op == "rename" and path.endswith("new-b.dat"))
    )
    options = CommitOptions(conflict_mode="replace", max_attempts=1)
    with pytest.raises(Exception, match=r"new-b\.dat"):
        await commit_job(dest, job_id, store=failing, options=options)
    lost = await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == old
    assert lost == []
    assert await store.read_bytes(join(dest, "_SUCCESS")) == old_success


# -- issue 33: nothing changes until every conflict is known --------------------------------


async def test_a_second_job_with_the_same_names_is_refused_before_anything_changes(
    any_store_root: tuple[Store, str],
) -> None:
    """Behaviour 2: the README example run twice into one directory, with each store's
    default committer (S3: staging). The second commit is refused (S3 overwrote the
    first job's files) before any change: the first job's output and ``_SUCCESS`` stay,
    the job says ``refused`` (not ``committing``), and abort leaves everything as it was;
    a re-run that asks to overwrite commits."""
    store, root = any_store_root
    dest = join(root, "out")
    first = await _job(store, dest, {"part-00000.csv": b"first"})
    await commit_job(dest, first, store=store)
    old_success = await store.read_bytes(join(dest, "_SUCCESS"))
    second = await _job(store, dest, {"part-00000.csv": b"second", "part-00001.csv": b"2"})
    with pytest.raises(OutputConflict, match="delete_target_files") as caught:
        await commit_job(dest, second, store=store)
    assert caught.value.stage == "job_stage_resolve_conflicts"
    assert await output(store, dest) == {"part-00000.csv": b"first"}
    assert await store.read_bytes(join(dest, "_SUCCESS")) == old_success
    info = await job_info(dest, second, store=store)
    assert info is not None and info.state == "refused"
    # the way out: overwrite, asked for
    summary = await commit_job(
        dest, second, store=store, options=CommitOptions(delete_target_files=True)
    )
    assert summary.job_id == second
    assert await output(store, dest) == {"part-00000.csv": b"second", "part-00001.csv": b"2"}

    # or give the job up: abort changes nothing
    third = await _job(store, dest, {"part-00001.csv": b"third"})
    second_success = await store.read_bytes(join(dest, "_SUCCESS"))
    with pytest.raises(OutputConflict):
        await commit_job(dest, third, store=store)
    assert await abort_job(dest, third, store=store) == []
    assert await output(store, dest) == {"part-00000.csv": b"second", "part-00001.csv": b"2"}
    assert await store.read_bytes(join(dest, "_SUCCESS")) == second_success


async def test_abort_puts_back_the_success_an_append_set_aside(
    any_store_root: tuple[Store, str],
) -> None:
    """Behaviour 2: an append fails once its files started arriving; the older
    ``_SUCCESS`` was set aside (not deleted) at the first change, and abort puts it back
    with the old output, on every store and committer."""
    store, root = any_store_root
    dest = join(root, "out")
    old = await _seed(store, dest)
    old_success = await store.read_bytes(join(dest, "_SUCCESS"))
    new = {"part=5/new-a.dat": b"a", "part=6/new-b.dat": b"b"}
    job_id = await _job(store, dest, new)
    failing = FaultyStore(
        store,
        Faults(
            fail_paths=lambda op, path: (
                op in ("rename", "complete_upload") and path.endswith("new-b.dat")
            )
        ),
    )
    with pytest.raises(Exception, match=r"new-b\.dat"):
        await commit_job(dest, job_id, store=failing, options=CommitOptions(max_attempts=1))
    assert not await exists(store, join(dest, "_SUCCESS"))  # the destination changed
    assert await abort_job(dest, job_id, store=store) == []
    assert await output(store, dest) == old
    assert await store.read_bytes(join(dest, "_SUCCESS")) == old_success


async def test_a_refused_fail_stays_refused_when_run_again_without_options(
    any_store_root: tuple[Store, str],
) -> None:
    """Behaviour 6: the refusal and its mode are in the plan; a re-run with no options
    does not fall back to append."""
    store, root = any_store_root
    dest = join(root, "out")
    old = await _seed(store, dest)
    job_id = await _job(store, dest, {"part=9/new.dat": b"new"})
    with pytest.raises(OutputConflict, match="conflict mode is 'fail'"):
        await commit_job(dest, job_id, store=store, options=CommitOptions(conflict_mode="fail"))
    with pytest.raises(OutputConflict, match="conflict mode is 'fail'"):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == old
    info = await job_info(dest, job_id, store=store)
    assert info is not None and info.state == "refused"
