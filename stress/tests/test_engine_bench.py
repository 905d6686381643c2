"""Smoke runs of the engine benchmark (``aiocommit_stress.engine_bench``): every figure
printed, no speed asserted."""

from __future__ import annotations

from pathlib import Path

# the benchmark loads its engines when it runs: this import puts the module in the
# engines tier (and leaves it uncollected where Dask is not installed)
import distributed  # noqa: F401
import pytest

from aiocommit_stress import engine_bench

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def test_engine_bench_dask_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ratios = engine_bench.run_engine("dask", tmp_path, rows=2_000, files=20, rounds=1)
    out = capsys.readouterr().out
    assert set(ratios) == {"flat", "partitioned"} and all(r > 0 for r in ratios.values())
    rounds = [line for line in out.splitlines() if " round 0 " in line]
    assert len(rounds) == 4
    # 20 files each way: 20 partitions flat; 2 partitions x 10 values partitioned
    assert all(line.rstrip().endswith("20 files") for line in rounds)
    assert out.count("ratio aiocommit/own") == 2


def test_engine_profile_dask_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every part of the profile printed: the job commit's stages and each task step."""
    from aiocommit_stress import engine_profile

    engine_profile.profile("dask", tmp_path, rows=2_000, files=20, rounds=1)
    out = capsys.readouterr().out
    medians = out[out.index("dask: medians") :]
    for part in (
        "driver job setup",
        "worker job commit",
        "job_stage_load_manifests",
        "job_stage_rename_files",
        "task setup (median of 20)",
        "task commit (sum)",
        "own write",
        "aiocommit write",
    ):
        assert part in medians, part
    # each task step with its own thread's CPU (a number, not nan)
    setup = next(line for line in medians.splitlines() if "task setup (median of 20)" in line)
    assert setup.rstrip().endswith("thread")
    assert float(setup.split()[-2]) >= 0


def test_engine_profile_local_attempts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No engine: the CPU per local attempt and of their job commit, per round and median."""
    from aiocommit_stress import engine_profile

    per_attempt, job_commit = engine_profile.local_attempts(tmp_path, attempts=5, rounds=2)
    out = capsys.readouterr().out
    assert out.count("local round") == 2
    assert "local: medians over 2 rounds of 5 attempts" in out
    assert per_attempt > 0 and job_commit > 0
    committed = sorted(p.name for p in (tmp_path / "local-1").iterdir())
    assert committed == ["_SUCCESS"] + [f"part-{task:05d}.bin" for task in range(5)]
