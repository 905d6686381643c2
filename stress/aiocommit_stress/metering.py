"""Measuring what the engine does to a store: per-call latency, errors, in-flight calls,
a goodput timeline, CPU time and peak RSS.

``MeteredStore`` wraps the store the engine talks to (outside any fault injection, so the
latencies it records are the ones the engine sees). It keeps fixed-size state whatever the
number of calls: latencies go into a log-bucketed histogram, never a list, so it can meter
a 10-million-file commit without itself growing.
"""

from __future__ import annotations

import math
import resource
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psutil

from aiocommit.errors import StoreError, Throttled, Transient
from aiocommit.stores.base import Store
from aiocommit.stores.wrapper import StoreWrapper

T = TypeVar("T")

_MIN_SECONDS = 1e-6
_GROWTH = 1.01
_LOG_GROWTH = math.log(_GROWTH)


class LatencyHistogram:
    """Latencies in buckets 1% wide from 1 µs up: quantiles within 1%, memory fixed."""

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, seconds: float) -> None:
        index = (
            0 if seconds <= _MIN_SECONDS else int(math.log(seconds / _MIN_SECONDS) / _LOG_GROWTH)
        )
        self.buckets[index] = self.buckets.get(index, 0) + 1
        self.count += 1
        self.total += seconds
        if seconds > self.max:
            self.max = seconds

    def merge(self, other: LatencyHistogram) -> None:
        for index, count in other.buckets.items():
            self.buckets[index] = self.buckets.get(index, 0) + count
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)

    def quantile(self, q: float) -> float:
        """The ``q`` quantile in seconds (0 when empty)."""
        if not self.count:
            return 0.0
        rank = q * (self.count - 1)
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen > rank:
                return min(self.max, _MIN_SECONDS * math.pow(_GROWTH, index + 0.5))
        return self.max

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def summary_ms(self) -> dict[str, float]:
        return {
            "count": self.count,
            "mean_ms": round(self.mean * 1000, 3),
            "p50_ms": round(self.quantile(0.5) * 1000, 3),
            "p90_ms": round(self.quantile(0.9) * 1000, 3),
            "p99_ms": round(self.quantile(0.99) * 1000, 3),
            "max_ms": round(self.max * 1000, 3),
        }


@dataclass
class OpMeter:
    """What one kind of store call did."""

    calls: int = 0
    throttled: int = 0
    transient: int = 0
    #: answered with a non-retryable error (NotFound, AlreadyExists...): still a served call
    refused: int = 0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    @property
    def served(self) -> int:
        return self.calls - self.throttled - self.transient


class MeteredStore(StoreWrapper):
    """A transparent store wrapper that meters every call (see the module docstring).

    ``timeline`` counts served calls per ``step`` seconds since ``reset``, and
    ``throttle_timeline`` the throttled ones: enough to plot goodput over time.
    """

    def __init__(self, inner: Store, *, step: float = 0.1) -> None:
        super().__init__(inner)
        self.step = step
        self.reset()

    def reset(self) -> None:
        self.ops: dict[str, OpMeter] = {}
        self.in_flight = 0
        self.peak_in_flight = 0
        self.started = time.perf_counter()
        self.timeline: list[int] = []
        self.throttle_timeline: list[int] = []

    def _tick(self, timeline: list[int], now: float) -> None:
        slot = int((now - self.started) / self.step)
        if slot >= len(timeline):
            timeline.extend([0] * (slot + 1 - len(timeline)))
        timeline[slot] += 1

    def _meter(self, operation: str) -> OpMeter:
        meter = self.ops.get(operation)
        if meter is None:
            meter = self.ops[operation] = OpMeter()
        return meter

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        meter = self._meter(operation)
        self.in_flight += 1
        if self.in_flight > self.peak_in_flight:
            self.peak_in_flight = self.in_flight
        begin = time.perf_counter()
        throttled = False
        try:
            return await call()
        except Throttled:
            meter.throttled += 1
            throttled = True
            raise
        except Transient:
            meter.transient += 1
            raise
        except StoreError:
            meter.refused += 1
            raise
        finally:
            now = time.perf_counter()
            self.in_flight -= 1
            meter.calls += 1
            meter.latency.add(now - begin)
            self._tick(self.throttle_timeline if throttled else self.timeline, now)

    # -- figures ---------------------------------------------------------------------------

    def _calls(self) -> list[OpMeter]:
        return list(self.ops.values())

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self._calls())

    @property
    def served(self) -> int:
        return sum(m.served for m in self._calls())

    @property
    def throttled(self) -> int:
        return sum(m.throttled for m in self.ops.values())

    @property
    def transient(self) -> int:
        return sum(m.transient for m in self.ops.values())

    def latency(self) -> LatencyHistogram:
        merged = LatencyHistogram()
        for meter in self._calls():
            merged.merge(meter.latency)
        return merged

    def figures(self, seconds: float) -> dict[str, Any]:
        """Everything measured, for the JSON report; rates over ``seconds``."""
        latency = self.latency()
        return {
            "calls": self.calls,
            "served": self.served,
            "throttled": self.throttled,
            "transient": self.transient,
            "ops_per_second": round(self.calls / seconds, 1) if seconds > 0 else 0.0,
            "served_per_second": round(self.served / seconds, 1) if seconds > 0 else 0.0,
            "peak_in_flight": self.peak_in_flight,
            "latency": latency.summary_ms(),
            "by_operation": {
                name: {
                    "calls": meter.calls,
                    "throttled": meter.throttled,
                    "transient": meter.transient,
                    "refused": meter.refused,
                    **{k: v for k, v in meter.latency.summary_ms().items() if k != "count"},
                }
                for name, meter in sorted(self.ops.items())
            },
        }


class RssSampler:
    """Samples this process's resident set size on a thread while running (a context
    manager): ``peak`` bytes during the block, ``baseline`` at its start."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self._process = psutil.Process()
        self.baseline = self._rss()
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _rss(self) -> int:
        rss: int = self._process.memory_info().rss
        return rss

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> RssSampler:
        self.baseline = self.peak = self._rss()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, self._rss())


def max_rss_bytes() -> int:
    """The process's peak RSS so far (``ru_maxrss``, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class CpuClock:
    """Process CPU seconds (all threads), user and system, over a block."""

    user: float = 0.0
    system: float = 0.0
    _start: tuple[float, float] = (0.0, 0.0)

    def __enter__(self) -> CpuClock:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self._start = (usage.ru_utime, usage.ru_stime)
        return self

    def __exit__(self, *exc_info: object) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.user = usage.ru_utime - self._start[0]
        self.system = usage.ru_stime - self._start[1]

    @property
    def total(self) -> float:
        return self.user + self.system
