"""Attempts that travel (``aiocommit.integrations.attempts``): a picklable handle, opened
in another thread or process, writes through every committer, and the job commits
exactly the task records it is given."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import threading
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from aiocommit.errors import CommitError, InvalidInput, ManifestError
from aiocommit.integrations.attempts import AttemptHandle, EngineJob, InjectedTaskFailure
from aiocommit_testing.s3_emulator import create_bucket
from tests.helpers import counted_stats_and_mkdirs
from tests.integrations.helpers import committed_files, destination, s3_files

SIZE = 3 * 1024 * 1024  # several buffered writes of the file object


def _write_task(handle: AttemptHandle, tmp: str) -> str:
    """What a worker does: open the attempt, write three ways, commit."""
    local = os.path.join(tmp, f"local-{handle.task}.bin")
    Path(local).write_bytes(b"from a local file")
    with handle.retry().open() as attempt:
        attempt.write_bytes(f"t{handle.task}/small.txt", b"small")
        with attempt.open(f"t{handle.task}/big.bin") as file:
            for _ in range(3):
                file.write(b"x" * (SIZE // 3))
        attempt.write_file(f"t{handle.task}/copied.bin", local)
        return attempt.commit()


def test_a_handle_pickles_and_holds_no_credentials(tmp_path: Path) -> None:
    job = EngineJob.setup(str(tmp_path / "out"), mode="append")
    handle = job.handle(7)
    again = pickle.loads(pickle.dumps(handle))
    assert again == handle
    assert again.committer == "manifest" and again.job_id == job.job_id
    assert handle.retry().attempt != handle.attempt
    assert not any("secret" in key or "access.key" in key for key in handle.options)
    with pytest.raises(InvalidInput, match="credentials never go in options"):
        EngineJob.setup(str(tmp_path / "other"), options={"fs.s3a.secret.key": "s"})
    job.abort()


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_committed_records_only_land_exactly_once(kind: str, tmp_path: Path) -> None:
    dest = destination(kind, tmp_path)
    job = EngineJob.setup(dest, mode="error")
    first = _write_task(job.handle(0), str(tmp_path))
    lost = _write_task(job.handle(1), str(tmp_path))  # an execution whose result was lost
    retried = _write_task(job.handle(1), str(tmp_path))
    assert lost != retried
    job.commit([first, retried])
    files = committed_files(dest)
    assert sorted(files) == [
        "_SUCCESS",
        *(f"t{t}/{n}" for t in (0, 1) for n in ("big.bin", "copied.bin", "small.txt")),
    ]
    assert files["t1/big.bin"] == b"x" * SIZE
    assert files["t0/copied.bin"] == b"from a local file"


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_an_attempt_that_raises_is_aborted_and_never_committed(kind: str, tmp_path: Path) -> None:
    dest = destination(kind, tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    job = EngineJob.setup(dest, mode="append", options={"aiocommit.test.failOnceDir": marks})
    with pytest.raises(InjectedTaskFailure):
        _write_task(job.handle(0), str(tmp_path))
    record = _write_task(job.handle(0), str(tmp_path))  # the retry
    job.commit([record])
    assert sorted(committed_files(dest)) == [
        "_SUCCESS",
        "t0/big.bin",
        "t0/copied.bin",
        "t0/small.txt",
    ]


def test_a_job_aborted_leaves_nothing_and_old_output_untouched(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "old.txt").write_bytes(b"old")
    job = EngineJob.setup(str(dest), mode="overwrite")
    _write_task(job.handle(0), str(tmp_path))
    job.abort()
    assert committed_files(str(dest)) == {"old.txt": b"old"}


def test_a_worker_process_opens_the_handle(tmp_path: Path) -> None:
    """The handle crosses a process boundary (spawn: nothing inherited but the pickle)."""
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest, mode="error")
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        records = pool.starmap(_write_task, [(job.handle(t), str(tmp_path)) for t in (0, 1)])
    job.commit(records)
    assert len(committed_files(dest)) == 7


@pytest.mark.parametrize("committer", ["staging", "magic"])
def test_s3_committers_write_through_a_handle(
    s3_endpoint: str, tmp_path: Path, committer: str
) -> None:
    bucket = f"handle-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    anyio.run(create_bucket, s3_endpoint, bucket)
    settings = {"fs.s3a.endpoint": s3_endpoint, "fs.s3a.path.style.access": "true"}
    dest = f"s3a://{bucket}/out"
    job = EngineJob.setup(dest, mode="error", options={**settings, "committer": committer})
    assert job.committer == committer
    records = [_write_task(job.handle(t), str(tmp_path)) for t in (0, 1)]
    _write_task(job.handle(1), str(tmp_path))  # a retry whose record is never committed
    job.commit(records)

    files = s3_files(s3_endpoint, bucket)
    assert sorted(files) == [
        "_SUCCESS",
        *(f"t{t}/{n}" for t in (0, 1) for n in ("big.bin", "copied.bin", "small.txt")),
    ]
    assert files["t0/big.bin"] == b"x" * SIZE


def test_a_process_reads_a_jobs_committer_record_once(tmp_path: Path) -> None:
    """The next task of a job in the same process names the committer it already has."""
    from aiocommit.errors import AiocommitError
    from aiocommit.integrations import attempts

    dest = tmp_path / "out"
    job = EngineJob.setup(str(dest), mode="error")
    first = _write_task(job.handle(0), str(tmp_path))
    records = list(dest.glob("_temporary/*/*/committer.json"))
    assert len(records) == 1
    saved = records[0].read_bytes()
    records[0].write_bytes(b"not a record")
    second = _write_task(job.handle(1), str(tmp_path))  # the record is not read again
    attempts._job_committers.clear()
    with pytest.raises(AiocommitError):
        _write_task(job.handle(2), str(tmp_path))
    records[0].write_bytes(saved)
    job.commit([first, second])
    assert len(committed_files(str(dest))) == 7


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_a_process_keeps_one_store_client_per_destination(kind: str, tmp_path: Path) -> None:
    """A worker's attempts of one destination share one open client (closed only when the
    process keeps too many); a memory store's client, whose data lives in this process,
    is closed with its attempt."""
    from aiocommit.integrations import attempts
    from aiocommit.stores.local import LocalStore

    dest = destination(kind, tmp_path)
    job = EngineJob.setup(dest, mode="error")
    records = []
    clients = []
    for task in range(2):
        with job.handle(task).open() as attempt:
            attempt.write_bytes(f"part-{task}.txt", b"x")
            records.append(attempt.commit())
            clients.append(attempt._client)
    if kind == "local":
        assert clients[0] is clients[1]
        assert not clients[0].closed
        store = clients[0].store
        assert isinstance(store, LocalStore) and store.inline_metadata
        # another destination's clients push the oldest out (dropped, not closed: an
        # attempt of another thread may still write through it)
        for other in range(attempts.KEPT_CLIENTS):
            other_job = EngineJob.setup(str(tmp_path / f"other-{other}"), mode="error")
            with other_job.handle(0).open() as attempt:
                attempt.commit()
        assert all(kept is not clients[0] for kept in attempts._worker_clients.values())
        assert len(attempts._worker_clients) <= attempts.KEPT_CLIENTS
    else:
        assert clients[0] is not clients[1]
        assert clients[0].closed and clients[1].closed
    job.commit(records)
    assert sorted(committed_files(dest)) == ["_SUCCESS", "part-0.txt", "part-1.txt"]


#: the clients the test's process kept, seen again by its forked child
_parent_clients: list[object] = []


def _forked_task(handle: AttemptHandle, tmp: str) -> tuple[str, bool]:
    """``_write_task`` in a forked child: its record, and whether it kept none of the
    parent's clients."""
    from aiocommit.integrations import attempts

    record = _write_task(handle, tmp)
    kept = list(attempts._worker_clients.values())
    return record, bool(kept) and not any(c is p for c in kept for p in _parent_clients)


