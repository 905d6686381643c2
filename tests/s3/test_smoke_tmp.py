from pathlib import Path

from aiocommit.engine.zero_rename import commit_s3_job, setup_s3_job
from aiocommit.stores.base import join
from aiocommit.stores.s3 import S3Store
from tests.helpers import output
from tests.s3.helpers import outstanding, run_s3_tasks


async def test_smoke(s3_root: tuple[S3Store, str], tmp_path: Path) -> None:
    store, root = s3_root
    for committer in ("staging", "magic"):
        dest = join(root, committer)
        job = await setup_s3_job(dest, store=store)
        expected = await run_s3_tasks(store, dest, job, 2, 3, tmp_path, committer=committer)
        assert await output(store, dest, ignore=("_SUCCESS",)) == {} or committer == "magic"
        summary = await commit_s3_job(dest, job, store=store)
        assert await output(store, dest) == expected, committer
        assert await outstanding(store, root) == []
        print(summary.committer, summary.iostatistics.counters)
