"""docs/architecture.md's module table cannot drift: every module of ``src/aiocommit`` is
listed, every listed module exists, and each row says what the module's docstring says
(``python scripts/module_table.py`` rewrites it)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from tests.docs.conftest import DOCS, ROOT

ROW = re.compile(r"^\| `([^`]+\.py)` \|", re.MULTILINE)


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "module_table", ROOT / "scripts" / "module_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def listed() -> list[str]:
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = page.split("<!-- modules:start -->")[1].split("<!-- modules:end -->")[0]
    return ROW.findall(table)


def test_every_module_is_listed_once_and_every_listed_module_exists() -> None:
    source = ROOT / "src" / "aiocommit"
    modules = {path.relative_to(source).as_posix() for path in source.rglob("*.py")}
    rows = listed()
    assert len(rows) == len(set(rows))
    assert sorted(modules - set(rows)) == [], "not in docs/architecture.md's table"
    assert sorted(set(rows) - modules) == [], "listed, but no such module"


def test_the_table_says_what_the_docstrings_say() -> None:
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    assert script().with_table(page) == page, "stale: run python scripts/module_table.py"


def test_a_row_is_the_first_sentence_of_the_docstring(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('"""The package."""\n')
    (tmp_path / "pkg" / "a.py").write_text(
        '"""Does one thing: well. Then more\\nof it.\\n\\nDetails."""\n'
    )
    (tmp_path / "b.py").write_text("x = 1\n")
    assert script().table(tmp_path).splitlines()[2:] == [
        "| `b.py` |  |",
        "| `pkg/__init__.py` | The package. |",
        "| `pkg/a.py` | Does one thing: well. |",
    ]
