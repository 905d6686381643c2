"""A sample of the randomized concurrent-jobs sweep (``aiocommit_stress.concurrent_sweep``):
every final state is a serial order of the jobs that succeeded (issue 33, behaviour 5).
The full counts are ``python -m aiocommit_stress sweep concurrent-jobs`` (``scripts/sweeps.sh``,
run by CI after the tests); each test here prints its figures on the terminal."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from aiocommit import (
    InvalidInput,
    PermissionDenied,
    Transient,
    commit_job,
    commit_task,
    setup_job,
)
from aiocommit.stores.base import Store, join
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit_stress import concurrent_sweep
from aiocommit_stress.cli import main
from aiocommit_stress.concurrent_sweep import (
    KILL_AFTER_OF,
    Figures,
    PlannedJob,
    VariantFigures,
    _finish_failed,
    _set_up,
    cli_target,
    output,
    outstanding_uploads,
    serial_outcomes,
    steady,
    sweep,
    visible,
    write_task,
)


def show(capsys: pytest.CaptureFixture[str], figures: Figures, store: str) -> None:
    """Print the figures (and the first failures) past pytest's capture."""
    with capsys.disabled():
        print("", figures.line(store), *figures.failures[:5], sep="\n")


#: scenarios per in-process store, and with a SIGKILLed CLI commit on local
QUICK = 12
KILLS_QUICK = 3
#: scenarios per emulated store (failures re-run), and with a SIGKILLed CLI commit
CLOUD_QUICK = 4
CLOUD_KILLS_QUICK = 2
#: a kill seed whose first scenarios SIGKILL an append mid-publish (after 3 and 4 of its
#: files are in place), whatever the machine's speed
CLOUD_KILLS_SEED = 3719


