"""The checkout's sources compiled to bytecode once per test run (a pytest plugin, loaded
by the repository's ``conftest.py``).

Many tests start Python processes that import aiocommit from the checkout: the CLI, rename
workers, the stress harness, Spark's and the engines' Python workers. Where
``PYTHONDONTWRITEBYTECODE`` is set, or on a fresh clone, each of them would compile every
module it imports from source. The run's controller compiles them first (``compileall``,
which writes bytecode whatever that variable says and skips what is up to date), so every
process after it reads bytecode.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the folders whose modules test processes import
SOURCE_FOLDERS = ("src", "stress", "testing", "tests", "examples")


def pytest_configure(config: pytest.Config) -> None:
    """Compile ``SOURCE_FOLDERS`` in the controller, before any worker or test starts."""
    if hasattr(config, "workerinput"):
        return  # a pytest-xdist worker: its controller compiled them
    compile_sources()


def compile_sources() -> bool:
    """Write the bytecode of every module under ``SOURCE_FOLDERS`` that lacks it or is
    out of date; whether all compiled."""
    compiled = [
        compileall.compile_dir(ROOT / folder, quiet=2)
        for folder in SOURCE_FOLDERS
        if (ROOT / folder).is_dir()
    ]
    return all(compiled)
