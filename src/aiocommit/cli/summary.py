"""``_SUCCESS`` files, summary reports and task manifests as plain data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from aiocommit.errors import ManifestError
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatisticsSnapshot
from aiocommit.protocol.manifest import DirState, TaskManifest, decode_manifest
from aiocommit.protocol.pending import (
    MAGIC_COMMITTER,
    PARTITIONED_COMMITTER,
    STAGING_COMMITTER,
    PendingSet,
    decode_pending,
    decode_pendingset,
)
from aiocommit.protocol.success import COMMITTER_NAME, SuccessData, decode_success

#: the committer classes a _SUCCESS names -> the name the ``committer`` option uses
COMMITTER_NAMES = {
    COMMITTER_NAME: "manifest",
    STAGING_COMMITTER: "staging",
    PARTITIONED_COMMITTER: "partitioned",
    MAGIC_COMMITTER: "magic",
}


def committer_name(committer: object) -> str | None:
    """The ``committer`` option's name for the class a _SUCCESS records (None: another)."""
    return COMMITTER_NAMES.get(committer) if isinstance(committer, str) else None


def _is_stage(name: str) -> bool:
    return (
        name in S.JOB_STAGES
        or name in S.TASK_STAGES
        or name.startswith(("job_stage_", "task_stage_"))
        or name == S.COMMITTER_COMMIT_JOB
    )


def _mean(stats: IOStatisticsSnapshot, name: str) -> tuple[int, float] | None:
    mean = stats.meanstatistics.get(name + ".mean") or stats.meanstatistics.get(name)
    if mean is None or mean.samples <= 0:
        return None
    return mean.samples, mean.sum / mean.samples


def _extreme(values: Mapping[str, int], key: str) -> int | None:
    value = values.get(key)
    return value if value is not None and value >= 0 else None


def _total_ms(stats: IOStatisticsSnapshot, name: str) -> float | None:
    mean = _mean(stats, name)
    return None if mean is None else mean[0] * mean[1]


def _seconds(millis: float | None) -> float | None:
    return None if millis is None else round(millis / 1000, 3)


def statistics_rows(stats: IOStatisticsSnapshot, *, stages: bool) -> list[dict[str, Any]]:
    """One row per statistic that happened (non-zero count, failures or samples), stages
    only or everything else: count, failures, mean, min and max (``None`` when unset)."""
    names: set[str] = set()
    for key, value in stats.counters.items():
        if value:
            names.add(key.removesuffix(".failures"))
    for key, statistic in stats.meanstatistics.items():
        if statistic.samples:
            names.add(key.removesuffix(".mean").removesuffix(".failures"))
    rows = []
    for name in sorted(names):
        if _is_stage(name) != stages:
            continue
        mean = _mean(stats, name)
        rows.append(
            {
                "name": name,
                "count": stats.counters.get(name, 0),
                "failures": stats.counters.get(name + ".failures", 0),
                "mean": None if mean is None else round(mean[1], 3),
                "min": _extreme(stats.minimums, name + ".min"),
                "max": _extreme(stats.maximums, name + ".max"),
                "total": None if mean is None else round(mean[0] * mean[1], 3),
            }
        )
    return rows


