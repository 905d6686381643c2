"""S3A task side, ``upload_pending``: a file becomes an uncompleted upload of its key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiocommit.committers.s3a.upload import upload_pending
from aiocommit.protocol import s3_statistics as S3
from aiocommit.stores.multipart import multipart_etag
from tests.helpers import exists
from tests.stages.s3a import DEST, s3a_job

PART = 5 * 1024 * 1024


async def test_parts_uploaded_nothing_visible() -> None:
    async with s3a_job() as job:
        commit = await job.upload("p=1/f.bin", bytes(PART), b"tail")
        assert commit.length == PART + 4 and len(commit.etags) == 2
        assert commit.destination_key == "out/p=1/f.bin"
        assert commit.uri == job.store.qualify(f"{DEST}/p=1/f.bin")
        assert not await exists(job.store, f"{DEST}/p=1/f.bin")
        assert await job.outstanding() == {f"{DEST}/p=1/f.bin"}
        counters = job.context.stats.snapshot().counters
        assert counters[S3.COMMITTER_COMMITS_CREATED] == 1
        assert counters[S3.COMMITTER_BYTES_UPLOADED] == PART + 4
        done = await job.store.complete_upload(f"{DEST}/p=1/f.bin", commit.upload_id, commit.etags)
        assert done.etag == multipart_etag(commit.etags)


async def test_an_empty_file_is_one_empty_part() -> None:
    async with s3a_job() as job:
        commit = await job.upload("empty.bin")
        assert (commit.length, len(commit.etags)) == (0, 1)


async def test_a_failure_aborts_the_upload() -> None:
    async def failing() -> AsyncIterator[bytes]:
        yield bytes(PART)
        raise OSError("the task's local file vanished")

    async with s3a_job() as job:
        with pytest.raises(OSError, match="vanished"):
            await upload_pending(job.context, job.mops, f"{DEST}/f.bin", failing(), task_id="t")
        assert await job.outstanding() == set()
        assert job.context.stats.snapshot().counters[S3.COMMITTER_COMMITS_ABORTED] == 1
