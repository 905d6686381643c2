"""Helpers for the documentation tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"


def options_hook() -> ModuleType:
    """``docs/_hooks/options.py``, the mkdocs hook that generates the options table."""
    spec = importlib.util.spec_from_file_location(
        "docs_options_hook", DOCS / "_hooks" / "options.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
