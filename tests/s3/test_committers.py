"""The zero-rename committers on S3 through moto (aiobotocore over HTTP): the protocol's
properties (complete, exclusive, abortable, re-runnable after a crash at any store call,
continuity), conflict modes, bad input and faults."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest

from aiocommit import (
    InvalidInput,
    abort_job,
    abort_task,
    cleanup_job,
    commit_job,
    commit_task,
    committed_name,
    setup_job,
    setup_task,
    task_attempt,
)
from aiocommit.client.jobs import list_jobs
from aiocommit.committers.s3a import S3CommitterOptions
from aiocommit.errors import (
    CommitError,
    JobNotFound,
    ManifestError,
    NotFound,
    OutputConflict,
    Transient,
)
from aiocommit.options import CommitOptions
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.pending import (
    MAGIC_COMMITTER,
    PARTITIONED_COMMITTER,
    STAGING_COMMITTER,
    PendingSet,
    decode_pendingset,
    encode_pendingset,
    pendingset_path,
)
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import join
from aiocommit.stores.faulty import Faults, FaultyStore, InjectedFailure
from aiocommit.stores.multipart import MultipartStore
from aiocommit.stores.s3 import S3Store
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import exists, output, task_files
from tests.s3.helpers import MAGIC, STAGING, outstanding, run_s3_tasks, s3_task

T = TypeVar("T")
COMMITTERS = ["staging", "magic"]
#: (store, root) with multipart uploads: the memory store, S3 (moto)
S3Root = tuple[MultipartStore, str]
FAST_RETRY = CommitOptions(retry_base_delay=0.001, retry_max_delay=0.01, max_attempts=30)


def pendingset_of(dest: str, job_id: str, task: int) -> str:
    return pendingset_path(JobLayout(dest, job_id), f"task_{job_id[4:]}_m_{task:06d}")


@pytest.mark.parametrize("committer", COMMITTERS)
async def test_complete_and_nothing_visible_before_job_commit(
    s3_root: S3Root, tmp_path: Path, committer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, root = s3_root
    renamed: list[str] = []  # every rename's destination: state files only
    rename = store.rename

    async def recorded(source: str, target: str, *args: Any, **kwargs: Any) -> Any:
        renamed.append(target)
        return await rename(source, target, *args, **kwargs)

    monkeypatch.setattr(store, "rename", recorded)
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=CommitOptions(committer=committer))
    expected = await run_s3_tasks(store, dest, job_id, 3, 4)
    visible = await output(store, dest)
    assert not {p for p in visible if not p.startswith("__magic/")}, "visible before commit"
    assert len(await outstanding(store, root)) == 12
    summary = await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected
    assert await outstanding(store, root) == []
    assert not await exists(store, join(dest, "_temporary"))
    assert not await exists(store, join(dest, "__magic"))
    success = decode_success(await store.read_bytes(join(dest, "_SUCCESS")))
    assert success.job_id == job_id and success.success
    assert success.committer == (MAGIC_COMMITTER if committer == "magic" else STAGING_COMMITTER)
    counters = success.iostatistics.counters
    assert counters[S.COMMITTER_FILES_COMMITTED] == 12
    assert counters[S3.COMMITTER_COMMITS_COMPLETED] == 12
    assert counters[S.COMMITTER_BYTES_COMMITTED] == sum(map(len, expected.values()))
    assert counters[S3.COMMITTER_COMMITS_CREATED] == 12  # from the tasks' pending sets
    # no data is renamed (a store with renames writes its state files through one)
    assert not set(renamed) & {join(dest, p) for p in expected}
    assert {r.rpartition("/")[2] for r in renamed} <= {"commit-plan.json", "_SUCCESS"}
    assert {store.unqualify(f) for f in success.filenames} == {join(dest, p) for p in expected}
    assert summary.job_id == job_id


async def test_multi_part_files(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "big")
    job_id = await setup_job(dest, store=store, options=STAGING)
    part = 5 * 1024 * 1024
    files = {"a.bin": bytes(range(256)) * (part // 256) + b"tail", "empty.bin": b""}
    await s3_task(store, dest, job_id, 0, 0, files, options=CommitOptions(part_size=part))
    pending = decode_pendingset(await store.read_bytes(pendingset_of(dest, job_id, 0)))
    assert [len(c.etags) for c in pending.commits] == [2, 1]
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == files


async def test_exclusive_failed_and_aborted_attempts(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=MAGIC)
    # magic: a failed attempt (uploaded, never committed) and an aborted one
    await s3_task(store, dest, job_id, 0, 0, task_files(0, 3, tag="-failed"), commit=False)
    aborted = await setup_task(dest, job_id, 1, 0, store=store)
    await aborted.write_bytes("x/aborted.dat", b"no", store=store)
    await abort_task(aborted, store=store)
    expected: dict[str, bytes] = {}
    for task in range(3):
        files = task_files(task, 3)
        await s3_task(store, dest, job_id, task, 1, files)
        expected.update(files)
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected
    assert await outstanding(store, root) == [], "the failed attempt's uploads are aborted"


async def test_staging_task_dying_after_upload_aborts_its_uploads(
    s3_root: S3Root, tmp_path: Path
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=STAGING)
    faulty = FaultyStore(
        store, Faults(fail_paths=lambda op, path: op == "write_bytes" and "pendingset" in path)
    )
    attempt = await setup_task(dest, job_id, 0, 0, store=store)
    for relative, data in task_files(0, 4).items():
        await attempt.write_bytes(relative, data, store=store)
    with pytest.raises(CommitError):
        await commit_task(attempt, store=faulty)
    assert await outstanding(store, root) == []
    await commit_task(attempt, store=store)  # its local files are still there
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == task_files(0, 4)


async def test_last_attempt_to_commit_wins(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=STAGING)
    await s3_task(store, dest, job_id, 0, 0, task_files(0, 3, tag="-a0"))
    await s3_task(store, dest, job_id, 0, 1, task_files(0, 2, tag="-a1"))
    assert len(await outstanding(store, root)) == 2, "the replaced attempt's uploads aborted"
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == task_files(0, 2, tag="-a1")


@pytest.mark.parametrize("committer", COMMITTERS)
async def test_abort_job_before_commit(s3_root: S3Root, tmp_path: Path, committer: str) -> None:
    store, root = s3_root
    dest = join(root, "out")
    await store.write_bytes(join(dest, "existing.dat"), b"keep me")
    job_id = await setup_job(dest, store=store, options=CommitOptions(committer=committer))
    await run_s3_tasks(store, dest, job_id, 2, 3)
    if committer == "magic":  # and one uncommitted magic attempt
        await s3_task(store, dest, job_id, 5, 0, task_files(5, 2), commit=False)
    await abort_job(dest, job_id, store=store)
    with pytest.raises(JobNotFound):  # finished: nothing of the job is left
        await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {"existing.dat": b"keep me"}
    assert await outstanding(store, root) == []
    assert not await exists(store, join(dest, "_temporary"))


async def test_abort_never_deletes_a_committed_jobs_output(s3_root: S3Root, tmp_path: Path) -> None:
    """#12 case 1 on S3: job OLD committed with its cleanup skipped; job NEW then commits
    to the same destination (its _SUCCESS replaces OLD's). OLD is still 'committed' (its
    plan says so), and its abort only cleans up: its completed files stay."""
    store, root = s3_root
    dest = join(root, "out")
    old_id = await setup_job(dest, store=store, options=STAGING)
    old = await run_s3_tasks(store, dest, old_id, 2, 2)
    await commit_job(dest, old_id, store=store, options=CommitOptions(cleanup_skip=True))
    new_id = await setup_job(dest, store=store, options=STAGING)
    new = {"p=9/new.dat": b"new job"}
    await s3_task(store, dest, new_id, 0, 0, new)
    await commit_job(dest, new_id, store=store)
    assert decode_success(await store.read_bytes(join(dest, "_SUCCESS"))).job_id == new_id
    (info,) = await list_jobs(dest, store=store)
    assert (info.job_id, info.state) == (old_id, "committed")
    await abort_job(dest, old_id, store=store)
    assert await output(store, dest) == {**old, **new}
    assert not await exists(store, JobLayout(dest, old_id).job_dir)


async def test_abort_after_a_partial_commit_reverts(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=STAGING)
    await run_s3_tasks(store, dest, job_id, 2, 4)
    crash = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op == "complete_upload" and path.endswith("0002.dat")),
    )
    with pytest.raises(CommitError):
        await commit_job(dest, job_id, store=crash, options=CommitOptions(concurrency=1))
    assert await output(store, dest), "some uploads were completed"
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {}
    assert await outstanding(store, root) == []


async def _commit_counting_calls(store: MultipartStore, dest: str, job_id: str) -> int:
    counter = FaultyStore(store, Faults())
    await commit_job(dest, job_id, store=counter)
    return counter.counts.calls


async def test_rerunnable_after_a_crash_at_any_store_call(s3_root: S3Root, tmp_path: Path) -> None:
    """A job commit that dies at its N-th store call, for every N, is finished by a re-run:
    exactly the committed output, no upload left outstanding."""
    store, root = s3_root
    probe = join(root, "probe")
    job_id = await setup_job(probe, store=store, options=STAGING)
    await run_s3_tasks(store, probe, job_id, 2, 2)
    calls = await _commit_counting_calls(store, probe, job_id)
    assert calls > 8
    for crash_at in range(calls):
        dest = join(root, f"crash-{crash_at}")
        job_id = await setup_job(dest, store=store, options=STAGING)
        expected = await run_s3_tasks(store, dest, job_id, 2, 2)
        dying = FaultyStore(store, Faults(fail_after_calls=crash_at))
        with pytest.raises((CommitError, InjectedFailure)):
            await commit_job(dest, job_id, store=dying)
        await commit_job(dest, job_id, store=store)
        assert await output(store, dest) == expected, f"crash at call {crash_at}"
        assert await outstanding(store, dest) == [], f"crash at call {crash_at}"


async def test_continuity(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=STAGING)
    late = await setup_task(dest, job_id, 1, 0, store=store)
    await late.write_bytes("late.dat", b"late", store=store)
    await s3_task(store, dest, job_id, 0, 0, task_files(0, 3))
    first = await commit_job(dest, job_id, store=store)
    with pytest.raises(CommitError, match="not active"):
        await commit_task(late, store=store)
    with pytest.raises(CommitError, match="not active"):
        await setup_task(dest, job_id, 2, 0, store=store)
    again = await commit_job(dest, job_id, store=store)
    assert again.timestamp == first.timestamp
    assert await output(store, dest) == task_files(0, 3)
    assert await outstanding(store, root) == []


async def test_lost_responses_on_complete_and_abort_and_throttling(
    s3_root: S3Root, tmp_path: Path
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=STAGING)
    expected = await run_s3_tasks(store, dest, job_id, 3, 5)
    faulty = FaultyStore(
        store,
        Faults(
            seed=7,
            throttle_probability=0.2,
            lost_response_probability=0.3,
            lost_response_operations=("complete_upload", "abort_upload", "delete"),
        ),
    )
    summary = await commit_job(dest, job_id, store=faulty, options=FAST_RETRY)
    assert await output(store, dest) == expected
    assert faulty.counts.lost_responses > 0 and faulty.counts.throttled > 0
    # completes retried after a lost response: moto answers them 200 (as S3 does for a
    # while); S3's documented NoSuchUpload answer is covered in test_s3_documented.py
    assert summary.iostatistics.counters[S3.OP_COMPLETE_UPLOAD + ".failures"] > 0
    assert summary.iostatistics.counters[S3.COMMITTER_COMMITS_COMPLETED] == 15
    assert summary.iostatistics.counters[S.STORE_IO_THROTTLED] > 0
    # abort through lost responses: every upload aborted all the same
    dest2 = join(root, "out2")
    job2 = await setup_job(dest2, store=store, options=STAGING)
    await run_s3_tasks(store, dest2, job2, 2, 5)
    await abort_job(dest2, job2, store=faulty, options=FAST_RETRY)
    assert await outstanding(store, dest2) == []
    assert await output(store, dest2) == {}


async def test_cleanup_after_a_dead_driver_leaves_no_upload(
    s3_root: S3Root, tmp_path: Path
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=MAGIC)
    await run_s3_tasks(store, dest, job_id, 2, 2)
    await s3_task(store, dest, job_id, 3, 0, task_files(3, 2), commit=False)
    assert len(await outstanding(store, root)) == 6
    await cleanup_job(dest, job_id, store=store)
    assert await outstanding(store, root) == []
    assert await output(store, dest) == {}


# -- bad input ------------------------------------------------------------------------


async def _job_with_tasks(store: MultipartStore, dest: str, tmp: Path) -> str:
    job_id = await setup_job(dest, store=store, options=STAGING)
    await run_s3_tasks(store, dest, job_id, 2, 2)
    return job_id


async def _assert_refused(
    store: MultipartStore, dest: str, job_id: str, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {}, "nothing completed before the refusal"


async def test_truncated_pendingset(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await _job_with_tasks(store, dest, tmp_path)
    path = pendingset_of(dest, job_id, 1)
    data = await store.read_bytes(path)
    await store.write_bytes(path, data[: len(data) // 2])
    await _assert_refused(store, dest, job_id, ManifestError, "malformed pending set")
    await abort_job(dest, job_id, store=store)
    assert await outstanding(store, root) == [], "abort finds the truncated set's uploads"


async def test_pendingset_of_another_job(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await _job_with_tasks(store, dest, tmp_path)
    path = pendingset_of(dest, job_id, 0)
    pending = decode_pendingset(await store.read_bytes(path))
    pending.job_id = "job_202001010000_0001"
    await store.write_bytes(path, encode_pendingset(pending))
    await _assert_refused(store, dest, job_id, ManifestError, "of job")


async def test_destination_outside_the_destination(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await _job_with_tasks(store, dest, tmp_path)
    path = pendingset_of(dest, job_id, 0)
    pending = decode_pendingset(await store.read_bytes(path))
    commit = pending.commits[0]
    commit.destination_key = "root/elsewhere/f.dat"
    commit.uri = store.qualify("/root/elsewhere/f.dat")
    await store.write_bytes(path, encode_pendingset(pending))
    await _assert_refused(store, dest, job_id, ManifestError, "outside the destination")
    assert not await exists(store, "/root/elsewhere/f.dat")


async def test_upload_that_no_longer_exists(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await _job_with_tasks(store, dest, tmp_path)
    pending = decode_pendingset(await store.read_bytes(pendingset_of(dest, job_id, 1)))
    commit = pending.commits[0]
    await store.abort_upload("/" + commit.destination_key, commit.upload_id)  # a lifecycle rule
    await _assert_refused(store, dest, job_id, ManifestError, "no longer exists")


async def test_two_tasks_claiming_one_destination(s3_root: S3Root, tmp_path: Path) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=STAGING)
    await s3_task(store, dest, job_id, 0, 0, {"same.dat": b"zero"})
    await s3_task(store, dest, job_id, 1, 0, {"same.dat": b"one"})
    await _assert_refused(store, dest, job_id, OutputConflict, "two tasks claim")


# -- conflict modes -------------------------------------------------------------------


async def _each_conflict_mode(
    store: MultipartStore,
    root: str,
    tmp_path: Path,
    old: dict[str, bytes],
    new: dict[str, bytes],
    *,
    partitioned: bool,
) -> dict[str, dict[str, bytes]]:
    """One job per conflict mode writing ``new`` over ``old``: ``fail`` must refuse and
    leave ``old``; what a reader sees after ``append`` and ``replace``, each also after a
    re-run of the finished commit (our own files are never conflicts)."""
    results = {}
    for mode in ("fail", "append", "replace"):
        dest = join(root, f"{mode}-{partitioned}")
        for relative, data in old.items():
            await store.write_bytes(join(dest, relative), data)
        job_id = await setup_job(dest, store=store, options=STAGING)
        options = CommitOptions(conflict_mode=mode, replace_partitions=partitioned)
        await s3_task(store, dest, job_id, 0, 0, new)
        if mode == "fail":
            where = "partition" if partitioned else "destination"
            with pytest.raises(OutputConflict, match=f"the {where} already holds .* is 'fail'"):
                await commit_job(dest, job_id, store=store, options=options)
            await abort_job(dest, job_id, store=store)
            assert await output(store, dest) == old
            continue
        summary = await commit_job(dest, job_id, store=store, options=options)
        assert summary.committer == (PARTITIONED_COMMITTER if partitioned else STAGING_COMMITTER)
        results[mode] = await output(store, dest)
        await commit_job(dest, job_id, store=store, options=options)
        assert await output(store, dest) == results[mode]
    assert await outstanding(store, root) == []
    return results


@pytest.mark.parametrize("partitioned", [False, True])
async def test_conflict_modes(s3_root: S3Root, tmp_path: Path, partitioned: bool) -> None:
    store, root = s3_root
    new = {"p=1/new.dat": b"new"}
    old = {"p=1/old.dat": b"old", "p=2/other.dat": b"untouched partition"}
    results = await _each_conflict_mode(store, root, tmp_path, old, new, partitioned=partitioned)
    assert results["append"] == {**old, **new}
    if partitioned:
        assert results["replace"] == {"p=2/other.dat": b"untouched partition", **new}
    else:
        assert results["replace"] == new


async def test_partitioned_conflicts_are_whole_leaf_partitions(
    s3_root: S3Root, tmp_path: Path
) -> None:
    """Multi-column partitions: the partition of ``a=1/b=2/new.dat`` is ``a=1/b=2`` with
    everything below it (Hadoop: FAIL if it exists, REPLACE deletes it recursively); its
    neighbours ``a=1/b=3`` and the parent's own file are other partitions, untouched."""
    store, root = s3_root
    new = {"a=1/b=2/new.dat": b"new"}
    neighbours = {"a=1/b=3/other.dat": b"other partition", "a=1/top.dat": b"parent's file"}
    old = {"a=1/b=2/c=9/deep.dat": b"inside the partition", **neighbours}
    results = await _each_conflict_mode(store, root, tmp_path, old, new, partitioned=True)
    assert results["append"] == {**old, **new}
    assert results["replace"] == {**neighbours, **new}


