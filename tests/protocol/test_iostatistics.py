"""``IOStatistics`` made from tuples of names (every stage context's) copies keys built
once; it holds the same statistics as one registered name by name, and nothing of it is
shared with another."""

from __future__ import annotations

import random

from aiocommit.committers.common.session import new_statistics
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics, IOStatisticsSnapshot, MeanStatistic

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


def _aggregated_key_by_key(into: IOStatisticsSnapshot, other: IOStatisticsSnapshot) -> None:
    """Hadoop's ``aggregate``, written out plainly: the reference."""
    for key, value in other.counters.items():
        into.counters[key] = into.counters.get(key, 0) + value
    for key, value in other.gauges.items():
        into.gauges[key] = into.gauges.get(key, 0) + value
    for key, value in other.minimums.items():
        mine = into.minimums.get(key, -1)
        if value >= 0:
            into.minimums[key] = value if mine < 0 else min(mine, value)
        else:
            into.minimums.setdefault(key, -1)
    for key, value in other.maximums.items():
        into.maximums[key] = max(into.maximums.get(key, -1), value)
    for key, mean in other.meanstatistics.items():
        mine_mean = into.meanstatistics.setdefault(key, MeanStatistic())
        mine_mean.samples += mean.samples
        mine_mean.sum += mean.sum


def _random_statistics(rng: random.Random) -> IOStatistics:
    statistics = new_statistics() if rng.random() < 0.8 else IOStatistics()
    for _ in range(rng.randrange(6)):
        name = rng.choice([*DURATIONS, "extra_duration"])
        statistics.record_duration(name, rng.randrange(50), failed=rng.random() < 0.2)
    for _ in range(rng.randrange(4)):
        statistics.increment(rng.choice([*S.COUNTERS, "extra_counter"]), rng.randrange(-2, 5))
    if rng.random() < 0.3:
        statistics.set_gauge("a_gauge", rng.randrange(-3, 3))
    return statistics


def test_aggregate_adds_as_hadoop_does() -> None:
    """Unset values only add their keys: the same sums as adding every key."""
    rng = random.Random(36)
    for _ in range(200):
        total = _random_statistics(rng)
        reference = total.snapshot()
        for _ in range(rng.randrange(1, 5)):
            other = _random_statistics(rng)
            from_snapshot = rng.random() < 0.5
            total.aggregate(other.snapshot() if from_snapshot else other)
            _aggregated_key_by_key(reference, other.snapshot())
        assert total.snapshot() == reference


def test_a_recorded_only_snapshot_leaves_out_the_durations_never_recorded() -> None:
    stats = new_statistics()
    stats.record_duration(S.OP_RENAME, 4)
    stats.record_duration(S.OP_DELETE, 2, failed=True)
    stats.increment(S.COMMITTER_TASK_FILE_COUNT, 3)
    compact = stats.snapshot(recorded_only=True)
    assert set(compact.meanstatistics) == {S.OP_RENAME + ".mean", S.OP_DELETE + ".failures.mean"}
    assert set(compact.minimums) == {S.OP_RENAME + ".min", S.OP_DELETE + ".failures.min"}
    assert set(compact.maximums) == {S.OP_RENAME + ".max", S.OP_DELETE + ".failures.max"}
    assert compact.counters[S.OP_RENAME] == 1 and compact.counters[S.OP_DELETE + ".failures"] == 1
    assert S.OP_DELETE not in compact.counters  # no success recorded
    for name in S.COUNTERS:  # plain counters are all kept, set or not
        assert name in compact.counters
    # aggregated into the job's statistics, it adds what the whole snapshot adds
    whole, recorded = new_statistics(), new_statistics()
    whole.aggregate(stats.snapshot())
    recorded.aggregate(compact)
    assert recorded.snapshot() == whole.snapshot()


async def test_a_task_manifest_carries_only_the_statistics_recorded() -> None:
    from aiocommit import commit_task, setup_job
    from aiocommit.stores.memory import MemoryStore
    from tests.helpers import write_task

    store = MemoryStore("manifest-statistics")
    job_id = await setup_job("/out", store=store)
    attempt = await write_task(store, "/out", job_id, 0, 0, {"part-0.txt": b"data"})
    manifest = await commit_task(attempt, store=store)
    stats = manifest.iostatistics
    assert all(mean.samples for mean in stats.meanstatistics.values()), stats.meanstatistics
    assert stats.counters[S.COMMITTER_TASK_FILE_COUNT] == 1
