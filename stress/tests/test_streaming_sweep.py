"""The streaming kill sweep (``aiocommit_stress.streaming_sweep``, issue #35): its plan and
its reader's counts without Spark, and one small seeded run of ``format("aiocommit")``
whose query is SIGKILLed twice and restarted from its checkpoint."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from aiocommit_stress.streaming_sweep import (
    PHASES,
    ROWS,
    KillPoint,
    PlainReader,
    kill_plan,
    run_seed,
)


def test_a_seed_gives_one_plan_of_distinct_batches_in_order() -> None:
    plan = kill_plan(7, batches=20, kills=3)
    assert plan == kill_plan(7, batches=20, kills=3)
    assert [p.batch for p in plan] == sorted({p.batch for p in plan}) and len(plan) == 3
    assert all(p.phase in PHASES and 0 <= p.delay <= 0.8 for p in plan)
    assert len(kill_plan(7, batches=2, kills=3)) == 2


def test_the_reader_counts_partial_duplicated_and_retracted_batches(tmp_path: Path) -> None:
    reader = PlainReader(tmp_path, batches=3)
    whole = Counter(range(ROWS))  # batch 0 complete
    reader.observe(whole, 0)
    reader.observe(whole + Counter(range(ROWS, ROWS + 3)), 0)  # batch 1: 3 rows of 10
    reader.observe(whole + Counter([0]), 1)  # row 0 twice; batch 1 gone; a bad file
    reader.observe(Counter(range(ROWS, 2 * ROWS)), 0)  # batch 0 gone
    figures = reader.figures
    assert (figures.observations, figures.partial, figures.duplicated) == (4, 1, 1)
    assert (figures.unreadable, figures.retracted) == (1, 2)
    assert figures.examples[0] == f"batch 1: 3 of {ROWS} rows"


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_stream_killed_twice_writes_every_row_once(tmp_path: Path) -> None:
    """4 micro-batches into format("aiocommit"); the query's process group SIGKILLed while
    batch 1's task writes and after batch 2's commit before Spark records it; each
    restart from the checkpoint: every row once, no reader ever sees part of a batch."""
    pytest.importorskip("pyspark")
    plan = [KillPoint(1, "writing", 0.0), KillPoint(2, "committed", 0.0)]
    figures = run_seed("aiocommit", 0, tmp_path, batches=4, plan=plan)
    assert figures.kills, figures.line()  # at least one kill landed
    assert figures.starts == len(figures.kills) + 1, figures.line()
    assert figures.exactly_once and figures.clean, figures.line()
    assert figures.reader.observations > 0 and figures.reader.retracted == 0, figures.line()
