"""RSS stays flat over many job commits in one long-lived process (issue 21).

Each job commit used to leave its 8 MB of plan copies (the loaded manifests' bytes) in
the malloc arena of whichever pooled worker thread assembled them; glibc keeps that much
free memory per arena, and the next commit's thread used another arena, so RSS grew by a
part per commit until every arena held one (+2 MB per commit at 4,000 files, +5 MB at
20,000). The bench runs in a fresh process, as a service would commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aiocommit_stress.loop_bench import RSS_GROWTH_TARGET_MB, rss_figures


@pytest.mark.slow
def test_rss_is_flat_over_the_last_half_of_twelve_commits(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "aiocommit_stress", "bench", "loop", "--parts", "rss",
            "--rss-files", "2000", "--rss-commits", "12", "--rss-processes", "0",
            "--workdir", str(tmp_path), "--out", str(tmp_path / "out"), "--no-progress",
            "--json", str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr
    samples = json.loads(out.read_text())["results"][0]["settings"]["0"]["rss_mb"]
    assert len(samples) == 12
    figures = rss_figures(samples)
    assert figures["tail_growth_mb"] <= RSS_GROWTH_TARGET_MB, f"RSS after each commit: {figures}"


def test_one_commit_s_transient_is_not_growth_but_a_steady_leak_is() -> None:
    """RSS right after a commit is sometimes ~2 MB higher for that one commit (freed
    memory not yet returned). One such sample at the end made the least-squares trend of
    a flat series +1.1 MB, over the bound; a steady 0.15 MB per commit must still fail."""
    flat_with_transient = [64.0] * 19 + [66.0]
    assert rss_figures(flat_with_transient)["flat"]
    steady_leak = [60.0 + 0.15 * commit for commit in range(20)]
    figures = rss_figures(steady_leak)
    assert not figures["flat"]
    assert figures["tail_growth_mb"] == 1.5
