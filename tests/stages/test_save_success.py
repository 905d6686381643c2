"""``save_success_stage``, ``read_success`` and ``save_report``."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocommit.committers.common.save_success import read_success, save_report, save_success_stage
from aiocommit.options import CommitOptions
from aiocommit.protocol.success import SuccessData, decode_success
from aiocommit.stores.base import join
from aiocommit.stores.memory import MemoryStore
from tests.helpers import exists
from tests.stages.conftest import Job


async def test_success_is_published_whole_over_an_older_one(job: Job) -> None:
    await job.store.write_bytes(join(job.dest, "_SUCCESS"), b"an older job's")
    async with job.context() as context:
        assert await read_success(context) is None, "not this job's"
        summary = SuccessData.now(job.job_id, "JobID")
        summary.filenames = ["file:///x"]
        await save_success_stage(context, summary)
        found = await read_success(context)
        assert found is not None and found.job_id == job.job_id and found.success
        assert not await exists(job.store, context.layout.success_temp_path)
    written = decode_success(await job.store.read_bytes(join(job.dest, "_SUCCESS")))
    assert written.filenames == ["file:///x"]


async def test_another_jobs_success_is_not_this_jobs(job: Job) -> None:
    async with job.context() as context:
        await save_success_stage(context, SuccessData.now("job_202001010000_0001", "JobID"))
        assert await read_success(context) is None


async def test_report_goes_to_the_report_directory(job: Job) -> None:
    reports = MemoryStore(f"reports-{id(job)}")
    options = CommitOptions(report_dir=f"memory://{reports.name}/reports")
    async with job.context(options) as context:
        await save_report(context, SuccessData.now(job.job_id, "JobID"))
    report = await reports.read_bytes(f"/reports/summary-{job.job_id}.json")
    assert decode_success(report).job_id == job.job_id


async def test_a_report_that_cannot_be_written_is_logged_not_raised(
    job: Job, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    options = CommitOptions(report_dir=str(reports))  # passes the check when built
    reports.write_text("a file where the directory was to be")
    async with job.context(options) as context:
        await save_report(context, SuccessData.now(job.job_id, "JobID"))
    assert f"could not write the summary report to {reports}: " in caplog.text
    # one line, no traceback
    assert [r.exc_info for r in caplog.records if "summary report" in r.getMessage()] == [None]