def test_options_from_hadoop_names() -> None:
    options = CommitOptions.from_mapping(
        {
            "fs.s3a.committer.name": "partitioned",
            "fs.s3a.committer.staging.conflict-mode": "replace",
            "fs.s3a.multipart.size": str(8 * 1024 * 1024),
            "fs.s3a.committer.abort.pending.uploads": "false",
        }
    )
    assert S3CommitterOptions.from_options(options) == S3CommitterOptions(
        committer="staging",
        conflict_mode="replace",
        partitioned=True,
        part_size=8 * 1024 * 1024,
        abort_pending_uploads=False,
    )
    with pytest.raises(ValueError, match="conflict_mode"):
        CommitOptions(conflict_mode="overwrite")
    with pytest.raises(ValueError, match="part_size"):
        CommitOptions(part_size=1024)


@pytest.mark.emulator
async def test_endpoint_and_path_style_from_a_mapping_reach_the_store(
    moto_root: tuple[MultipartStore, str],
) -> None:
    """``fs.s3a.endpoint`` and ``fs.s3a.path.style.access`` given by name (as Spark or
    Hadoop spell them) open the job's own client on that endpoint, not on AWS."""
    store, root = moto_root
    assert isinstance(store, S3Store)
    url = f"s3a://{store.bucket}{root}/mapped"
    options = CommitOptions.from_mapping(
        {
            "spark.hadoop.fs.s3a.endpoint": store.endpoint_url,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.committer.name": "magic",
            "aiocommit.max_attempts": "2",
        }
    )
    job_id = await setup_job(url, options=options)
    attempt = await setup_task(url, job_id, 0, options=options)
    assert attempt.committer_name == "magic"
    await attempt.write_bytes("a.txt", b"mapped", options=options)
    await commit_task(attempt, options=options)
    summary = await commit_job(url, job_id, options=options)
    assert summary.committer == MAGIC_COMMITTER
    assert await output(store, f"{root}/mapped") == {"a.txt": b"mapped"}


