"""RSS stays flat over many job commits in one long-lived process (issue 21).

Each job commit used to leave its 8 MB of plan copies (the loaded manifests' bytes) in
the malloc arena of whichever pooled worker thread assembled them; glibc keeps that much
free memory per arena, and the next commit's thread used another arena, so RSS grew by a
part per commit until every arena held one (+2 MB per commit at 4,000 files, +5 MB at
20,000). The bench runs in a fresh process, as a service would commit."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from aiocommit.stress.loop_bench import RSS_GROWTH_TARGET_MB


def test_rss_is_flat_over_the_last_half_of_twelve_commits(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "aiocommit.stress", "bench", "loop", "--parts", "rss",
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
    tail = samples[len(samples) // 2 :]
    growth = statistics.linear_regression(range(len(tail)), tail).slope * len(tail)
    assert growth <= RSS_GROWTH_TARGET_MB, f"RSS after each commit (MB): {samples}"
