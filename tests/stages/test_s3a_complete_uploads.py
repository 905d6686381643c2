"""S3A job side, ``complete_uploads_stage``: every upload completed into its key; one an
earlier run or a lost response completed counts as done."""

from __future__ import annotations

from aiocommit.committers.s3a.complete_uploads import complete_uploads_stage
from aiocommit.committers.s3a.load_pendingsets import list_pendingset_names, load_pendingsets_stage
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from tests.helpers import output
from tests.stages.s3a import DEST, s3a_job

FILES = {"p=1/a.dat": b"a", "p=2/b.dat": b"bb", "c.dat": b"ccc"}


async def test_completes_every_upload() -> None:
    async with s3a_job() as job:
        await job.commit_task(0, FILES)
        names = await list_pendingset_names(job.context)
        loaded = await load_pendingsets_stage(job.context, job.mops, names)
        await complete_uploads_stage(job.context, job.mops, loaded)
        assert await output(job.store, DEST) == FILES
        assert await job.outstanding() == set()
        counters = job.context.stats.snapshot().counters
        assert counters[S3.COMMITTER_COMMITS_COMPLETED] == 3
        assert counters[S.COMMITTER_BYTES_COMMITTED] == 6


async def test_an_upload_completed_behind_its_back_is_recovered() -> None:
    """The memory store answers a second complete NoSuchUpload, as S3 documents: the stage
    recognises its file by the etag the parts complete into."""
    async with s3a_job() as job:
        await job.commit_task(0, FILES)
        names = await list_pendingset_names(job.context)
        loaded = await load_pendingsets_stage(job.context, job.mops, names)
        first = loaded.commits[0]
        await job.store.complete_upload("/" + first.destination_key, first.upload_id, first.etags)
        await complete_uploads_stage(job.context, job.mops, loaded)  # loaded before: not known
        assert await output(job.store, DEST) == FILES
        assert job.context.stats.snapshot().counters[S3.COMMITTER_COMMITS_RECOVERED] == 1
