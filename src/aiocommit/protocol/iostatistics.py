"""IOStatistics in the shape of Hadoop's ``IOStatisticsSnapshot`` JSON.

A duration statistic ``X`` is kept as counters ``X`` and ``X.failures``, minimums
``X.min``/``X.failures.min``, maximums ``X.max``/``X.failures.max`` and means
``X.mean``/``X.failures.mean`` (``{"samples", "sum"}``), in milliseconds; ``-1`` means
unset, as in Hadoop.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import msgspec


class MeanStatistic(msgspec.Struct):
    samples: int = 0
    sum: int = 0


class IOStatisticsSnapshot(msgspec.Struct):
    """The serialised form (``iostatistics`` in manifests and ``_SUCCESS``)."""

    counters: dict[str, int] = msgspec.field(default_factory=dict)
    gauges: dict[str, int] = msgspec.field(default_factory=dict)
    minimums: dict[str, int] = msgspec.field(default_factory=dict)
    maximums: dict[str, int] = msgspec.field(default_factory=dict)
    meanstatistics: dict[str, MeanStatistic] = msgspec.field(default_factory=dict)


class IOStatistics:
    """A live statistics store: counters, gauges and duration statistics.

    Not thread-safe; one event loop updates it.
    """

    counters: dict[str, int]
    minimums: dict[str, int]
    maximums: dict[str, int]
    means: dict[str, MeanStatistic]

    def __init__(self, durations: Iterable[str] = (), counters: Iterable[str] = ()):
        self.gauges: dict[str, int] = {}
        #: duration key -> its (min key, max key, mean): no string building per record
        self._slots: dict[str, tuple[str, str, MeanStatistic]] = {}
        if isinstance(durations, tuple) and isinstance(counters, tuple):
            # the same names for every stage context: their keys are built once
            empty = _empty(durations, counters)
            self.counters = dict(empty.counters)
            self.minimums = dict(empty.minimums)
            self.maximums = dict(empty.maximums)
            self.means = {key: MeanStatistic() for key in empty.means}
            return
        self.counters = {}
        self.minimums = {}
        self.maximums = {}
        self.means = {}
        for name in counters:
            self.counters.setdefault(name, 0)
        for name in durations:
            self.register_duration(name)

    def register_duration(self, name: str) -> None:
        for key in (name, name + ".failures"):
            self.counters.setdefault(key, 0)
            self.minimums.setdefault(key + ".min", -1)
            self.maximums.setdefault(key + ".max", -1)
            self.means.setdefault(key + ".mean", MeanStatistic())

    def increment(self, name: str, value: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + value

    def set_gauge(self, name: str, value: int) -> None:
        self.gauges[name] = value

    def record_duration(self, name: str, milliseconds: float, *, failed: bool = False) -> None:
        key = name + ".failures" if failed else name
        slot = self._slots.get(key)
        if slot is None:
            self.register_duration(name)
            slot = self._slots[key] = (key + ".min", key + ".max", self.means[key + ".mean"])
        low_key, high_key, mean = slot
        value = int(milliseconds)
        counters = self.counters
        counters[key] = counters.get(key, 0) + 1
        minimums = self.minimums
        low = minimums[low_key]
        if low < 0 or value < low:
            minimums[low_key] = value
        maximums = self.maximums
        if value > maximums[high_key]:
            maximums[high_key] = value
        mean.samples += 1
        mean.sum += value

    def record_durations(self, name: str, milliseconds: float, count: int) -> None:
        """``record_duration(name, milliseconds)`` ``count`` times, at the cost of once."""
        if count <= 0:
            return
        self.record_duration(name, milliseconds)
        if count > 1:
            more = count - 1
            self.counters[name] += more
            mean = self._slots[name][2]
            mean.samples += more
            mean.sum += int(milliseconds) * more

    @contextmanager
    def track(self, name: str) -> Iterator[None]:
        """Time the block as duration statistic ``name``; an exception counts as a failure."""
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self.record_duration(name, (time.perf_counter() - start) * 1000, failed=True)
            raise
        self.record_duration(name, (time.perf_counter() - start) * 1000)

    def aggregate(self, other: IOStatisticsSnapshot | IOStatistics) -> None:
        """Add another set of statistics into this one, as Hadoop's ``aggregate`` does."""
        # most of a task's statistics are unset (a job commit adds one set per task): an
        # unset value only adds its key
        means = other.meanstatistics if isinstance(other, IOStatisticsSnapshot) else other.means
        for mine_sums, theirs in ((self.counters, other.counters), (self.gauges, other.gauges)):
            for key, value in theirs.items():
                if value:
                    mine_sums[key] = mine_sums.get(key, 0) + value
                elif key not in mine_sums:
                    mine_sums[key] = 0
        minimums = self.minimums
        for key, value in other.minimums.items():
            if value >= 0:
                mine = minimums.get(key, -1)
                minimums[key] = value if mine < 0 or value < mine else mine
            elif key not in minimums:
                minimums[key] = -1
        maximums = self.maximums
        for key, value in other.maximums.items():
            if key not in maximums or value > maximums[key]:
                maximums[key] = max(value, -1)
        mine_means = self.means
        for key, mean in means.items():
            mine_mean = mine_means.get(key)
            if mine_mean is None:
                mine_mean = mine_means[key] = MeanStatistic()
            if mean.samples or mean.sum:
                mine_mean.samples += mean.samples
                mine_mean.sum += mean.sum

    def snapshot(self, *, recorded_only: bool = False) -> IOStatisticsSnapshot:
        """The statistics as they are serialised. ``recorded_only``: without the duration
        statistics never recorded (count, minimum, maximum and mean of ``X`` or of
        ``X.failures`` with no sample), which most of a task's are; plain counters and
        gauges are all kept. ``aggregate`` into statistics that register the same names
        gives the same sums either way."""
        if recorded_only:
            return self._recorded_snapshot()
        return IOStatisticsSnapshot(
            counters=dict(self.counters),
            gauges=dict(self.gauges),
            minimums=dict(self.minimums),
            maximums=dict(self.maximums),
            meanstatistics={k: MeanStatistic(v.samples, v.sum) for k, v in self.means.items()},
        )

    def _recorded_snapshot(self) -> IOStatisticsSnapshot:
        counters = self.counters
        unset = {
            key[:-5]  # "X.mean" -> "X"
            for key, mean in self.means.items()
            if not mean.samples and not mean.sum and not counters.get(key[:-5])
        }
        return IOStatisticsSnapshot(
            counters={k: v for k, v in counters.items() if k not in unset},
            gauges=dict(self.gauges),
            minimums={k: v for k, v in self.minimums.items() if k[:-4] not in unset},
            maximums={k: v for k, v in self.maximums.items() if k[:-4] not in unset},
            meanstatistics={
                k: MeanStatistic(v.samples, v.sum)
                for k, v in self.means.items()
                if k[:-5] not in unset
            },
        )


@functools.lru_cache(maxsize=16)
def _empty(durations: tuple[str, ...], counters: tuple[str, ...]) -> IOStatistics:
    """Statistics with these names registered and nothing recorded (copied, never used)."""
    return IOStatistics(durations=list(durations), counters=list(counters))
