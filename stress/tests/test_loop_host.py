"""``bench loop``'s service-like host (``loop_host``): the commit parts run in a process
that loads what a small aiohttp service using aiocommit loads, not the harness."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from aiocommit_stress.cli import main

#: what the harness loads and a service does not
HARNESS_MODULES = ("click", "rich", "psutil", "aiocommit.cli", "aiocommit_stress.cli")


def test_the_host_loads_the_service_and_not_the_harness() -> None:
    code = (
        "import json, sys\n"
        "import aiocommit_stress.loop_host\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    loaded = set(json.loads(out))
    assert {"aiohttp.web", "aiocommit", "aiocommit_stress.loop_probes"} <= loaded
    assert not loaded & set(HARNESS_MODULES)


def _local_part(tmp_path: Path, host: str) -> dict[str, Any]:
    out = tmp_path / f"{host}.json"
    result = CliRunner().invoke(
        main,
        [
            "bench", "loop", "--parts", "local", "--files", "200", "--host", host,
            "--workdir", str(tmp_path), "--json", str(out), "--no-progress",
        ],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output + repr(result.exception)
    (local,) = json.loads(out.read_text())["results"]
    assert isinstance(local, dict)
    return local


def test_a_commit_part_runs_in_the_service_host_and_verifies(tmp_path: Path) -> None:
    """The same part in the service host and in the bench's process: both commit the
    job exactly; the service host tracks fewer objects (no harness)."""
    service, bench = _local_part(tmp_path, "service"), _local_part(tmp_path, "bench")
    assert (service["host"], bench["host"]) == ("service", "bench")
    for figures in (service, bench):
        assert figures["verified"] is True
        assert figures["files"] == 200
        assert figures["gaps"] > 0
        assert "job_stage_rename_files" in figures["stage_worst_stall_ms"]
        assert figures["host_full_collection_ms"] > 0
        # the worst slice, split: the collections in it and the rest
        parts = figures["worst_stall_collecting_ms"] + figures["worst_stall_rest_ms"]
        assert abs(parts - figures["worst_stall_ms"]) <= 0.2, figures
        assert figures["worst_rest_ms"] >= figures["worst_stall_rest_ms"]
    assert service["host_tracked_objects"] < bench["host_tracked_objects"]
