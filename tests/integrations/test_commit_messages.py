"""Manifests carried by engine commit messages (``WorkerAttempt.commit_message``): the
task commit saves no manifest file, the job commit takes the manifests from the
messages, checks them as it checks files, and a re-run after a kill finishes from the
commit plan."""

from __future__ import annotations

import multiprocessing
import os
import pickle
from multiprocessing.connection import Connection
from pathlib import Path

import anyio
import pytest

from aiocommit.client.client import Client
from aiocommit.errors import ManifestError
from aiocommit.integrations.attempts import AttemptHandle, EngineJob, TaskCommitMessage
from aiocommit.protocol.layout import ATTEMPT_MANIFEST_SUFFIX, JobLayout
from tests.integrations.helpers import committed_files, destination


def _write(handle: AttemptHandle, name: str, data: bytes) -> TaskCommitMessage:
    """What a Ray or Dask write task does: open a new attempt, write, commit."""
    with handle.retry().open() as attempt:
        attempt.write_bytes(name, data)
        return attempt.commit_message()


def _saved_manifests(dest: str, job: EngineJob) -> list[str]:
    """The per-attempt manifest files in the job's ``manifests/`` (local destinations)."""
    manifests = JobLayout(dest, job.job_id, 0).manifests_dir
    return [name for name in os.listdir(manifests) if name.endswith(ATTEMPT_MANIFEST_SUFFIX)]


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_a_commit_message_carries_the_manifest_and_the_job_commits_it_once(
    kind: str, tmp_path: Path
) -> None:
    dest = destination(kind, tmp_path)
    job = EngineJob.setup(dest)
    first = _write(job.handle(0), "p=0/a.bin", b"a")
    lost = _write(job.handle(1), "p=1/b.bin", b"lost")  # an execution whose result was lost
    retried = _write(job.handle(1), "p=1/b.bin", b"retried")
    assert first.manifest is not None and lost.name != retried.name
    assert pickle.loads(pickle.dumps(first)) == first
    if kind == "local":
        assert _saved_manifests(dest, job) == []
    job.commit([first, retried])
    assert committed_files(dest).keys() == {"_SUCCESS", "p=0/a.bin", "p=1/b.bin"}
    assert committed_files(dest)["p=1/b.bin"] == b"retried"


def _exit_after_writing(handle: AttemptHandle, out: Connection) -> None:
    """A forked worker: write, then commit unless the test hook exits first."""
    out.send(_write(handle, "part-0.bin", b"from the attempt that committed"))


def test_a_killed_first_attempt_still_commits_exactly_once(tmp_path: Path) -> None:
    dest = str(tmp_path / "out")
    marks = tmp_path / "marks"
    marks.mkdir()
    job = EngineJob.setup(dest, options={"aiocommit.test.exitOnceDir": str(marks)})
    fork = multiprocessing.get_context("fork")
    messages = []
    for _ in range(2):  # the first execution dies after writing, before its commit
        receive, send = fork.Pipe(duplex=False)
        worker = fork.Process(target=_exit_after_writing, args=(job.handle(0), send))
        worker.start()
        worker.join(30)
        if worker.exitcode == 0:
            messages.append(receive.recv())
        else:
            assert worker.exitcode == 17
    assert len(messages) == 1
    job.commit(messages)
    assert committed_files(dest) == {
        "_SUCCESS": committed_files(dest)["_SUCCESS"],
        "part-0.bin": b"from the attempt that committed",
    }


def _one_line(error: pytest.ExceptionInfo[ManifestError]) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


def test_a_message_with_another_jobs_manifest_is_refused(tmp_path: Path) -> None:
    dest = str(tmp_path / "out")
    ours, theirs = EngineJob.setup(dest, mode="append"), EngineJob.setup(dest, mode="append")
    mine = _write(ours.handle(0), "mine.bin", b"mine")
    foreign = _write(theirs.handle(1), "theirs.bin", b"theirs")
    with pytest.raises(ManifestError) as caught:
        ours.commit([mine, foreign])
    assert f"belongs to job {theirs.job_id!r}" in _one_line(caught)
    assert not os.path.exists(os.path.join(dest, "mine.bin"))
    ours.abort()
    theirs.commit([foreign])
    assert sorted(committed_files(dest)) == ["_SUCCESS", "theirs.bin"]