async def test_magic_marker_and_pending_file(s3_root: S3Root) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=MAGIC)
    attempt = await setup_task(dest, job_id, 0, 0, store=store)
    await attempt.write_bytes("y=1/f.dat", b"data", store=store)
    marker = join(attempt.magic_base, "y=1/f.dat")
    assert (await store.stat(marker)).size == 0
    raw = msgspec.json.decode(await store.read_bytes(marker + ".pending"))
    assert raw["destinationKey"] == "root/out/y=1/f.dat" and raw["length"] == 4
    assert not await exists(store, join(dest, "y=1/f.dat"))
    pending = await commit_task(attempt, store=store)
    assert isinstance(pending, PendingSet)
    assert [c.destination_key for c in pending.commits] == ["root/out/y=1/f.dat"]
    assert not await exists(store, marker)
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {"y=1/f.dat": b"data"}


class DocumentedSecondComplete(StoreWrapper):
    """moto answers a second CompleteMultipartUpload 200; S3 documents NoSuchUpload. This
    wrapper answers as documented, and loses every first complete's response."""

    def __init__(self, inner: MultipartStore):
        super().__init__(inner)
        self.completed: set[str] = set()

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        if operation != "complete_upload":
            return await call()
        if path in self.completed:
            raise NotFound("NoSuchUpload (as S3 documents it)", path=path, operation=operation)
        result = await call()
        self.completed.add(path)
        raise Transient("lost response (applied)", path=path, operation=operation)
        return result  # pragma: no cover


