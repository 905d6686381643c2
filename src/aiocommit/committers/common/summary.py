"""What every job commit reports, whichever committer ran it: the ``_SUCCESS`` summary's
diagnostics, the job's combined statistics and the record of a failure.

Used by the job-commit frame every committer shares (``engine.commit_frame``), so every
summary carries the same keys.
"""

from __future__ import annotations

import msgspec

from aiocommit._version import VERSION
from aiocommit.committers.common.context import StageContext
from aiocommit.committers.common.session import new_statistics
from aiocommit.options import CommitOptions
from aiocommit.protocol.iostatistics import IOStatistics, IOStatisticsSnapshot
from aiocommit.protocol.success import SuccessData


def combined_statistics(context: StageContext, task_stats: IOStatistics) -> IOStatisticsSnapshot:
    """The job's statistics and its tasks' (from their manifests or pending sets), with
    the store concurrency limit and the peak reached."""
    combined = new_statistics()
    combined.aggregate(context.stats)
    combined.aggregate(task_stats)
    limiter = context.ops.limiter
    combined.set_gauge("store_io_concurrency_limit", limiter.limit)
    combined.set_gauge("store_io_concurrency_peak", limiter.peak_in_flight)
    return combined.snapshot()


def committer_diagnostics(options: CommitOptions) -> dict[str, str]:
    """The summary's diagnostics: our version and the options that shape a commit, under
    Hadoop's names."""
    return {
        "aiocommit.version": VERSION,
        "mapreduce.manifest.committer.io.threads": str(options.concurrency),
        "mapreduce.manifest.committer.validate.output": str(options.validate_output).lower(),
        "mapreduce.manifest.committer.delete.target.files": str(
            options.delete_target_files
        ).lower(),
    }


def record_failure(summary: SuccessData, error: BaseException) -> None:
    """Mark ``summary`` failed: the stage that failed and the exception, as Hadoop's
    report does."""
    summary.success = False
    summary.state = "FAILED"
    summary.stage = getattr(error, "stage", None) or msgspec.UNSET
    summary.diagnostics["exception"] = type(error).__name__
    summary.diagnostics["exception.message"] = str(error)
