"""Logging with the job, stage and task attempt on every record; optional stage spans."""

from __future__ import annotations

import importlib.util
import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from aiocommit import observability
from aiocommit.observability import (
    AuditFilter,
    ContextAdapter,
    audit_context,
    configure_logging,
    current_audit_context,
    stage_span,
)


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("aiocommit.test-observability")
    level, handlers = log.level, list(log.handlers)
    yield log
    log.setLevel(level)
    log.handlers[:] = handlers


def _capture(log: logging.Logger) -> io.StringIO:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(AuditFilter())
    handler.setFormatter(observability.audit_formatter("%(job_id)s|%(stage)s|%(task_attempt_id)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    return stream


def test_adapter_merges_call_extras(logger: logging.Logger) -> None:
    stream = _capture(logger)
    adapter = ContextAdapter(logger, {"job_id": "job_1_1", "task_attempt_id": "attempt_1"})
    adapter.info("one", extra={"stage": "job_stage_rename_files"})
    adapter.info("two")
    adapter.info("three", extra={"job_id": "job_2_2"})  # the call wins
    assert stream.getvalue().splitlines() == [
        "job_1_1|job_stage_rename_files|attempt_1",
        "job_1_1|-|attempt_1",
        "job_2_2|-|attempt_1",
    ]


def test_stdlib_adapter_drops_extras_ours_does_not(logger: logging.Logger) -> None:
    stream = _capture(logger)
    logging.LoggerAdapter(logger, {"job_id": "j"}).info("x", extra={"stage": "s"})
    ContextAdapter(logger, {"job_id": "j"}).info("x", extra={"stage": "s"})
    lines = stream.getvalue().splitlines()
    assert lines[1] == "j|s|-"


def test_audit_context_reaches_any_logger(logger: logging.Logger) -> None:
    stream = _capture(logger)
    other = logging.getLogger("aiocommit.test-observability.sdk")
    with audit_context(job_id="job_9_9"):
        with audit_context(stage="job_stage_cleanup", task_attempt_id=None):
            other.warning("from a store adapter")
            assert current_audit_context() == {"job_id": "job_9_9", "stage": "job_stage_cleanup"}
        logger.warning("outer")
    logger.warning("outside")
    assert stream.getvalue().splitlines() == [
        "job_9_9|job_stage_cleanup|-",
        "job_9_9|-|-",
        "-|-|-",
    ]
    assert current_audit_context() == {}


def test_audit_context_is_inherited_by_tasks(logger: logging.Logger) -> None:
    stream = _capture(logger)

    async def main() -> None:
        async def child(number: int) -> None:
            with audit_context(task_attempt_id=f"attempt_{number}"):
                await anyio.lowlevel.checkpoint()
                logger.info("child")

        with audit_context(job_id="job_3_3", stage="task_stage_commit"):
            async with anyio.create_task_group() as group:
                for number in range(2):
                    group.start_soon(child, number)

    anyio.run(main)
    assert sorted(stream.getvalue().splitlines()) == [
        "job_3_3|task_stage_commit|attempt_0",
        "job_3_3|task_stage_commit|attempt_1",
    ]


def test_configure_logging(capsys: pytest.CaptureFixture[str]) -> None:
    target = logging.getLogger("aiocommit.test-configure")
    try:
        configure_logging("info", logger="aiocommit.test-configure")
        handler = configure_logging(logging.DEBUG, logger="aiocommit.test-configure")
        assert target.handlers == [handler]  # replaced, not added
        assert target.level == logging.DEBUG
        ContextAdapter(target, {"job_id": "job_5_5"}).debug("hello %s", "world")
        line = capsys.readouterr().err.strip()
        assert line.endswith(
            "DEBUG   aiocommit.test-configure [job=job_5_5 stage=- attempt=-] hello world"
        )
    finally:
        target.handlers.clear()
        target.setLevel(logging.NOTSET)


def test_stage_span_without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observability, "_get_tracer", lambda: None)
    assert not observability.tracing_enabled()
    with stage_span("job_stage_rename_files", {"job_id": "job_1_1", "files": 3}):
        assert current_audit_context() == {"job_id": "job_1_1", "stage": "job_stage_rename_files"}
    assert current_audit_context() == {}
    with pytest.raises(KeyError), stage_span("job_stage_cleanup"):
        raise KeyError("boom")


class FakeTracer:
    def __init__(self) -> None:
        self.spans: list[tuple[str, dict[str, Any], BaseException | None]] = []

    @contextmanager
    def start_as_current_span(self, name: str, attributes: dict[str, Any]) -> Iterator[None]:
        try:
            yield
        except BaseException as error:
            self.spans.append((name, attributes, error))
            raise
        self.spans.append((name, attributes, None))


def test_stage_span_with_a_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    tracer = FakeTracer()
    monkeypatch.setattr(observability, "_get_tracer", lambda: tracer)
    assert observability.tracing_enabled()
    with stage_span("committer_commit_job", {"job_id": "job_1_1"}):
        with stage_span("job_stage_rename_files", {"files": 10}):
            assert current_audit_context()["stage"] == "job_stage_rename_files"
        assert current_audit_context()["stage"] == "committer_commit_job"
    with pytest.raises(RuntimeError), stage_span("job_stage_cleanup"):
        raise RuntimeError("failed")
    assert [(name, attributes) for name, attributes, _ in tracer.spans] == [
        (
            "job_stage_rename_files",
            {"aiocommit.files": 10, "aiocommit.stage": "job_stage_rename_files"},
        ),
        (
            "committer_commit_job",
            {"aiocommit.job_id": "job_1_1", "aiocommit.stage": "committer_commit_job"},
        ),
        ("job_stage_cleanup", {"aiocommit.stage": "job_stage_cleanup"}),
    ]
    assert isinstance(tracer.spans[-1][2], RuntimeError)


def test_tracer_lookup_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observability, "_tracing_checked", False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert observability._get_tracer() is None
    assert observability._tracing_checked


@pytest.fixture
def global_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """OpenTelemetry's tracing module with no global provider set (the default proxy),
    aiocommit's tracer looked up afresh; the global is restored after the test."""
    trace = pytest.importorskip("opentelemetry.trace")
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.setattr(observability, "_tracing_checked", False)
    yield trace
    observability._tracing_checked = False  # the next lookup forgets this test's provider


async def _one_task_attempt(store_name: str) -> None:
    from aiocommit.stores.memory import MemoryStore
    from tests.helpers import run_tasks

    await run_tasks(MemoryStore(store_name), "/out", tasks=1, files_per_task=1)


async def test_no_span_is_started_while_no_tracer_provider_is_set(
    global_tracing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    proxy_start = global_tracing.ProxyTracer.start_as_current_span

    def counted(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        started.append(name)
        return proxy_start(self, name, *args, **kwargs)

    monkeypatch.setattr(global_tracing.ProxyTracer, "start_as_current_span", counted)
    await _one_task_attempt("spans-unset")
    assert started == []
    assert not observability.tracing_enabled()
    monkeypatch.setattr(global_tracing, "_TRACER_PROVIDER", global_tracing.NoOpTracerProvider())
    await _one_task_attempt("spans-noop")
    assert started == []
    assert not observability.tracing_enabled()


async def test_a_tracer_provider_set_later_gets_the_spans(global_tracing: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from aiocommit.protocol import statistics as S

    await _one_task_attempt("spans-before")  # the lookup has seen the default proxy
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    global_tracing._TRACER_PROVIDER = provider  # what set_tracer_provider sets
    assert observability.tracing_enabled()
    await _one_task_attempt("spans-after")
    names = [span.name for span in exporter.get_finished_spans()]
    assert S.TASK_STAGE_COMMIT in names
    assert S.TASK_STAGE_SAVE_MANIFEST in names