async def test_retried_complete_answered_no_such_upload_counts_as_done(
    s3_root: S3Root, tmp_path: Path
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=STAGING)
    expected = await run_s3_tasks(store, dest, job_id, 2, 3)
    summary = await commit_job(
        dest, job_id, store=DocumentedSecondComplete(store), options=FAST_RETRY
    )
    assert await output(store, dest) == expected
    assert summary.iostatistics.counters[S3.COMMITTER_COMMITS_RECOVERED] == 6


async def test_two_drivers_committing_one_job(s3_root: S3Root, tmp_path: Path) -> None:
    """Two drivers commit the same job at once (a driver restarted while the first still
    ran): the conditional put of the plan fixes one set of pending sets; the output is
    exact and no upload is left."""
    import anyio

    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=STAGING)
    expected = await run_s3_tasks(store, dest, job_id, 3, 4)
    errors: list[BaseException] = []

    async def driver() -> None:
        try:
            await commit_job(dest, job_id, store=store)
        except CommitError as error:  # a cleanup race may fail the slower one; a re-run heals
            errors.append(error)

    async with anyio.create_task_group() as group:
        group.start_soon(driver)
        group.start_soon(driver)
    if errors:
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected
    assert await outstanding(store, root) == []


async def test_replace_by_commit_options_and_what_an_abort_cannot_restore(
    moto_root: S3Root, tmp_path: Path
) -> None:
    """``CommitOptions(conflict_mode="replace")`` drives the staging committer too (the
    shared stage): the old objects that no new one lands on go only after the uploads are
    completed; a commit that fails while they go is aborted with exactly the deleted ones
    named, every other old object kept and nothing of the job left."""
    store, root = moto_root  # S3: no atomic rename, so replace deletes
    dest = join(root, "out")
    old = {f"p={n % 2}/old-{n}.dat": b"old %d" % n for n in range(6)}
    for relative, data in old.items():
        await store.write_bytes(join(dest, relative), data)
    job_id = await setup_job(dest, store=store, options=STAGING)
    new = {"p=0/new.dat": b"new", "p=0/old-0.dat": b"same name, new bytes"}
    await s3_task(store, dest, job_id, 0, 0, new)
    victim = "p=1/old-3.dat"
    failing = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op in ("rename", "delete") and path.endswith(victim)),
    )
    options = CommitOptions(conflict_mode="replace", max_attempts=1, concurrency=1)
    with pytest.raises(CommitError, match=victim):
        await commit_job(dest, job_id, store=failing, options=options)
    lost = await abort_job(dest, job_id, store=store)
    left = await output(store, dest)
    if store.capabilities.atomic_rename:  # the memory store: moved aside, moved back
        assert (lost, left) == ([], old)
    else:
        assert victim in left and "p=0/new.dat" not in left
        assert left == {k: v for k, v in old.items() if k in left}
        assert sorted(lost) == sorted(join(dest, k) for k in old if k not in left)
        assert join(dest, "p=0/old-0.dat") in lost  # in the way of a new file: gone first
    assert await outstanding(store, root) == []
    # the same job shape committed whole replaces exactly
    job_id = await setup_job(dest, store=store, options=STAGING)
    await s3_task(store, dest, job_id, 0, 0, new)
    await commit_job(dest, job_id, store=store, options=CommitOptions(conflict_mode="replace"))
    assert await output(store, dest) == new


async def test_a_named_attempt_commits_into_the_jobs_committer(s3_root: S3Root) -> None:
    """``task_attempt`` without a committer named a manifest committer attempt even on an
    S3 job: its output went to a manifest the job's commit never read. It follows the
    job's record now."""
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=MAGIC)
    attempt = task_attempt(store.qualify(dest), dest, job_id, 0)
    await attempt.write_bytes("a.dat", b"magic", store=store)
    assert isinstance(await commit_task(attempt, store=store), PendingSet)
    summary = await commit_job(dest, job_id, store=store)
    assert summary.committer == MAGIC_COMMITTER
    assert await output(store, dest) == {"a.dat": b"magic"}
    with pytest.raises(InvalidInput, match="named without its job's committer"):
        committed_name(attempt)  # not known without reading the job
