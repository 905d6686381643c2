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
  installed, and only sets the audit context otherwise.
"""

from __future__ import annotations

import contextvars
import importlib
import importlib.util
import logging
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any, TextIO

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
    merged = dict(_audit.get())
    merged.update({key: str(value) for key, value in fields.items() if value is not None})
    token = _audit.set(merged)
    try:
        yield
    finally:
        _audit.reset(token)


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

_tracer: Any = None
_tracing_checked = False


def _get_tracer() -> Any:
    """OpenTelemetry's tracer for aiocommit, or None when ``opentelemetry-api`` is absent."""
    global _tracer, _tracing_checked
    if not _tracing_checked:
        _tracing_checked = True
        if importlib.util.find_spec("opentelemetry") is not None:
            try:
                trace = importlib.import_module("opentelemetry.trace")
            except ImportError:
                trace = None
            if trace is not None:
                _tracer = trace.get_tracer("aiocommit")
    return _tracer


def tracing_enabled() -> bool:
    """True when stage spans go to OpenTelemetry."""
    return _get_tracer() is not None


@contextmanager
def stage_span(name: str, attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[None]:
    """Run the block as stage ``name``: its log records carry ``stage=name`` (see
    :func:`audit_context`), and with ``opentelemetry-api`` installed it is a span named
    ``name`` whose attributes are ``attributes`` prefixed with ``aiocommit.``. A failure
    is recorded on the span and re-raised. Without OpenTelemetry no span is made.

    The keys ``job_id`` and ``task_attempt_id`` of ``attributes`` also go into the
    audit context.
    """
    attributes = dict(attributes or {})
    audit = {key: attributes[key] for key in AUDIT_FIELDS if key in attributes}
    audit["stage"] = name
    with audit_context(**audit):
        tracer = _get_tracer()
        if tracer is None:
            yield
            return
        span_attributes = {
            f"aiocommit.{key}": value for key, value in {**attributes, "stage": name}.items()
        }
        with tracer.start_as_current_span(name, attributes=span_attributes):
            yield