async def test_concurrent_jobs_commit_as_if_one_after_another(
    store_root: tuple[Store, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed jobs are aborted (their re-runs: the emulator sample and the full sweep)."""
    store, root = store_root
    figures = await sweep(store, join(root, "dest"), QUICK, reruns=False)
    show(capsys, figures, type(store).__name__)
    assert figures.failures == []
    assert figures.exact == figures.scenarios == QUICK


async def test_concurrent_jobs_with_a_killed_cli_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One job's ``aiocommit commit`` SIGKILLed, then re-run: still a serial order."""
    figures = await sweep(LocalStore(), str(tmp_path / "dest"), KILLS_QUICK, kills=True)
    show(capsys, figures, "local (kills)")
    assert figures.failures == []
    assert figures.exact == figures.scenarios == KILLS_QUICK


async def test_concurrent_jobs_on_each_emulator(
    cloud_store_root: tuple[Store, str],
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Failed jobs run again, then scenarios with a SIGKILLed CLI commit: the CLI reaches
    the emulator through the variables the store's docs name."""
    store, root = cloud_store_root
    kind = request.node.callspec.params["cloud_store_root"]
    figures = await sweep(store, join(root, "rerun"), CLOUD_QUICK, seed=3300, parallel=4)
    show(capsys, figures, kind)
    assert figures.failures == []
    assert figures.exact == figures.scenarios == CLOUD_QUICK
    kills = await sweep(
        store,
        join(root, "kills"),
        CLOUD_KILLS_QUICK,
        seed=CLOUD_KILLS_SEED,
        kills=True,
        kill_after=KILL_AFTER_OF[kind],
    )
    show(capsys, kills, f"{kind} (kills)")
    assert kills.failures == []
    assert kills.exact == kills.scenarios == CLOUD_KILLS_QUICK
    assert kills.killed_in_publish == CLOUD_KILLS_QUICK


async def test_the_cli_reaches_each_emulator_as_a_user_points_it(
    cloud_store_root: tuple[Store, str],
) -> None:
    """``aiocommit commit URL`` in a process of its own, with only the store's documented
    variables (``cli_target``: none inherited), commits a job on each emulator."""
    store, root = cloud_store_root
    dest = join(root, "dest")
    job_id = await setup_job(dest, store=store)
    files = {f"p=0/f{n}.dat": b"x" for n in range(3)}
    await commit_task(await write_task(store, dest, job_id, 0, 0, files), store=store)
    url, env = cli_target(store, dest)
    argv = [sys.executable, "-m", "aiocommit", "commit", url, "--job-id", job_id, "--no-progress"]
    done = await anyio.run_process(argv, env=env, check=False, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr.decode()
    assert await output(store, dest) == files
    assert await outstanding_uploads(store, dest) == []


def test_a_killed_job_its_rerun_cannot_find_counts_committed_or_not() -> None:
    """A killed commit that cleaned up before the kill landed, its ``_SUCCESS`` replaced by
    a later job's, is found by no re-run: the state with its whole output in any serial
    place is as exact as the state without it; part of its output is not."""
    older = {"p=2/part-2.dat": b"older", "p=3/part-1.dat": b"older"}
    job0 = PlannedJob("job0", "replace_partitions", {"p=3/part-1.dat": b"0"}, False, 0.0, False)
    job1 = PlannedJob("job1", "replace_partitions", {"p=2/part-1.dat": b"1"}, False, 0.0, False)
    own = {f"p=3/job2-{n}.dat": b"2" for n in range(3)}
    job2 = PlannedJob("job2", "append", own, False, 0.0, False)
    with_job2 = {"p=2/part-1.dat": b"1", "p=3/part-1.dat": b"0", **own}
    without_job2 = {"p=2/part-1.dat": b"1", "p=3/part-1.dat": b"0"}
    assert with_job2 not in serial_outcomes(older, [job0, job1])
    either = serial_outcomes(older, [job0, job1], [job2])
    assert with_job2 in either and without_job2 in either
    assert {**without_job2, "p=3/job2-0.dat": b"2"} not in either


async def test_a_job_killed_after_its_clean_up_is_found_by_no_rerun(tmp_path: Path) -> None:
    """Why the sweep counts it either way: a job that committed and cleaned up, its
    ``_SUCCESS`` replaced by a later job's, is a ``JobNotFound`` to its re-run."""
    store, dest = LocalStore(), str(tmp_path / "dest")
    killed = PlannedJob("job0", "append", {"p=0/a.dat": b"a"}, False, 0.0, False)
    later = PlannedJob("job1", "append", {"p=1/b.dat": b"b"}, False, 0.0, False)
    for job in (killed, later):
        await _set_up(store, dest, job, None)
        await commit_job(dest, job.job_id, store=store)
    killed.killed = True  # after its clean-up, the lease released
    await _finish_failed(store, dest, killed)
    assert killed.vanished and not killed.succeeded
    found = visible(await output(store, dest))
    assert found not in serial_outcomes({}, [later])
    assert found in serial_outcomes({}, [later], [killed])


def test_the_cli_cannot_reach_a_memory_store() -> None:
    with pytest.raises(InvalidInput, match="cannot reach"):
        cli_target(MemoryStore("sweep-test"), "/dest")


def test_the_sweep_command_prints_the_figures() -> None:
    """It prints the figures, and gives the library's log level back (it quiets the
    take-overs' warnings while it runs)."""
    before = logging.getLogger("aiocommit").level
    result = CliRunner().invoke(
        main, ["sweep", "concurrent-jobs", "--store", "memory", "--scenarios", "2"]
    )
    assert result.exit_code == 0, result.output
    assert logging.getLogger("aiocommit").level == before
    assert "memory (failures aborted, seed 3300): 2 scenarios, 2 exact" in result.output
    assert "concurrent-jobs sweep: 4/4 exact" in result.output


def test_the_sweep_command_fails_on_an_inexact_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    async def one_inexact(
        kind: str,
        *args: object,
        on_variant: Callable[[VariantFigures], None],
        **kwargs: object,
    ) -> list[VariantFigures]:
        figures = Figures(scenarios=2, exact=1, failures=["scenario 1: lease left"])
        variant = VariantFigures(kind, "failures aborted", 3300, figures)
        on_variant(variant)
        return [variant]

    monkeypatch.setattr(concurrent_sweep, "sweep_variants", one_inexact)
    result = CliRunner().invoke(main, ["sweep", "concurrent-jobs", "--store", "local"])
    assert result.exit_code == 1
    assert "inexact: scenario 1: lease left" in result.output
    assert "1/2 exact" in result.output


async def test_a_check_rides_out_a_passing_store_error_only() -> None:
    calls = 0

    async def flaky() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Transient("500 Internal Server Error", path="/d", operation="list_dir")
        return calls

    assert await steady(flaky) == 2

    async def refused() -> int:
        raise PermissionDenied("403", path="/d", operation="list_dir")

    with pytest.raises(PermissionDenied):
        await steady(refused)
