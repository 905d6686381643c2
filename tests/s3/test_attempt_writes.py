"""A task writes through its attempt whatever the committer: ``write_bytes``, ``open``
(streaming) and ``write_file``, on S3 (moto) with the staging and magic committers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from aiocommit import (
    CommitOptions,
    commit_job,
    commit_task,
    setup_job,
    setup_task,
)
from aiocommit.stores.base import join
from aiocommit.stores.s3 import S3Store
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import output
from tests.s3.helpers import outstanding

T = TypeVar("T")
PART = 5 * 1024 * 1024


class PartCounter(StoreWrapper):
    """Counts the parts uploaded through it."""

    parts = 0

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        result = await call()
        if operation == "upload_part":
            self.parts += 1
        return result


@pytest.mark.parametrize("committer", ["staging", "magic"])
async def test_every_way_of_writing_lands_at_job_commit(
    s3_root: tuple[S3Store, str], tmp_path: Path, committer: str
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    options = CommitOptions(committer=committer)
    job_id = await setup_job(dest, store=store, options=options)
    attempt = await setup_task(dest, job_id, 0, store=store)
    assert attempt.committer_name == committer
    local = tmp_path / "local.bin"
    local.write_bytes(b"from a local file")
    await attempt.write_bytes("k=1/a.bin", b"whole", store=store)
    async with attempt.open("k=2/b.bin", store=store) as file:
        await file.write(b"str")
        await file.write(b"eamed")
    await attempt.write_file("c.bin", str(local), store=store)
    visible = await output(store, dest)
    assert not [p for p in visible if not p.startswith("__magic/")], "visible before commit"
    await commit_task(attempt, store=store)
    summary = await commit_job(dest, job_id, store=store)
    assert summary.success
    assert await output(store, dest) == {
        "k=1/a.bin": b"whole",
        "k=2/b.bin": b"streamed",
        "c.bin": b"from a local file",
    }
    assert await outstanding(store, root) == []


async def test_magic_open_uploads_parts_as_they_fill(s3_root: tuple[S3Store, str]) -> None:
    """A magic file streams: each full part is uploaded while the task is still writing,
    not when the file closes."""
    store, root = s3_root
    dest = join(root, "out")
    counting = PartCounter(store)
    # the committer is CommitOptions' choice (memory has atomic rename: manifest otherwise)
    options = CommitOptions(committer="magic", part_size=PART)
    job_id = await setup_job(dest, store=store, options=options)
    attempt = await setup_task(dest, job_id, 0, store=store)
    async with attempt.open("big.bin", store=counting) as file:
        await file.write(b"a" * PART)
        await file.write(b"b" * PART)
        assert counting.parts >= 1, "no part uploaded before the file closed"
        await file.write(b"c" * 10)
    assert counting.parts == 3
    await commit_task(attempt, store=store)
    await commit_job(dest, job_id, store=store)
    found = await output(store, dest)
    assert found == {"big.bin": b"a" * PART + b"b" * PART + b"c" * 10}


@pytest.mark.parametrize("committer", ["staging", "magic"])
async def test_a_failed_open_block_leaves_nothing(
    s3_root: tuple[S3Store, str], committer: str
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=CommitOptions(committer=committer))
    attempt = await setup_task(dest, job_id, 0, store=store)

    async def write_and_die() -> None:
        async with attempt.open("dead.bin", store=store) as file:
            await file.write(b"half")
            raise RuntimeError("writer died")

    with pytest.raises(RuntimeError, match="writer died"):
        await write_and_die()
    await attempt.write_bytes("alive.bin", b"ok", store=store)
    expected = [] if committer == "staging" else [f"{dest}/alive.bin"]
    assert await outstanding(store, root) == expected
    await commit_task(attempt, store=store)
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {"alive.bin": b"ok"}
    assert await outstanding(store, root) == []