def success_summary(path: str, success: SuccessData) -> dict[str, Any]:
    """The facts of a ``_SUCCESS`` (or ``summary-JOB.json``) file, as plain data."""
    stats = success.iostatistics
    counters = stats.counters
    tasks = counters.get(S.COMMITTER_TASKS_COMPLETED) or counters.get(S.TASK_STAGE_COMMIT, 0)
    gauges = stats.gauges
    commit_ms = _total_ms(stats, S.COMMITTER_COMMIT_JOB) or gauges.get(S.JOB_COMMIT_ELAPSED_MS)
    state = success.state if isinstance(success.state, str) else None
    stage = success.stage if isinstance(success.stage, str) else None
    return {
        "kind": "success",
        "path": path,
        "job_id": success.job_id,
        "job_id_source": success.job_id_source,
        "success": success.success,
        "state": state or ("SUCCESS" if success.success else "FAILED"),
        "failed_stage": stage,
        "date": success.date,
        "hostname": success.hostname,
        "committer": success.committer,
        "committer_name": committer_name(success.committer),
        "tasks": tasks,
        "files": counters.get(S.COMMITTER_FILES_COMMITTED, 0),
        "bytes": counters.get(S.COMMITTER_BYTES_COMMITTED, 0),
        "commit_seconds": None if commit_ms is None else round(commit_ms / 1000, 3),
        # a _SUCCESS is written before cleanup: only the summary report times it
        "cleanup_seconds": _seconds(_total_ms(stats, S.JOB_STAGE_CLEANUP)),
        "rename_processes": gauges.get(S.JOB_RENAME_PROCESSES),
        "peak_in_flight": gauges.get(S.STORE_IO_CONCURRENCY_PEAK),
        "concurrency_limit": gauges.get(S.STORE_IO_CONCURRENCY_LIMIT),
        "directories_created": counters.get(S.COMMITTER_DIRECTORIES_CREATED),
        "task_directories": counters.get(S.COMMITTER_TASK_DIRECTORY_COUNT, 0),
        "filenames": list(success.filenames),
        "stages": statistics_rows(stats, stages=True),
        "statistics": statistics_rows(stats, stages=False),
        "gauges": {k: v for k, v in sorted(stats.gauges.items()) if v},
        "diagnostics": dict(success.diagnostics),
    }


def manifest_summary(path: str, manifest: TaskManifest) -> dict[str, Any]:
    """The facts of a task manifest, as plain data."""
    stats = manifest.iostatistics
    return {
        "kind": "manifest",
        "path": path,
        "job_id": manifest.job_id,
        "job_attempt": manifest.job_attempt_number,
        "task_id": manifest.task_id,
        "task_attempt_id": manifest.task_attempt_id,
        "task_attempt_dir": manifest.task_attempt_dir,
        "files": len(manifest.files),
        "bytes": manifest.total_size,
        "directories": len(manifest.directories),
        "directories_to_create": sum(
            1 for d in manifest.directories if d.state == DirState.NOT_FOUND
        ),
        "stages": statistics_rows(stats, stages=True),
        "statistics": statistics_rows(stats, stages=False),
        "gauges": {k: v for k, v in sorted(stats.gauges.items()) if v},
        "diagnostics": dict(manifest.extra_data),
    }


def pending_summary(path: str, pending: PendingSet) -> dict[str, Any]:
    """The facts of an S3A ``.pendingset`` (or of one ``.pending`` file, as a set of one)."""
    stats = pending.iostatistics
    first = pending.commits[0] if pending.commits else None
    return {
        "kind": "pendingset",
        "path": path,
        "job_id": pending.job_id,
        "task_id": first.task_id if first else "",
        "task_attempt_id": pending.extra_data.get("task.attempt.id", ""),
        "files": len(pending.commits),
        "bytes": sum(c.length for c in pending.commits),
        "uploads": [
            {"uri": c.uri, "upload_id": c.upload_id, "parts": len(c.etags), "length": c.length}
            for c in pending.commits
        ],
        "filenames": [c.uri for c in pending.commits],
        "stages": statistics_rows(stats, stages=True),
        "statistics": statistics_rows(stats, stages=False),
        "gauges": {k: v for k, v in sorted(stats.gauges.items()) if v},
        "diagnostics": dict(pending.extra_data),
    }


def decode_document(data: bytes, path: str) -> dict[str, Any]:
    """Summarise a ``_SUCCESS``/summary file, a task manifest, or an S3A ``.pendingset`` /
    ``.pending`` file, whichever ``data`` is."""
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise ManifestError(f"not JSON: {error}", path=path) from error
    if isinstance(raw, dict) and "name" in raw:
        return success_summary(path, decode_success(data, path=path))
    if isinstance(raw, dict) and ("type" in raw or "files" in raw or "taskID" in raw):
        return manifest_summary(path, decode_manifest(data, path=path))
    if isinstance(raw, dict) and "commits" in raw:
        return pending_summary(path, decode_pendingset(data, path=path))
    if isinstance(raw, dict) and "uploadId" in raw:
        commit = decode_pending(data, path=path)
        return pending_summary(path, PendingSet(job_id=commit.job_id, commits=[commit]))
    raise ManifestError(
        "neither a task manifest nor a _SUCCESS file (nor an S3A pending set)", path=path
    )
