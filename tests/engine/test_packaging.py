"""What the package says about itself: its version, and classifiers that match the
Pythons it requires and CI tests."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from importlib.metadata import metadata, version
from pathlib import Path

import aiocommit

ROOT = Path(__file__).resolve().parents[2]


def test_version() -> None:
    assert aiocommit.__version__ == version("aiocommit")
    assert "__version__" in aiocommit.__all__


def test_classifiers_name_the_pythons_ci_tests() -> None:
    meta = metadata("aiocommit")
    classifiers = meta.get_all("Classifier") or []
    minor = re.fullmatch(r">=3\.(\d+)", meta["Requires-Python"])
    assert minor is not None
    listed = sorted(
        int(c.rsplit(".", 1)[1])
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert listed[0] == int(minor.group(1))
    assert "Typing :: Typed" in classifiers
    script = (ROOT / "scripts" / "test_pythons.sh").read_text()
    tested = sorted(
        int(v) for v in re.findall(r"versions=\(([\d. ]+)\)", script)[0].replace("3.", "").split()
    )
    assert listed == [int(minor.group(1)), *tested]  # 3.11 by scripts/test.sh
    assert "scripts/test_pythons.sh" in (ROOT / ".ci" / "run").read_text()


def test_importing_the_package_loads_its_public_names_when_asked() -> None:
    """``import aiocommit`` costs a rename worker, a Spark executor's Python worker or a
    service only what it uses; every public name still resolves, and a wrong one is an
    ``AttributeError``."""
    probe = textwrap.dedent(
        """
        import sys, aiocommit
        loaded = sorted(m for m in sys.modules if m.startswith("aiocommit."))
        from aiocommit import commit_job
        names = [getattr(aiocommit, name).__class__.__name__ for name in aiocommit.__all__]
        try:
            aiocommit.commit_jobs
        except AttributeError as error:
            missing = str(error)
        print(loaded, "client.job" in commit_job.__module__, len(names), missing, sep="|")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    loaded, found, names, missing = out.split("|")
    assert loaded == "[]", "import aiocommit loaded " + loaded
    assert found == "True"
    assert int(names) == len(aiocommit.__all__)
    assert "commit_jobs" in missing
    assert set(aiocommit.__all__) <= set(dir(aiocommit))
