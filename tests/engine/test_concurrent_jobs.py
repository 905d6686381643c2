"""Randomized concurrent jobs on one destination: every final state is a serial order of
the jobs that succeeded (issue 33, behaviour 5; ``tests/concurrent_jobs.py``). A modest
count runs here; the full counts are ``slow`` (``pytest --all``); each test prints its
figures on the terminal::

    pytest -m slow tests/engine/test_concurrent_jobs.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from aiocommit import commit_job, commit_task, setup_job
from aiocommit.stores.base import Store, join
from aiocommit.stores.local import LocalStore
from aiocommit.stores.multipart import supports_multipart
from tests.concurrent_jobs import Figures, cli_flags, cli_target, options_of, sweep, visible
from tests.helpers import exists, output, write_task
from tests.s3.helpers import outstanding
from tests.stores.s3_fixtures import s3_store_factory


def show(capsys: pytest.CaptureFixture[str], figures: Figures, store: str) -> None:
    """Print the figures (and the first failures) past pytest's capture."""
    with capsys.disabled():
        print("", figures.line(store), *figures.failures[:5], sep="\n")


#: scenarios per in-process store in the default tier, and in the full sweep
QUICK = 12
FULL = 100


async def test_concurrent_jobs_commit_as_if_one_after_another(
    store_root: tuple[Store, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed jobs are aborted (their re-runs are swept with ``-m slow``)."""
    store, root = store_root
    figures = await sweep(store, join(root, "dest"), QUICK, reruns=False)
    show(capsys, figures, type(store).__name__)
    assert figures.failures == []
    assert figures.exact == figures.scenarios == QUICK


@pytest.mark.slow
@pytest.mark.parametrize("reruns", [False, True], ids=["aborted", "rerun"])
async def test_concurrent_jobs_full_sweep(
    store_root: tuple[Store, str], reruns: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    store, root = store_root
    figures = await sweep(store, join(root, "dest"), FULL, seed=3300, reruns=reruns)
    show(capsys, figures, type(store).__name__)
    assert figures.failures == []
    assert figures.exact == figures.scenarios == FULL


#: scenarios with one CLI commit SIGKILLed, on local: here, and with ``-m slow``
KILLS_QUICK = 3
KILLS_FULL = 30
#: on moto the CLI's commit takes longer
S3_KILL_AFTER = (0.2, 1.0)


async def test_concurrent_jobs_with_a_killed_cli_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One job's ``aiocommit commit`` SIGKILLed, then re-run: still a serial order."""
    store = LocalStore()
    figures = await sweep(store, str(tmp_path / "dest"), KILLS_QUICK, kills=True)
    show(capsys, figures, "local (kills)")
    assert figures.failures == []
    assert figures.exact == figures.scenarios == KILLS_QUICK


@pytest.mark.slow
async def test_concurrent_jobs_killed_cli_sweep_local(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = LocalStore()
    figures = await sweep(store, str(tmp_path / "dest"), KILLS_FULL, seed=3301, kills=True)
    show(capsys, figures, "local (kills)")
    assert figures.failures == []
    assert figures.exact == figures.scenarios == KILLS_FULL
    assert figures.killed > 0


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_concurrent_jobs_killed_cli_sweep_s3(
    s3_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On moto: the CLI reaches it through ``AWS_ENDPOINT_URL_S3``."""
    async with s3_store_factory(s3_endpoint) as (store, root):
        figures = await sweep(
            store,
            join(root, "dest"),
            KILLS_FULL,
            seed=3301,
            kills=True,
            leftovers=_uploads_left,
            kill_after=S3_KILL_AFTER,
        )
    show(capsys, figures, "s3 (kills)")
    assert figures.failures == []
    assert figures.exact == figures.scenarios == KILLS_FULL
    assert figures.killed > 0


#: kills landing in the publish: this long after the killed CLI took the lease
KILL_IN_PUBLISH_AFTER = (0.0, 0.3)
KILLS_IN_PUBLISH = 20


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_concurrent_jobs_killed_in_publish_sweep_s3(
    s3_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each CLI commit SIGKILLed while it holds the lease (on moto a publish lasts long
    enough to be hit; locally it is over before a poll sees it): a neighbour takes the
    lease over and aborts it where that is exact, or finishes it (a replace that
    deleted old files, which S3 cannot restore), or the killed job's re-run does."""
    async with s3_store_factory(s3_endpoint) as (store, root):
        figures = await sweep(
            store,
            join(root, "dest"),
            KILLS_IN_PUBLISH,
            seed=3305,
            kills=True,
            leftovers=_uploads_left,
            kill_after=KILL_IN_PUBLISH_AFTER,
            kill_in_publish=True,
        )
    show(capsys, figures, "s3 (kills in the publish)")
    assert figures.failures == []
    assert figures.exact == figures.scenarios == KILLS_IN_PUBLISH
    assert figures.killed_holding_lease > 0


#: scenarios per emulated store with ``-m slow``, and how many run at a time (each in
#: its own destination: the emulators' request latency overlaps)
CLOUD_FULL = {"s3": 100, "adls": 20, "gcs": 20}
CLOUD_PARALLEL = 4


async def _uploads_left(store: Store, dest: str) -> list[str]:
    if not supports_multipart(store):
        return []
    return await outstanding(store, dest)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("reruns", [False, True], ids=["aborted", "rerun"])
async def test_concurrent_jobs_cloud_sweep(
    cloud_store_root: tuple[Store, str],
    request: pytest.FixtureRequest,
    reruns: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On the emulators, each store's default committer (S3: staging; a commit and an
    abort end only the job's own uploads); an append refuses a name clash on every
    store, so the serial model is the same for all."""
    store, root = cloud_store_root
    kind = request.node.callspec.params["cloud_store_root"]
    figures = await sweep(
        store,
        join(root, "dest"),
        CLOUD_FULL[kind],
        seed=3300,
        reruns=reruns,
        leftovers=_uploads_left,
        parallel=CLOUD_PARALLEL,
    )
    show(capsys, figures, kind)
    assert figures.failures == []
    assert figures.exact == figures.scenarios == CLOUD_FULL[kind]


@pytest.mark.slow
async def test_killed_s3_replace_taken_over_is_a_serial_order(s3_endpoint: str) -> None:
    """A ``replace_partitions`` CLI commit SIGKILLed just after its old file went (S3
    cannot restore it); a neighbour's append takes the expired lease over and finishes
    A's commit first; A's re-run reports it committed. The destination is A's files + B
    (the serial order A, B), whether the kill landed before A's commit point or after."""
    async with s3_store_factory(s3_endpoint) as (store, root):
        dest = join(root, "dest")
        old = await _committed_job(store, dest, {"p=0/old.dat": b"old"})
        assert old
        a = await _set_up_job(store, dest, {f"p=0/new-{i}.dat": b"a" for i in range(200)})
        b = await _set_up_job(store, dest, {"p=5/b.dat": b"b"})
        url, env = cli_target(store, dest)
        argv = [sys.executable, "-m", "aiocommit", "commit", url, "--job-id", a]
        argv += ["--no-progress", "--lease-seconds", "2", *cli_flags("replace_partitions")]
        process = await anyio.open_process(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:  # polling the store is the point: kill A once its old file is gone
            while await exists(store, join(dest, "p=0/old.dat")):
                if process.returncode is not None:
                    break
                await anyio.sleep(0.005)
            exited = process.returncode is not None  # finished, cleanup and all: no kill
        finally:
            process.kill()
            await process.wait()
            await process.aclose()
        await commit_job(dest, b, store=store, options=options_of("append", 2.0))
        a_files = {f"p=0/new-{i}.dat" for i in range(200)}
        assert set(visible(await output(store, dest))) == a_files | {"p=5/b.dat"}
        if not exited:  # a re-run after the take-over finished A: committed
            rerun = await commit_job(
                dest, a, store=store, options=options_of("replace_partitions", 2.0)
            )
            assert rerun.job_id == a and rerun.success
        assert set(visible(await output(store, dest))) == a_files | {"p=5/b.dat"}
        assert await outstanding(store, dest) == []
        assert not await exists(store, join(dest, "_temporary"))


async def _set_up_job(store: Store, dest: str, files: dict[str, bytes]) -> str:
    job_id = await setup_job(dest, store=store)
    attempt = await write_task(store, dest, job_id, 0, 0, files)
    await commit_task(attempt, store=store)
    return job_id


async def _committed_job(store: Store, dest: str, files: dict[str, bytes]) -> str:
    job_id = await _set_up_job(store, dest, files)
    await commit_job(dest, job_id, store=store)
    return job_id
