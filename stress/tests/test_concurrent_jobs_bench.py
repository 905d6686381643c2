"""``bench concurrent-jobs``: both drivers commit every job and print the ratio."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from aiocommit_stress.cli import main


@pytest.mark.slow
@pytest.mark.parametrize("drivers", ["processes", "loop"])
def test_the_bench_commits_every_job_both_ways(tmp_path: Path, drivers: str) -> None:
    argv = ["bench", "concurrent-jobs", "--jobs", "2", "--files", "40", "--tasks", "2"]
    argv += ["--drivers", drivers, "--workdir", str(tmp_path), "--out", str(tmp_path)]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert f"concurrent-jobs ({drivers}): 2 jobs x 40 files" in result.output
    assert "ratio" in result.output and "verification PASS" in result.output
