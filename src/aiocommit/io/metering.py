"""The statistics layer of the store-call door: what each call, wait and retry costs,
recorded under Hadoop's statistic names in the job's ``IOStatistics``."""

from __future__ import annotations

from time import perf_counter

from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics


class CallMeter:
    """Records what the door's layers report: a call's duration (failed or not) under the
    call's statistic, the seconds it waited for a turn at a rate, each throttle,
    transient error, retry and backoff, and each decrease of the adaptive rate or
    concurrency.

    Contract: it only records; it never waits and never raises.
    """

    __slots__ = ("stats",)

    def __init__(self, stats: IOStatistics) -> None:
        self.stats = stats

    def finished(self, statistic: str, begin: float, *, failed: bool = False) -> None:
        """A try begun at ``begin`` (``time.perf_counter``) ended now."""
        self.stats.record_duration(statistic, (perf_counter() - begin) * 1000, failed=failed)

    def failed(self, statistic: str, millis: float) -> None:
        """A try that took ``millis`` failed."""
        self.stats.record_duration(statistic, millis, failed=True)

    def succeeded_many(self, statistic: str, millis: float, count: int) -> None:
        """``count`` calls made together in ``millis`` succeeded (a batch)."""
        self.stats.record_durations(statistic, millis, count)

    def waited(self, seconds: float) -> None:
        """A call waited ``seconds`` for its turn at a rate (nothing when 0)."""
        if seconds:
            self.stats.record_duration(S.STORE_IO_RATE_LIMITED, seconds * 1000)

    def throttled(self) -> None:
        self.stats.increment(S.STORE_IO_THROTTLED)

    def transient(self) -> None:
        self.stats.increment(S.STORE_IO_TRANSIENT)

    def rate_decreased(self) -> None:
        self.stats.increment(S.STORE_IO_RATE_DECREASED)

    def rate_engaged(self) -> None:
        self.stats.increment(S.STORE_IO_RATE_ENGAGED)

    def concurrency_decreased(self) -> None:
        self.stats.increment(S.STORE_IO_CONCURRENCY_DECREASED)

    def backoff(self, seconds: float) -> None:
        """A retry is made after a backoff of ``seconds``."""
        self.stats.increment(S.STORE_IO_RETRY)
        self.stats.record_duration(S.STORE_IO_BACKOFF, seconds * 1000)
