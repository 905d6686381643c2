"""Randomized concurrent jobs on one destination: every final state is a serial order of
the jobs that succeeded (issue 33, behaviour 5; ``tests/concurrent_jobs.py``). A modest
count runs here; the full counts (``slow``) run when ``AIOCOMMIT_FULL_SWEEPS=1`` and print
the figures::

    AIOCOMMIT_FULL_SWEEPS=1 pytest -s -m slow tests/engine/test_concurrent_jobs.py
"""

from __future__ import annotations

import os

import pytest

from aiocommit.stores.base import Store, join
from tests.concurrent_jobs import sweep

#: the full sweeps take minutes (the emulators' tens of minutes): asked for explicitly
FULL_SWEEPS = pytest.mark.skipif(
    os.environ.get("AIOCOMMIT_FULL_SWEEPS") != "1", reason="set AIOCOMMIT_FULL_SWEEPS=1"
)
#: scenarios per in-process store in the default tier, and in the full sweep
QUICK = 12
FULL = 100


async def test_concurrent_jobs_commit_as_if_one_after_another(
    store_root: tuple[Store, str],
) -> None:
    """Failed jobs are aborted (their re-runs are swept with ``-m slow``)."""
    store, root = store_root
    figures = await sweep(store, join(root, "dest"), QUICK, reruns=False)
    print(figures.line(type(store).__name__))
    assert figures.failures == []
    assert figures.exact == figures.scenarios == QUICK


@pytest.mark.slow
@FULL_SWEEPS
@pytest.mark.parametrize("reruns", [False, True], ids=["aborted", "rerun"])
async def test_concurrent_jobs_full_sweep(store_root: tuple[Store, str], reruns: bool) -> None:
    store, root = store_root
    figures = await sweep(store, join(root, "dest"), FULL, seed=3300, reruns=reruns)
    print(figures.line(type(store).__name__), *figures.failures[:5], sep="\n")
    assert figures.failures == []
