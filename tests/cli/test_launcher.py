"""The library needs neither click nor rich (the ``cli`` extra); without them the
``aiocommit`` command says how to install them. ``scripts/wheel_check.sh`` checks the same
on the built wheel in a fresh venv."""

from __future__ import annotations

import subprocess
import sys

#: make ``import click`` and ``import rich`` fail, as in a venv without the cli extra
BLOCK = "import sys; sys.modules['click'] = None; sys.modules['rich'] = None; "


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + code], capture_output=True, text=True, timeout=60
    )


def test_library_imports_without_the_cli_extra() -> None:
    done = run(
        "import aiocommit, aiocommit.stores.faulty, aiocommit.committers.manifest.rename_files, "
        "aiocommit.integrations.spark.paths; print('ok')"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_command_without_the_cli_extra_says_how_to_install_it() -> None:
    done = run("from aiocommit.__main__ import main; main()")
    assert done.returncode == 4
    assert done.stderr.strip() == (
        "aiocommit: error: the command line needs 'click', which is not installed: "
        "pip install 'aiocommit[cli]'"
    )


def test_python_dash_m_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aiocommit", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "aiocommit" in done.stdout
