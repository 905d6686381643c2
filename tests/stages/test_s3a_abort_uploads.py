"""S3A abort: ``abort_pending_stage`` (named uploads; with ``revert``, their completed
files too) and ``abort_outstanding_uploads`` (whatever is left under a prefix)."""

from __future__ import annotations

import pytest

from aiocommit.committers.s3a.abort_uploads import abort_outstanding_uploads, abort_pending_stage
from aiocommit.committers.s3a.load_pendingsets import list_pendingset_names, load_pendingsets_stage
from aiocommit.protocol import s3_statistics as S3
from tests.helpers import output
from tests.stages.s3a import DEST, s3a_job

FILES = {"p=1/a.dat": b"a", "p=2/b.dat": b"bb", "c.dat": b"ccc"}


@pytest.mark.parametrize("revert", [False, True])
async def test_abort_named_uploads(revert: bool) -> None:
    async with s3a_job() as job:
        await job.store.write_bytes(f"{DEST}/theirs.dat", b"not the job's")
        await job.commit_task(0, FILES)
        names = await list_pendingset_names(job.context)
        loaded = await load_pendingsets_stage(job.context, job.mops, names)
        done = loaded.commits[0]
        await job.store.complete_upload("/" + done.destination_key, done.upload_id, done.etags)
        await abort_pending_stage(job.context, job.mops, loaded.commits, revert=revert)
        assert await job.outstanding() == set()
        left = await output(job.store, DEST)
        completed = {done.destination_key.removeprefix("out/"): FILES[done.destination_key[4:]]}
        assert left == {"theirs.dat": b"not the job's", **({} if revert else completed)}
        counters = job.context.stats.snapshot().counters
        assert counters[S3.COMMITTER_COMMITS_ABORTED] == 2
        assert counters.get(S3.COMMITTER_COMMITS_REVERTED, 0) == (1 if revert else 0)


async def test_abort_what_is_left_under_a_prefix() -> None:
    async with s3a_job() as job:
        for relative in FILES:
            await job.upload(relative, b"x")
        await job.store.create_upload("/elsewhere/f.dat")
        prefix = f"{DEST}/"
        young = await abort_outstanding_uploads(job.context, job.mops, prefix, older_than=3600)
        assert young == [] and len(await job.outstanding()) == 4
        dry = await abort_outstanding_uploads(
            job.context, job.mops, prefix, older_than=0, dry_run=True
        )
        assert len(dry) == 3 and len(await job.outstanding()) == 4
        aborted = await abort_outstanding_uploads(job.context, job.mops, prefix, older_than=0)
        assert len(aborted) == 3
        assert await job.outstanding() == {"/elsewhere/f.dat"}
        assert job.context.stats.snapshot().counters[S3.COMMITTER_PENDING_UPLOADS_ABORTED] == 3
