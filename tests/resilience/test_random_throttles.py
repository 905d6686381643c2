"""Throttles that do not fall when the pace falls are not a limit (issue 37 item 4): the
adaptive limiter and rate stop cutting and the commit keeps its floor throughput; a store
whose throttles do follow the pace (a limit on calls in flight, on requests a second) is
still backed off from."""

from __future__ import annotations

import random
import time

import anyio
import pytest

from aiocommit import CommitOptions, commit_job
from aiocommit.io.limits import AdaptiveLimiter
from aiocommit.protocol import statistics as S
from aiocommit.stores.faulty import Faults, FaultyStore, Latency
from aiocommit.stores.memory import MemoryStore
from tests.helpers import output, run_tasks

#: the issue's throttled shares
SHARES = (0.2, 0.3)
#: files of the commits timed
FILES = 2000


def _drive(limiter: AdaptiveLimiter, throttled: float | None, capacity: int, calls: int) -> int:
    """Finish ``calls`` calls through ``limiter``, a round of ``limit`` calls at a time
    (all started in one epoch), each throttled with probability ``throttled`` (at random)
    or, when None, by a store serving ``capacity`` calls in flight (the share over it);
    returns the lowest limit seen."""
    draw = random.Random(7)
    lowest = limiter.limit
    done = 0
    while done < calls:
        in_flight = limiter.limit
        epochs = [limiter.try_acquire() for _ in range(in_flight)]
        share = throttled if throttled is not None else max(0, in_flight - capacity) / in_flight
        for epoch in epochs:
            assert epoch is not None
            limiter.release()
            if draw.random() < share:
                limiter.on_throttle(epoch)
            else:
                limiter.on_success()
        done += in_flight
        lowest = min(lowest, limiter.limit)
    return lowest


def test_the_limiter_stops_cutting_for_throttles_at_random() -> None:
    for share in SHARES:
        limiter = AdaptiveLimiter(2048, minimum=4, initial=64)
        lowest = _drive(limiter, share, 0, 20_000)
        # judged at random after a few cuts: back where the run began, and kept there
        assert limiter.random_throttles >= 1, share
        assert lowest >= int(64 * 0.7**3), (share, lowest)
        assert limiter.limit >= 64, (share, limiter.limit)


def test_the_limiter_still_backs_off_from_a_limit_on_calls_in_flight() -> None:
    limiter = AdaptiveLimiter(2048, minimum=4, initial=64)
    _drive(limiter, None, 24, 20_000)
    assert limiter.random_throttles == 0
    assert limiter.limit <= 36, limiter.limit


