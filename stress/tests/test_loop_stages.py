"""``bench loop``'s worst loop-thread slice per stage: the stages come from the library's
own stage records while a real commit runs beside the ticker."""

from __future__ import annotations

import logging

from aiocommit import commit_job
from aiocommit.stores.memory import MemoryStore
from aiocommit_stress.loop_probes import NO_STAGE, StageWatch, stages_watched
from aiocommit_testing.ticker import ticking


async def test_a_commit_beside_the_ticker_names_its_stages() -> None:
    from tests.helpers import run_tasks

    store = MemoryStore()
    job_id, _ = await run_tasks(store, "/out", tasks=4, files_per_task=5)
    with stages_watched() as stages:
        async with ticking(on_gap=stages.gap):
            await commit_job("/out", job_id, store=store)
    worst = stages.figures()
    assert {"committer_commit_job", "job_stage_rename_files"} <= set(worst), worst
    assert list(worst.values()) == sorted(worst.values(), reverse=True)
    assert not stages.open  # every stage that started ended
    # the watch is gone: the logger is back at its level and passes stage records again
    assert logging.getLogger("aiocommit").filters == []


def test_a_gap_counts_for_the_stages_that_began_or_ended_in_it() -> None:
    watch = StageWatch(logging.WARNING)

    def record(message: str, name: str) -> bool:
        return watch.filter(
            logging.LogRecord("aiocommit", logging.DEBUG, "", 0, message, (name,), None)
        )

    watch.gap(0.001, 0.001)
    assert record("stage %s starting", "outer") is False
    assert record("stage %s starting", "inner") is False
    watch.gap(0.030, 0.030)  # both began in it
    assert record("stage %s done in %.3f s", "inner") is False
    watch.gap(0.005, 0.005)  # inner ended in it, outer is open
    watch.gap(0.002, 0.002)  # only outer
    assert watch.figures() == {"outer": 30.0, "inner": 30.0, NO_STAGE: 1.0}
    other = logging.LogRecord("aiocommit", logging.DEBUG, "", 0, "something %s", ("x",), None)
    assert watch.filter(other) is False  # below the level it passed before
    warning = logging.LogRecord("aiocommit", logging.WARNING, "", 0, "careful", (), None)
    assert watch.filter(warning) is True