def test_a_forked_worker_opens_its_own_store_client(tmp_path: Path) -> None:
    """A worker forked after its parent wrote through a handle (as Spark's Python workers
    fork from their daemon) does not use the parent's kept client, which is bound to the
    parent's task loop."""
    from aiocommit.integrations import attempts

    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest, mode="error")
    first = _write_task(job.handle(0), str(tmp_path))
    _parent_clients[:] = attempts._worker_clients.values()
    assert _parent_clients
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        second, own = pool.apply(_forked_task, (job.handle(1), str(tmp_path)))
    _parent_clients.clear()
    assert own
    job.commit([first, second])
    assert len(committed_files(dest)) == 7


def _loop_thread(attempt: object) -> int:
    """The thread the attempt's steps run in."""

    async def where() -> int:
        return threading.get_ident()

    return attempt._call(where)  # type: ignore[attr-defined, no-any-return]


def test_a_local_attempt_runs_its_steps_in_the_callers_thread(tmp_path: Path) -> None:
    """A local manifest attempt is set up, written and committed on its caller's thread
    (no hop to the task loop's thread and back per step), from any thread, each with its
    own loop and client; the job commits what both threads wrote."""
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest, mode="error")
    seen: dict[int, tuple[int, int, object, str]] = {}

    def task(number: int) -> None:
        with job.handle(number).open() as attempt:
            attempt.write_bytes(f"part-{number}.txt", b"x")
            seen[number] = (
                threading.get_ident(),
                _loop_thread(attempt),
                attempt._client,
                attempt.commit(),
            )

    threads = [threading.Thread(target=task, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for caller, ran_in, _, _ in seen.values():
        assert ran_in == caller
    assert seen[0][2] is not seen[1][2]  # a client per thread's loop
    job.commit([record for *_, record in seen.values()])
    assert sorted(committed_files(dest)) == ["_SUCCESS", "part-0.txt", "part-1.txt"]


def test_other_attempts_and_callers_in_a_loop_run_on_the_task_loop(tmp_path: Path) -> None:
    """A memory:// attempt, or any attempt opened from a thread that runs an event loop,
    runs its steps on the task loop's thread."""
    memory = destination("memory", tmp_path)
    handle = EngineJob.setup(memory, mode="error").handle(0)
    assert not handle.runs_in_caller_thread()
    with handle.open() as attempt:
        assert _loop_thread(attempt) != threading.get_ident()
        attempt.commit()

    local = EngineJob.setup(str(tmp_path / "out"), mode="error").handle(0)
    assert local.runs_in_caller_thread()

    async def in_a_loop() -> bool:
        return local.runs_in_caller_thread()

    assert not asyncio.run(in_a_loop())


def test_threads_beyond_the_kept_clients_commit_and_keep_at_most_that_many(
    tmp_path: Path,
) -> None:
    """More threads than ``KEPT_CLIENTS`` write attempts at once, each on its own loop:
    every attempt commits, and the process keeps no more clients than its bound."""
    from aiocommit.integrations import attempts

    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest, mode="error")
    threads = attempts.KEPT_CLIENTS + 4
    start = threading.Barrier(threads)
    records: list[str] = []
    errors: list[BaseException] = []

    def task(number: int) -> None:
        try:
            start.wait()
            for round_number in range(3):
                with job.handle(f"{number}-{round_number}").open() as attempt:
                    attempt.write_bytes(f"part-{number}-{round_number}.txt", b"x")
                    records.append(attempt.commit())
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    workers = [threading.Thread(target=task, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors
    assert len(attempts._worker_clients) <= attempts.KEPT_CLIENTS
    job.commit(records)
    assert len(committed_files(dest)) == 3 * threads + 1


def test_a_local_job_commit_reads_its_manifests_with_no_thread_hop_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's job commit on the local filesystem reads its manifests (one per task)
    on its event loop: its worker-thread calls do not grow with its tasks."""
    dest = str(tmp_path / "out")
    hops: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counting(function: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(function, "__qualname__", repr(function)))
        return await run_sync(function, *args, **kwargs)

    counted = {}
    for tasks in (2, 12):
        job = EngineJob.setup(f"{dest}-{tasks}", mode="error")
        records = []
        for task in range(tasks):
            with job.handle(task).open() as attempt:
                attempt.write_bytes(f"part-{task}.txt", b"x")
                records.append(attempt.commit())
        monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
        hops.clear()
        summary = job.commit(records)
        monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
        assert len(summary.filenames) == tasks
        counted[tasks] = len(hops)
    # ten more tasks: at most one more hop (the commit plan's copy of the manifests, once
    # it outgrows an inline write), not one per manifest
    assert counted[12] - counted[2] <= 1, f"thread hops grow with the tasks: {counted}"


def test_a_local_task_attempt_stats_only_what_its_answer_needs(tmp_path: Path) -> None:
    """One local attempt, opened, written through ``open`` and committed, stats a path
    for what its answer depends on only: that the job is active, at set-up and at commit,
    and its manifest once in place (the status its write returns); the size of the file
    it wrote comes from an ``lstat`` (a link is refused); it makes no directory (the
    first attempt of the job in the process made the shared attempts directory its
    files go to)."""
    job = EngineJob.setup(str(tmp_path / "out"))
    records = []
    for task in range(2):  # the first one warms the process's caches up
        with counted_stats_and_mkdirs() as calls, job.handle(task).open() as attempt:
            with attempt.open(f"part-{task}.bin") as file:
                file.write(b"data")
            records.append(attempt.commit())
    stats = [path for call, path in calls if call == "stat"]
    assert len(stats) == 3, calls
    assert [call for call, _ in calls].count("mkdir") == 0, calls
    job.commit(records)
    assert sorted(committed_files(str(tmp_path / "out"))) == [
        "_SUCCESS",
        "part-0.bin",
        "part-1.bin",
    ]


@pytest.mark.parametrize("target", ["file", "directory"])
def test_a_symbolic_link_in_a_local_attempt_is_refused_not_followed(
    target: str, tmp_path: Path
) -> None:
    """A file of the attempt replaced by a link (a tool writing below ``local_dir``) is
    refused at task commit, never committed as its target nor skipped; nothing lands."""
    outside = tmp_path / "outside"
    if target == "file":
        outside.write_bytes(b"not the task's")
    else:
        outside.mkdir()
        (outside / "x.bin").write_bytes(b"not the task's")
    dest = tmp_path / "out"
    job = EngineJob.setup(str(dest))
    with job.handle(0).open() as attempt:
        with attempt.open("part-0.bin") as file:
            file.write(b"data")
        assert attempt.local_dir is not None
        (local,) = attempt.placed().values()
        path = os.path.join(attempt.local_dir, local)
        os.unlink(path)
        os.symlink(outside, path)
        with pytest.raises(CommitError, match="symbolic link") as raised:
            attempt.commit()
    assert local in str(raised.value)
    job.abort()
    assert not dest.exists() or committed_files(str(dest)) == {}
    assert outside.exists()


def test_a_jobs_options_are_parsed_once_per_process(tmp_path: Path) -> None:
    """Each of a job's attempts (and its job commit) opens with the job's options: parsed
    from the handle's record once, not per attempt."""
    job = EngineJob.setup(str(tmp_path / "out"), options={"fs.s3a.endpoint": "http://e:1"})
    first, second = job.handle(0), job.handle(1).retry()
    assert first.commit_options() is second.commit_options()
    options = first.commit_options()
    assert options.store.endpoint == "http://e:1"
    assert options.committer.name == job.committer == "manifest"
    other = EngineJob.setup(str(tmp_path / "other"), options={"fs.s3a.endpoint": "http://f:2"})
    assert other.handle(0).commit_options().store.endpoint == "http://f:2"
    job.abort()
    other.abort()


def test_local_attempts_share_a_directory_and_abort_only_their_own_files(
    tmp_path: Path,
) -> None:
    """Local attempts make no directory each: their files go to the job's shared
    attempts directory under names of their own; an attempt that fails removes only its
    own files, and the job commits exactly the committed attempts' files."""
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest)
    with job.handle(0).open() as first:
        first.write_bytes("a.bin", b"first")
        with first.open("p=1/x.bin") as file:
            file.write(b"nested")
        first_record = first.commit()
    shared = os.path.dirname(str(first.local_dir) + "/")
    kept = sorted(os.listdir(shared))
    assert len(kept) == 2

    def fail() -> None:
        with job.handle(1).open() as failing:
            failing.write_bytes("b.bin", b"lost")
            raise InjectedTaskFailure("fails on purpose")

    with pytest.raises(InjectedTaskFailure):
        fail()
    assert sorted(os.listdir(shared)) == kept
    with job.handle(1).open() as retried:
        src = tmp_path / "made-by-a-tool.bin"
        src.write_bytes(b"retried")
        retried.write_file("b.bin", str(src))
        second_record = retried.commit()
    assert os.listdir(os.path.dirname(shared)) == ["shared-attempts"]
    job.commit([first_record, second_record])
    assert committed_files(dest) == {
        "_SUCCESS": committed_files(dest)["_SUCCESS"],
        "a.bin": b"first",
        "p=1/x.bin": b"nested",
        "b.bin": b"retried",
    }
    assert not os.path.exists(os.path.join(dest, "_temporary"))


def test_a_shared_directory_manifest_may_not_name_another_attempts_file(
    tmp_path: Path,
) -> None:
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest)
    with job.handle(0).open() as owner:
        owner.write_bytes("mine.bin", b"mine")
        owner_record = owner.commit()
        owners_file = owner.placed()["mine.bin"]
    with job.handle(1).open() as thief:
        thief._placed["stolen.bin"] = owners_file  # lists the other attempt's file
        thief_record = thief.commit()
    with pytest.raises(ManifestError, match="is not a file of task attempt"):
        job.commit([owner_record, thief_record])
    visible = [name for name in committed_files(dest) if not name.startswith("_temporary/")]
    assert visible == []
    job.abort()
    assert committed_files(dest) == {}


def test_a_job_commit_never_deletes_the_shared_directory_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename stage deletes each finished manifest's attempt directory while other
    chunks still rename: never the shared one, which holds their files too."""
    from aiocommit.committers.manifest import rename_workers

    monkeypatch.setattr(rename_workers, "CHUNK_FILES", 2)
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest, options={"concurrency": 2})  # one chunk at a time
    records = []
    for task in range(6):
        with job.handle(task).open() as attempt:
            attempt.write_bytes(f"part-{task}.bin", bytes([task]) * 3)
            records.append(attempt.commit())
    job.commit(records)
    files = committed_files(dest)
    assert {name: data for name, data in files.items() if name != "_SUCCESS"} == {
        f"part-{task}.bin": bytes([task]) * 3 for task in range(6)
    }


def _forked_shared_dir_checks(handle: AttemptHandle) -> tuple[str, int]:
    """In a forked worker: open ``handle``, counting the directories made (``makedirs``)."""
    made: list[str] = []
    real = os.makedirs

    def counted(path: Any, *args: Any, **kwargs: Any) -> None:
        made.append(str(path))
        real(path, *args, **kwargs)

    os.makedirs = counted  # type: ignore[assignment]
    try:
        with handle.open() as attempt:
            attempt.write_bytes("child.bin", b"child")
            return attempt.commit(), len(made)
    finally:
        os.makedirs = real


def test_a_forked_worker_checks_the_shared_directory_itself(tmp_path: Path) -> None:
    """The process remembers the shared attempts directory it made; a forked child does
    not take its parent's word for it (the parent's job may have been cleaned up since)."""
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest)
    with job.handle(0).open() as attempt:
        attempt.write_bytes("parent.bin", b"parent")
        first = attempt.commit()
    with counted_stats_and_mkdirs() as calls, job.handle(1).open() as attempt:
        attempt.write_bytes("again.bin", b"again")
        second = attempt.commit()
    assert [call for call, _ in calls].count("mkdir") == 0, calls
    with multiprocessing.get_context("fork").Pool(1) as pool:
        third, made = pool.apply(_forked_shared_dir_checks, (job.handle(2),))
    assert made == 1
    job.commit([first, second, third])
    assert sorted(committed_files(dest)) == ["_SUCCESS", "again.bin", "child.bin", "parent.bin"]
