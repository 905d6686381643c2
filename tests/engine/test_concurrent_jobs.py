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
from aiocommit.stores.multipart import supports_multipart
from tests.concurrent_jobs import sweep
from tests.s3.helpers import outstanding

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


#: scenarios per emulated store with ``-m slow``
CLOUD_FULL = {"s3": 100, "adls": 20, "gcs": 20}


async def _uploads_left(store: Store, dest: str) -> list[str]:
    if not supports_multipart(store):
        return []
    return await outstanding(store, dest)


@pytest.mark.slow
@FULL_SWEEPS
@pytest.mark.parametrize("reruns", [False, True], ids=["aborted", "rerun"])
@pytest.mark.parametrize("append_overwrites", [False, True], ids=["refused", "overwrites"])
async def test_concurrent_jobs_cloud_sweep(
    cloud_store_root: tuple[Store, str],
    request: pytest.FixtureRequest,
    reruns: bool,
    append_overwrites: bool,
) -> None:
    """On the emulators, each store's default committer (S3: staging, its commit and
    abort not sweeping every upload under the destination, which takes a live
    neighbour's uploads until a job aborts only its own). ``overwrites``: the serial
    model lets an append overwrite a same-named file, as S3's staging committer still
    does (issue 33, behaviour 2): the lease's serial order, apart from that."""
    store, root = cloud_store_root
    kind = request.node.callspec.params["cloud_store_root"]
    figures = await sweep(
        store,
        join(root, "dest"),
        CLOUD_FULL[kind],
        seed=3300,
        reruns=reruns,
        leftovers=_uploads_left,
        append_overwrites=append_overwrites,
    )
    print(figures.line(kind), *figures.failures[:5], sep="\n")
    assert figures.failures == []