def test_a_message_naming_another_attempts_files_is_refused(tmp_path: Path) -> None:
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest)
    with job.handle(0).open() as owner:
        owner.write_bytes("mine.bin", b"mine")
        owners_file = owner.placed()["mine.bin"]
        owners = owner.commit_message()
    with job.handle(1).open() as thief:
        thief._placed["stolen.bin"] = owners_file  # lists the other attempt's file
        thiefs = thief.commit_message()
    with pytest.raises(ManifestError) as caught:
        job.commit([owners, thiefs])
    assert "is not a file of task attempt" in _one_line(caught)
    swapped = TaskCommitMessage(thiefs.name, owners.manifest)  # its name, another's manifest
    with pytest.raises(ManifestError) as caught:
        job.commit([swapped])
    assert "not its own" in _one_line(caught)
    assert [name for name in committed_files(dest) if not name.startswith("_temporary/")] == []
    job.abort()
    assert committed_files(dest) == {}


def _commit_and_die_after_one_rename(job: EngineJob, messages: list[TaskCommitMessage]) -> None:
    """A forked driver whose process is killed after the job commit's first rename of
    an output file."""
    from aiocommit.stores import local

    real = local._move
    renamed = []

    def move_then_die(source: str, dest: str, *args: object) -> None:
        real(source, dest, *args)  # type: ignore[arg-type]
        if os.path.basename(dest).startswith("part-"):  # an output file, not a record
            renamed.append(dest)
            os._exit(9)

    local._move = move_then_die  # type: ignore[assignment]
    job.commit(messages)


@pytest.mark.parametrize("rerun_with", ["messages", "nothing"])
def test_a_job_commit_rerun_after_the_driver_died_mid_commit_finishes(
    rerun_with: str, tmp_path: Path
) -> None:
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest)
    messages = [_write(job.handle(task), f"part-{task}.bin", bytes([task])) for task in range(3)]
    driver = multiprocessing.get_context("fork").Process(
        target=_commit_and_die_after_one_rename, args=(job, messages)
    )
    driver.start()
    driver.join(30)
    assert driver.exitcode == 9
    assert sum(name.startswith("part-") for name in committed_files(dest)) == 1
    if rerun_with == "messages":
        job.commit(messages)
    else:  # the CLI's re-run: the plan names the carried manifests, its copies hold them

        async def rerun() -> None:
            async with Client(dest) as client:
                await client.job(job.job_id).commit()

        anyio.run(rerun)
    assert committed_files(dest) == {
        "_SUCCESS": committed_files(dest)["_SUCCESS"],
        **{f"part-{task}.bin": bytes([task]) for task in range(3)},
    }
    assert not os.path.exists(os.path.join(dest, "_temporary"))


def test_a_commit_without_the_messages_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """The driver died before its job commit: the manifests died with it, and a commit
    that lists the job's manifests would find none (an empty output replacing the old)."""
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "old.bin").write_bytes(b"old")
    job = EngineJob.setup(str(dest), mode="overwrite")
    _write(job.handle(0), "new.bin", b"new")

    async def commit_without_records() -> None:
        async with Client(str(dest)) as client:
            await client.job(job.job_id).commit()

    with pytest.raises(ManifestError) as caught:
        anyio.run(commit_without_records)
    assert "travel in its engine's commit messages" in _one_line(caught)
    assert (dest / "old.bin").read_bytes() == b"old" and not (dest / "new.bin").exists()
    job.abort()
    assert committed_files(str(dest)) == {"old.bin": b"old"}


@pytest.mark.parametrize("limit", ["bytes", "files"])
def test_a_large_manifest_is_saved_and_the_message_names_it(
    limit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiocommit.integrations import attempts

    monkeypatch.setattr(attempts, f"MESSAGE_MANIFEST_{limit.upper()}", 0)  # one file is over
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest)
    large = _write(job.handle(0), "large.bin", b"a")
    assert large.manifest is None and _saved_manifests(dest, job) == [large.name]
    monkeypatch.undo()
    small = _write(job.handle(1), "small.bin", b"b")
    assert small.manifest is not None
    job.commit([large, small])
    assert committed_files(dest).keys() == {"_SUCCESS", "large.bin", "small.bin"}