async def _prepared(
    files: int, name: str, tasks: int = 4
) -> tuple[MemoryStore, str, dict[str, bytes]]:
    """A memory store holding a job of ``files`` files in ``tasks`` tasks, committed by
    its tasks: the store, the job id and the output expected."""
    store = MemoryStore(name)
    job_id, expected = await run_tasks(store, "/dest", tasks=tasks, files_per_task=files // tasks)
    return store, job_id, expected


async def _commit_seconds(
    store: MemoryStore,
    job_id: str,
    expected: dict[str, bytes],
    front: FaultyStore,
    options: CommitOptions,
) -> tuple[float, dict[str, int]]:
    """Commit the job on ``store`` through ``front``: the seconds taken and the job's
    counters (output checked)."""
    begin = time.perf_counter()
    summary = await commit_job("/dest", job_id, store=front, options=options)
    seconds = time.perf_counter() - begin
    assert await output(store, "/dest") == expected
    return seconds, dict(summary.iostatistics.counters)


async def _side_by_side(
    commits: dict[str, tuple[MemoryStore, str, dict[str, bytes], FaultyStore, CommitOptions]],
) -> dict[str, tuple[float, dict[str, int]]]:
    """Run the commits at once on this loop, each timed on its own: an unthrottled one
    beside a throttled one meets the same machine load (run one after the other, the
    load moved between them), and the test takes the longer one's time, not their sum."""
    results: dict[str, tuple[float, dict[str, int]]] = {}

    async def run(name: str) -> None:
        results[name] = await _commit_seconds(*commits[name])

    async with anyio.create_task_group() as group:
        for name in commits:
            group.start_soon(run, name)
    return results


@pytest.mark.slow  # four timed commits of 2,000 files, side by side
async def test_a_commit_keeps_its_floor_throughput_under_throttles_at_random() -> None:
    """A store answering 20 % or 30 % of calls with a throttle at random, whatever the
    pace (50 ms a call, 64 in flight: the time is the store's, not the CPU's): the
    commit does not collapse (at most 5x its unthrottled time, run beside it) and the
    limit is cut a few times only. Issue 37's target, 3x, is `bench random-throttle`'s."""
    latency = Latency(fixed=0.05)
    # backoff capped low: the tail of one call throttled many times in a row is the
    # retry policy's, not the limit's or the pace's
    options = CommitOptions(concurrency=64, retry_max_delay=0.2)
    commits = {}
    for share in (0.0, *SHARES):
        store, job_id, expected = await _prepared(FILES, f"random-{share}")
        faults = Faults(seed=3, latency=latency, throttle_probability=share)
        commits[f"{share}"] = (store, job_id, expected, FaultyStore(store, faults), options)
    results = await _side_by_side(commits)
    base, _ = results["0.0"]
    for share in SHARES:
        seconds, counters = results[f"{share}"]
        assert counters[S.STORE_IO_THROTTLED] > 0.1 * FILES
        assert counters.get(S.STORE_IO_CONCURRENCY_DECREASED, 0) <= 12, counters
        assert seconds <= 5 * base, (
            f"{share:.0%}: {seconds:.2f} s vs {base:.2f} s unthrottled: {counters}"
        )


@pytest.mark.slow  # a commit of 2,000 files at 600 calls a second
async def test_a_store_limiting_requests_a_second_is_still_paced() -> None:
    """Throttles that fall with the pace (a store admitting 600 calls a second) are a
    rate limit: the pace engages and the rate is cut."""
    store, job_id, expected = await _prepared(FILES, "rate-limited")
    faults = Faults(capacity_per_second=600, latency=Latency(fixed=0.005))
    options = CommitOptions(concurrency=64, retry_max_delay=0.2)
    _, counters = await _commit_seconds(
        store, job_id, expected, FaultyStore(store, faults), options
    )
    assert counters.get(S.STORE_IO_RATE_DECREASED, 0) > 0, counters
    assert counters[S.STORE_IO_THROTTLED] < 0.2 * FILES, counters


@pytest.mark.slow  # two timed commits of 1,000 files at 0.5 s a success, side by side
async def test_throttles_answered_before_slow_successes_do_not_pace_the_commit() -> None:
    """A front throttling 30 % at random answers a throttle at once while a success
    takes the store's work (0.5 s, a loaded remote store): of calls begun together the
    throttled ones finish first. Judged over the calls finished only, the pace engaged
    at stage after stage and held the commit to a crawl (in one run of main, 12 rate
    decreases, 81.5 s against 14.6 s unthrottled); once judged random, the calls still
    pending count, so it engages once at most. An engagement in the serial stages took
    its rate from them and crawled to its verdict (30 s, 3.2-3.5x, before the engaging
    rate was measured over the latest second); its bound is also proven on the fake
    clock (tests/resilience/test_pace_verdict.py)."""
    slow = Faults(latency=Latency(fixed=0.5))
    commits = {}
    for share in (0.0, 0.3):
        store, job_id, expected = await _prepared(1000, f"slow-successes-{share}", tasks=10)
        front = FaultyStore(FaultyStore(store, slow), Faults(seed=2, throttle_probability=share))
        commits[f"{share}"] = (store, job_id, expected, front, CommitOptions())
    results = await _side_by_side(commits)
    base, _ = results["0.0"]
    throttled, counters = results["0.3"]
    assert counters[S.STORE_IO_THROTTLED] > 0.2 * 1000
    assert counters.get(S.STORE_IO_RATE_ENGAGED, 0) <= 1, counters
    assert throttled <= 3 * base, f"{throttled:.2f} s vs {base:.2f} s unthrottled: {counters}"
