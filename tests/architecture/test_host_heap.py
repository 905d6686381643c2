"""What a commit loads into its host's process: only the modules it uses, since every
module's objects lengthen each full garbage collection of the host (a loop stall)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import aiocommit
from aiocommit._version import VERSION

ROOT = Path(__file__).resolve().parents[2]


def test_the_version_is_the_one_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert declared == VERSION
    assert aiocommit.__version__ == declared


def _loaded_after(code: str) -> set[str]:
    """The modules loaded in a new interpreter after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_a_commit_in_the_callers_loop_loads_no_process_or_metadata_module() -> None:
    loaded = _loaded_after(
        "import asyncio\n"
        "from aiocommit.demo import run_demo\n"
        "dest, summary, _ = asyncio.run(run_demo('memory://heap/out'))\n"
        "assert summary.success and summary.diagnostics['aiocommit.version']"
    )
    assert "aiocommit.committers.manifest.rename_workers" in loaded  # the path was taken
    assert not {"importlib.metadata", "multiprocessing.connection"} & loaded
