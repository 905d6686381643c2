"""The committer's correctness properties, on every store: complete, exclusive,
concurrent, last attempt wins, abortable, continuity."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from aiocommit import (
    CommitError,
    JobNotFound,
    abort_job,
    abort_task,
    commit_job,
    commit_task,
    setup_job,
    setup_task,
)
from aiocommit.protocol import statistics as S
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import Store, join
from tests.helpers import exists, output, run_tasks, task_files, write_task


async def test_complete(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=5, files_per_task=9)
    summary = await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected
    assert not await exists(store, join(dest, "_temporary"))
    success = decode_success(await store.read_bytes(join(dest, "_SUCCESS")))
    assert success.success and success.job_id == job_id
    assert success.iostatistics.counters[S.COMMITTER_FILES_COMMITTED] == 45
    assert success.iostatistics.counters[S.COMMITTER_BYTES_COMMITTED] == sum(
        map(len, expected.values())
    )
    assert success.iostatistics.counters[S.COMMITTER_TASK_FILE_COUNT] == 45
    assert len(success.filenames) == 45
    assert {store.unqualify(f) for f in success.filenames} == {join(dest, p) for p in expected}
    assert summary.job_id == job_id


async def test_exclusive_failed_and_aborted_attempts(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store)
    failed = await write_task(store, dest, job_id, 0, 0, task_files(0, 4, tag="-failed"))
    aborted = await write_task(store, dest, job_id, 1, 0, task_files(1, 4, tag="-aborted"))
    await abort_task(aborted, store=store)
    expected = {}
    for task, attempt in ((0, 1), (1, 1), (2, 0)):
        files = task_files(task, 4)
        await commit_task(await write_task(store, dest, job_id, task, attempt, files), store=store)
        expected.update(files)
    del failed  # never committed: Spark reports no message for it
    summary = await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected
    assert summary.iostatistics.counters[S.COMMITTER_UNCOMMITTED_TASK_ATTEMPTS_DELETED] == 1
    assert not await exists(store, join(dest, "_temporary"))


async def test_concurrent_task_commits(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store)
    expected: dict[str, bytes] = {}

    async def task(number: int) -> None:
        files = task_files(number, 6, partitions=4)
        attempt = await write_task(store, dest, job_id, number, 0, files)
        await commit_task(attempt, store=store)
        expected.update(files)

    async with anyio.create_task_group() as group:
        for number in range(16):
            group.start_soon(task, number)
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected


async def test_last_attempt_to_commit_wins(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store)
    first = await write_task(store, dest, job_id, 0, 0, task_files(0, 3, tag="-a0"))
    second = await write_task(store, dest, job_id, 0, 1, task_files(0, 5, tag="-a1"))
    await commit_task(first, store=store)
    await commit_task(second, store=store)
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == task_files(0, 5, tag="-a1")


async def test_abort_job_before_commit(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    await store.write_bytes(join(dest, "existing.dat"), b"keep me")
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=4)
    await abort_job(dest, job_id, store=store)
    with pytest.raises(JobNotFound):  # finished: nothing of the job is left
        await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {"existing.dat": b"keep me"}
    assert not await exists(store, join(dest, "_temporary"))


async def test_continuity_late_attempt_adds_nothing(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store)
    await commit_task(await write_task(store, dest, job_id, 0, 0, task_files(0, 3)), store=store)
    late = await write_task(store, dest, job_id, 1, 0, task_files(1, 3, tag="-late"))
    first_summary = await commit_job(dest, job_id, store=store)
    with pytest.raises(CommitError, match="not active"):
        await commit_task(late, store=store)
    with pytest.raises(CommitError, match="not set up"):
        await setup_task(dest, job_id, 2, 0, store=store)
    again = await commit_job(dest, job_id, store=store)  # a re-run changes nothing
    assert again.timestamp == first_summary.timestamp
    assert await output(store, dest) == task_files(0, 3)


async def test_empty_job_writes_valid_result(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store)
    summary = await commit_job(dest, job_id, store=store)
    assert summary.success and summary.filenames == []
    assert await output(store, dest) == {}
    assert decode_success(await store.read_bytes(join(dest, "_SUCCESS"))).job_id == job_id


async def test_commit_exactly_the_named_manifests(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store)
    chosen = await write_task(store, dest, job_id, 0, 0, task_files(0, 2))
    other = await write_task(store, dest, job_id, 1, 0, task_files(1, 2))
    await commit_task(chosen, store=store)
    await commit_task(other, store=store)
    name = f"{chosen.task_id}-manifest.json"
    summary = await commit_job(dest, job_id, store=store, task_records=[name])
    assert await output(store, dest) == task_files(0, 2)
    assert summary.iostatistics.counters[S.COMMITTER_UNCOMMITTED_TASK_ATTEMPTS_DELETED] == 1


async def test_validate_output_and_report_dir(
    store_root: tuple[Store, str], tmp_path: object
) -> None:
    from aiocommit import CommitOptions

    store, root = store_root
    dest = join(root, "out")
    report_dir = str(tmp_path) + "/reports"
    job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=3)
    options = CommitOptions(
        validate_output=True, report_dir=report_dir, diagnostics_dir=str(tmp_path) + "/diag"
    )
    await commit_job(dest, job_id, store=store, options=options)
    report = decode_success(await anyio.Path(f"{report_dir}/summary-{job_id}.json").read_bytes())
    assert report.success
    assert report.iostatistics.counters[S.JOB_STAGE_CLEANUP] == 1
    assert report.iostatistics.counters[S.JOB_STAGE_VALIDATE_OUTPUT] == 1
    import os

    assert sorted(os.listdir(f"{tmp_path}/diag/{job_id}")) == [
        f"task_{job_id[4:]}_m_00000{n}-manifest.json" for n in range(2)
    ]
    assert await output(store, dest) == expected


async def test_skip_cleanup_keeps_temporary(store_root: tuple[Store, str]) -> None:
    from aiocommit import CommitOptions

    store, root = store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=2)
    await commit_job(dest, job_id, store=store, options=CommitOptions(cleanup_skip=True))
    assert await exists(store, join(dest, f"_temporary/{job_id}/00/manifests"))
    assert await output(store, dest) == expected


async def test_summary_is_hadoop_shaped(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=1, files_per_task=1)
    await commit_job(dest, job_id, store=store)
    raw = msgspec.json.decode(await store.read_bytes(join(dest, "_SUCCESS")))
    assert raw["name"] == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
    assert (
        raw["committer"]
        == "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter"
    )
    assert raw["jobIdSource"] == "JobID"
    assert set(raw["iostatistics"]) == {
        "counters",
        "gauges",
        "minimums",
        "maximums",
        "meanstatistics",
    }
    assert raw["iostatistics"]["meanstatistics"]["op_rename.mean"]["samples"] >= 1
    assert "state" not in raw and "description" not in raw
