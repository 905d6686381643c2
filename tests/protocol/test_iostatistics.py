"""``IOStatistics`` made from tuples of names (every stage context's) copies keys built
once; it holds the same statistics as one registered name by name, and nothing of it is
shared with another."""

from __future__ import annotations

from aiocommit.committers.common.session import new_statistics
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics

DURATIONS = S.STORE_OPERATIONS + S.JOB_STAGES + S.TASK_STAGES


def test_statistics_from_tuples_equal_those_registered_one_by_one() -> None:
    copied = new_statistics()
    registered = IOStatistics(durations=list(DURATIONS), counters=list(S.COUNTERS))
    assert copied.snapshot() == registered.snapshot()
    assert list(copied.counters) == list(registered.counters)  # the same key order


def test_two_statistics_share_nothing() -> None:
    first, second = new_statistics(), new_statistics()
    first.record_duration(S.OP_RENAME, 5)
    first.increment(S.COUNTERS[0])
    assert second.snapshot() == new_statistics().snapshot()
    assert first.means[S.OP_RENAME + ".mean"].samples == 1
    assert second.means[S.OP_RENAME + ".mean"].samples == 0
    assert first.counters[S.COUNTERS[0]] == 1 and second.counters[S.COUNTERS[0]] == 0
