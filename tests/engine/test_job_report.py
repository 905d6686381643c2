"""What a service sees of a job: one log line per commit, abort and cleanup with its
figures as fields, OpenTelemetry metrics, and the job's figures on its span."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aiocommit import CommitError, CommitOptions, abort_job, cleanup_job, commit_job
from aiocommit import observability as O
from aiocommit.protocol import statistics as S
from aiocommit.stores.faulty import Faults, FaultyStore, Latency
from aiocommit.stores.memory import MemoryStore
from tests.helpers import run_tasks

FIELDS = ("files", "bytes", "tasks", "seconds", "processes", "retries", "throttled")


def job_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "operation", None) and r.name == "aiocommit"]


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    assert O.configure_metrics(provider)
    yield reader
    O.configure_metrics(None)
    provider.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def total(found: dict[str, list[Any]], name: str, **attributes: Any) -> int:
    return sum(
        p.value
        for p in found.get(name, [])
        if all(p.attributes.get(k) == v for k, v in attributes.items())
    )


async def test_one_info_line_per_commit_abort_and_cleanup(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="aiocommit")
    store = MemoryStore("job-report-line")
    job_id, expected = await run_tasks(store, "/out", tasks=3, files_per_task=4)
    await commit_job("/out", job_id, store=store)
    (line,) = job_records(caplog)
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith("job commit ok: memory://job-report-line/out")
    fields = {name: getattr(line, name) for name in FIELDS}
    assert fields["files"] == len(expected) == 12
    assert fields["bytes"] == sum(len(data) for data in expected.values())
    assert fields["tasks"] == 3
    assert fields["seconds"] > 0
    assert fields["retries"] == fields["throttled"] == 0
    assert line.job_id == job_id  # type: ignore[attr-defined]
    assert line.outcome == "ok"  # type: ignore[attr-defined]
    for name in FIELDS:
        assert f"{name}=" in line.getMessage()

    caplog.clear()
    other, _ = await run_tasks(store, "/out2", tasks=1, files_per_task=2)
    await abort_job("/out2", other, store=store)
    third, _ = await run_tasks(store, "/out3", tasks=1, files_per_task=2)
    await cleanup_job("/out3", third, store=store)
    assert [(r.operation, r.job_id) for r in job_records(caplog)] == [  # type: ignore[attr-defined]
        ("abort", other),
        ("cleanup", third),
    ]


async def test_a_failed_commit_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    """The error reaches the caller, who reports it: the job's line is INFO, not a
    warning repeating the message."""
    caplog.set_level(logging.INFO, logger="aiocommit")
    store = MemoryStore("job-report-failed")
    job_id, _ = await run_tasks(store, "/out", tasks=2, files_per_task=2)
    await store.write_bytes(f"/out/_temporary/{job_id}/00/manifests/bad-manifest.json", b"{")
    with pytest.raises(CommitError):
        await commit_job("/out", job_id, store=store)
    (line,) = job_records(caplog)
    assert line.levelno == logging.INFO
    assert line.getMessage().endswith("error=ManifestError")
    assert line.outcome == "failed"  # type: ignore[attr-defined]
    assert "ManifestError" in line.error  # type: ignore[attr-defined]


async def test_metrics_of_a_throttled_commit(reader: InMemoryMetricReader) -> None:
    memory = MemoryStore("job-report-metrics")
    job_id, expected = await run_tasks(memory, "/out", tasks=4, files_per_task=5)
    throttling = FaultyStore(memory, Faults(seed=3, throttle_probability=0.3))
    options = CommitOptions(retry_base_delay=0.001, retry_max_delay=0.002)
    summary = await commit_job("/out", job_id, store=throttling, options=options)
    counters = summary.iostatistics.counters
    found = points(reader)
    assert total(found, O.FILES_COMMITTED, operation="commit") == len(expected) == 20
    assert total(found, O.BYTES_COMMITTED) == sum(len(d) for d in expected.values())
    assert total(found, O.STORE_CALLS, store_operation=S.OP_RENAME, failed=False) >= 20
    throttled = counters[S.STORE_IO_THROTTLED]
    assert throttled > 0
    assert total(found, O.STORE_THROTTLES) == throttled
    assert total(found, O.STORE_RETRIES) == counters[S.STORE_IO_RETRY] > 0
    assert total(found, O.STORE_CALLS, store_operation=S.OP_RENAME, failed=True) > 0
    assert total(found, O.JOBS, operation="commit", outcome="ok") == 1
    (job,) = found[O.JOB_DURATION]
    assert job.count == 1 and job.sum > 0
    stages = {p.attributes["stage"]: p for p in found[O.STAGE_DURATION]}
    assert {S.JOB_STAGE_LOAD_MANIFESTS, S.JOB_STAGE_RENAME_FILES, S.JOB_STAGE_CLEANUP} <= set(
        stages
    )
    assert stages[S.COMMITTER_COMMIT_JOB].count == 1
    assert found[O.STORE_IN_FLIGHT][0].value == 0  # nothing left in flight


async def test_in_flight_gauge_counts_calls_under_way(reader: InMemoryMetricReader) -> None:
    seen: list[int] = []
    store = MemoryStore("job-report-in-flight")
    job_id, _ = await run_tasks(store, "/out", tasks=2, files_per_task=30)
    slow = FaultyStore(store, Faults(latency_by_operation={"rename": Latency(fixed=0.05)}))

    async def sample() -> None:
        while True:
            seen.append(total(points(reader), O.STORE_IN_FLIGHT))
            await anyio.sleep(0.005)

    async with anyio.create_task_group() as group:
        group.start_soon(sample)
        await commit_job("/out", job_id, store=slow)
        group.cancel_scope.cancel()
    assert max(seen) > 0
    assert total(points(reader), O.STORE_IN_FLIGHT) == 0


async def test_the_job_span_carries_its_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # as set_tracer_provider sets it
    store = MemoryStore("job-report-span")
    job_id, expected = await run_tasks(store, "/out", tasks=2, files_per_task=3)
    await commit_job("/out", job_id, store=store)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    job = spans[S.COMMITTER_COMMIT_JOB].attributes or {}
    assert job["aiocommit.job_id"] == job_id
    assert job["aiocommit.files"] == len(expected) == 6
    assert job["aiocommit.tasks"] == 2
    assert job["aiocommit.bytes"] == sum(len(d) for d in expected.values())
    assert S.JOB_STAGE_RENAME_FILES in spans
