"""Logging and tracing: every record names its job, stage and task attempt.

Hadoop's committers put an *audit context* (job ID, task attempt ID, stage) on each
store call so that a log line or a storage-side audit record can be traced back to the
job that caused it. aiocommit does the same with standard :mod:`logging`:

* :class:`ContextAdapter` is a :class:`logging.LoggerAdapter` that merges its own
  fields with the ``extra`` of each call (the stdlib adapter drops per-call ``extra``
  before Python 3.13).
* :func:`audit_context` sets fields for a block of code, in a :class:`contextvars.ContextVar`,
  so records of *any* logger (a store adapter's, an SDK's) emitted inside the block carry
  them too; tasks started inside the block inherit them.
* :class:`AuditFilter` puts ``job_id``, ``stage`` and ``task_attempt_id`` on every record
  (``"-"`` when unknown), so a format string can always use them.
* :func:`configure_logging` is what the ``aiocommit`` command calls.
* :func:`stage_span` opens an OpenTelemetry span per stage when ``opentelemetry-api`` is
  installed and a tracer provider is set, and only sets the audit context otherwise.
* :func:`job_done` logs the one INFO line of a job commit, abort or cleanup, with its
  figures as structured fields, and records the OpenTelemetry metrics
  (:func:`configure_metrics`); without OpenTelemetry only the line is written.
"""

from __future__ import annotations

import contextvars
import importlib
import importlib.util
import logging
import sys
import weakref
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, Protocol, TextIO

from aiocommit.protocol import statistics as S

#: the fields every record carries, in the order the default format shows them
AUDIT_FIELDS = ("job_id", "stage", "task_attempt_id")
UNKNOWN = "-"
LOG_FORMAT = (
    "%(asctime)s %(levelname)-7s %(name)s "
    "[job=%(job_id)s stage=%(stage)s attempt=%(task_attempt_id)s] %(message)s"
)

AttributeValue = str | bool | int | float

_audit: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "aiocommit_audit_context", default=MappingProxyType({})
)


class ContextAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger adapter whose fields are merged with each call's ``extra``; the call wins.

    ``log.debug("stage %s done", name, extra={"stage": name})`` keeps the adapter's
    ``job_id`` and ``task_attempt_id`` and adds ``stage``.
    """

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        merged = dict(self.extra or {})
        merged.update(kwargs.get("extra") or {})
        kwargs["extra"] = merged
        return msg, kwargs


def current_audit_context() -> dict[str, str]:
    """The audit fields set by the enclosing :func:`audit_context` blocks."""
    return dict(_audit.get())


@contextmanager
def audit_context(**fields: object) -> Iterator[None]:
    """Set audit fields (``job_id``, ``stage``, ``task_attempt_id``, ...) for the block.

    Nested blocks add to (and may override) the outer fields; ``None`` values are ignored.
    Works across ``await``: the fields live in a context variable, which tasks started
    inside the block inherit.
    """
    token = _audit.set(_with_audit(fields))
    try:
        yield
    finally:
        _audit.reset(token)


def _with_audit(fields: Mapping[str, object]) -> dict[str, str]:
    """The enclosing audit fields updated with ``fields`` (``None`` values ignored)."""
    merged = dict(_audit.get())
    merged.update({key: str(value) for key, value in fields.items() if value is not None})
    return merged


class AuditFilter(logging.Filter):
    """Give every record the audit fields: its own (from an adapter or ``extra``), else the
    enclosing :func:`audit_context`'s, else ``"-"``. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _audit.get()
        for name in AUDIT_FIELDS:
            value = getattr(record, name, None)
            if value is None or value == UNKNOWN:
                setattr(record, name, context.get(name, UNKNOWN))
        return True


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is at the time of each record, so a handler
    installed while stderr is redirected (tests, ``CliRunner``) never writes to a closed
    stream later."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def audit_formatter(fmt: str = LOG_FORMAT) -> logging.Formatter:
    """A formatter for :data:`LOG_FORMAT` (or ``fmt``); use with :class:`AuditFilter`."""
    return logging.Formatter(fmt)


