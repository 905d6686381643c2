"""The run's sources read as bytecode by the processes tests start (tests/bytecode.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.bytecode import ROOT, SOURCE_FOLDERS


def test_every_source_module_has_current_bytecode_once_the_run_started() -> None:
    stale = []
    for folder in SOURCE_FOLDERS:
        for source in (ROOT / folder).rglob("*.py"):
            cached = Path(importlib.util.cache_from_source(str(source)))
            if not cached.exists() or cached.stat().st_mtime < source.stat().st_mtime:
                stale.append(source.relative_to(ROOT))
    assert not stale, f"no current bytecode for {stale[:5]} and {len(stale[5:])} more"
