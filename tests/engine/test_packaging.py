"""What the package says about itself: its version, and classifiers that match the
Pythons it requires and CI tests."""

from __future__ import annotations

import re
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