def configure_logging(
    level: int | str = logging.WARNING, *, logger: str = "aiocommit", fmt: str = LOG_FORMAT
) -> logging.Handler:
    """Log ``logger`` (and its children: stages, stores) at ``level`` to stderr, each line
    showing the job, stage and task attempt. Idempotent: a handler installed by an earlier
    call is replaced. Returns the handler."""
    target = logging.getLogger(logger)
    for handler in list(target.handlers):
        if getattr(handler, "_aiocommit_audit", False):
            target.removeHandler(handler)
    handler = _StderrHandler()
    handler._aiocommit_audit = True  # type: ignore[attr-defined]
    handler.addFilter(AuditFilter())
    handler.setFormatter(audit_formatter(fmt))
    target.addHandler(handler)
    target.setLevel(level.upper() if isinstance(level, str) else level)
    return handler


# -- tracing ---------------------------------------------------------------------------

#: ``opentelemetry.trace`` once found (None without ``opentelemetry-api``)
_trace: Any = None
_tracing_checked = False
#: the global tracer provider last seen, and aiocommit's tracer from it (None while the
#: provider is the default proxy or a no-op one: no span is made then); one tuple, so a
#: thread reading it never sees one provider's tracer paired with another provider
_tracer_of: tuple[Any, Any] = (None, None)
#: the provider classes that record nothing
_silent_providers: tuple[type, ...] = ()


def _get_tracer() -> Any:
    """aiocommit's tracer from OpenTelemetry's global tracer provider, or None when no
    span would be recorded: ``opentelemetry-api`` absent, or no provider set yet (the
    default proxy) or a no-op one. Checked on each call by the provider's identity, so a
    provider set later gets the spans from then on."""
    global _trace, _tracing_checked, _tracer_of, _silent_providers
    if not _tracing_checked:
        _tracing_checked = True
        _trace, _tracer_of = None, (None, None)
        if importlib.util.find_spec("opentelemetry") is not None:
            try:
                _trace = importlib.import_module("opentelemetry.trace")
            except ImportError:
                _trace = None
            if _trace is not None:
                _silent_providers = (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider)
    if _trace is None:
        return None
    provider = _trace.get_tracer_provider()
    seen, tracer = _tracer_of
    if provider is not seen:
        silent = isinstance(provider, _silent_providers)
        tracer = None if silent else provider.get_tracer("aiocommit")
        _tracer_of = (provider, tracer)
    return tracer


def tracing_enabled() -> bool:
    """True when stage spans go to OpenTelemetry (a tracer provider is set)."""
    return _get_tracer() is not None


@contextmanager
def stage_span(name: str, attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[None]:
    """Run the block as stage ``name``: its log records carry ``stage=name`` (see
    :func:`audit_context`), and with ``opentelemetry-api`` installed it is a span named
    ``name`` whose attributes are ``attributes`` prefixed with ``aiocommit.``. A failure
    is recorded on the span and re-raised. Without OpenTelemetry, or while its global
    tracer provider is the default (none set) or a no-op one, no span is made.

    The keys ``job_id`` and ``task_attempt_id`` of ``attributes`` also go into the
    audit context.
    """
    attributes = attributes or {}
    # ``audit_context``'s merge, without its generator: a stage is a hot path
    fields: dict[str, object] = {key: attributes.get(key) for key in _SPAN_AUDIT_FIELDS}
    fields["stage"] = name
    token = _audit.set(_with_audit(fields))
    try:
        tracer = _get_tracer()
        if tracer is None:
            yield
            return
        span_attributes = {
            f"aiocommit.{key}": value for key, value in {**attributes, "stage": name}.items()
        }
        with tracer.start_as_current_span(name, attributes=span_attributes):
            yield
    finally:
        _audit.reset(token)


#: the audit fields a stage's attributes may set (its name sets ``stage``)
_SPAN_AUDIT_FIELDS = tuple(key for key in AUDIT_FIELDS if key != "stage")


def annotate_span(attributes: Mapping[str, AttributeValue]) -> None:
    """Set ``aiocommit.``-prefixed attributes on the current span (a stage's, see
    :func:`stage_span`); nothing without OpenTelemetry."""
    if _get_tracer() is None:
        return
    span = _trace.get_current_span()
    if span.is_recording():
        span.set_attributes({f"aiocommit.{key}": value for key, value in attributes.items()})


# -- metrics ---------------------------------------------------------------------------

#: the meter's instruments (OpenTelemetry names; durations in seconds)
FILES_COMMITTED = "aiocommit.files.committed"
BYTES_COMMITTED = "aiocommit.bytes.committed"
STORE_CALLS = "aiocommit.store.calls"
STORE_RETRIES = "aiocommit.store.retries"
STORE_THROTTLES = "aiocommit.store.throttles"
STORE_IN_FLIGHT = "aiocommit.store.in_flight"
JOBS = "aiocommit.jobs"
JOB_DURATION = "aiocommit.job.duration"
STAGE_DURATION = "aiocommit.stage.duration"


class InFlight(Protocol):
    """What the in-flight gauge reads: a store-call limiter (``io.limits``)."""

    @property
    def in_flight(self) -> int: ...


#: the counters and histograms: instrument name -> (unit, description)
_COUNTERS = {
    FILES_COMMITTED: ("{file}", "Files committed (renamed or completed)"),
    BYTES_COMMITTED: ("By", "Bytes of the files committed"),
    STORE_CALLS: ("{call}", "Store calls by operation and outcome"),
    STORE_RETRIES: ("{call}", "Store calls retried"),
    STORE_THROTTLES: ("{call}", "Store calls the store throttled"),
    JOBS: ("{job}", "Job commits, aborts and cleanups by outcome"),
}
_HISTOGRAMS = {
    JOB_DURATION: ("s", "Job commit, abort and cleanup durations"),
    STAGE_DURATION: ("s", "Stage durations"),
}

#: every instrument aiocommit records
INSTRUMENTS = (*_COUNTERS, *_HISTOGRAMS, STORE_IN_FLIGHT)


class _Instruments:
    """The OpenTelemetry instruments of one meter provider, by instrument name."""

    def __init__(self, metrics: Any, provider: Any) -> None:
        meter = (provider or metrics.get_meter_provider()).get_meter("aiocommit")
        self.counters = {
            name: meter.create_counter(name, unit=unit, description=description)
            for name, (unit, description) in _COUNTERS.items()
        }
        self.histograms = {
            name: meter.create_histogram(name, unit=unit, description=description)
            for name, (unit, description) in _HISTOGRAMS.items()
        }
        observation = importlib.import_module("opentelemetry.metrics").Observation
        meter.create_observable_up_down_counter(
            STORE_IN_FLIGHT,
            callbacks=[lambda options: [observation(in_flight_calls())]],
            unit="{call}",
            description="Store calls in flight in this process",
        )


_instruments: _Instruments | None = None
_metrics_checked = False
_limiters: weakref.WeakSet[Any] = weakref.WeakSet()


def configure_metrics(meter_provider: Any = None) -> bool:
    """Record metrics with ``meter_provider`` (an OpenTelemetry ``MeterProvider``; by
    default the global one, as ``opentelemetry.metrics.set_meter_provider`` set it).
    Returns False, recording nothing, when ``opentelemetry-api`` is not installed."""
    global _instruments, _metrics_checked
    _metrics_checked = True
    _instruments = None
    if importlib.util.find_spec("opentelemetry") is None:
        return False
    try:
        metrics = importlib.import_module("opentelemetry.metrics")
    except ImportError:
        return False
    _instruments = _Instruments(metrics, meter_provider)
    return True


def _meter() -> _Instruments | None:
    if not _metrics_checked:
        configure_metrics()
    return _instruments


def watch_in_flight(limiter: InFlight) -> None:
    """Count ``limiter``'s calls in the in-flight gauge while it lives."""
    _limiters.add(limiter)


def in_flight_calls() -> int:
    """Store calls in flight now, over every live limiter of this process."""
    return sum(limiter.in_flight for limiter in list(_limiters))


def record_stage(name: str, seconds: float, *, failed: bool) -> None:
    """A stage's duration into the stage histogram."""
    instruments = _meter()
    if instruments is not None:
        instruments.histograms[STAGE_DURATION].record(seconds, {"stage": name, "failed": failed})


#: the counters of a job's statistics that the line and the metrics report
JOB_FIGURES = {
    "files": S.COMMITTER_FILES_COMMITTED,
    "bytes": S.COMMITTER_BYTES_COMMITTED,
    "tasks": S.COMMITTER_TASKS_COMPLETED,
    "retries": S.STORE_IO_RETRY,
    "throttled": S.STORE_IO_THROTTLED,
}


def job_figures(counters: Mapping[str, int], gauges: Mapping[str, int]) -> dict[str, int]:
    """files, bytes, tasks, retries, throttled and processes from a job's statistics."""
    figures = {name: int(counters.get(key, 0)) for name, key in JOB_FIGURES.items()}
    figures["processes"] = int(gauges.get(S.JOB_RENAME_PROCESSES, 0))
    return figures


def job_done(
    operation: str,
    job_id: str,
    dest: str,
    counters: Mapping[str, int],
    gauges: Mapping[str, int],
    seconds: float,
    error: BaseException | None = None,
    *,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
) -> None:
    """Report a finished job commit, abort or cleanup (``operation``): one INFO line whose
    record carries every figure as a field (``record.files``, ``record.seconds``...),
    and the metrics. A failure is INFO too, naming the error's type only (the whole
    message is the record's ``error`` field): the error itself reaches the caller, who
    reports it once."""
    figures = job_figures(counters, gauges)
    outcome = "failed" if error is not None else "ok"
    fields: dict[str, Any] = {
        "operation": operation,
        "outcome": outcome,
        "job_id": job_id,
        "dest": dest,
        "seconds": round(seconds, 3),
        **figures,
    }
    if error is not None:
        fields["error"] = f"{type(error).__name__}: {error}"
    text = (
        f"job {operation} {outcome}: {dest} job={job_id} files={figures['files']} "
        f"bytes={figures['bytes']} tasks={figures['tasks']} seconds={seconds:.3f} "
        f"processes={figures['processes']} retries={figures['retries']} "
        f"throttled={figures['throttled']}"
    )
    if error is not None:
        text += f" error={type(error).__name__}"
    target = log or logging.getLogger("aiocommit")
    target.info("%s", text, extra=fields)
    instruments = _meter()
    if instruments is None:
        return
    attributes = {"operation": operation}
    counters_of = instruments.counters
    counters_of[JOBS].add(1, {**attributes, "outcome": outcome})
    instruments.histograms[JOB_DURATION].record(seconds, {**attributes, "outcome": outcome})
    for name, figure in (
        (FILES_COMMITTED, "files"),
        (BYTES_COMMITTED, "bytes"),
        (STORE_RETRIES, "retries"),
        (STORE_THROTTLES, "throttled"),
    ):
        counters_of[name].add(figures[figure], attributes)
    for name in S.STORE_OPERATIONS:
        for failed, key in ((False, name), (True, name + ".failures")):
            count = counters.get(key, 0)
            if count:
                counters_of[STORE_CALLS].add(
                    count, {**attributes, "store_operation": name, "failed": failed}
                )
