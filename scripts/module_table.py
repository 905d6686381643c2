"""Write docs/architecture.md's module table from the modules themselves: one row per
module of ``src/aiocommit``, its first docstring sentence beside it, between the page's
``<!-- modules:start -->`` and ``<!-- modules:end -->`` markers.

    python scripts/module_table.py           # rewrite the table
    python scripts/module_table.py --check   # exit 1 when the page's table is stale

``tests/docs/test_module_table.py`` fails when the page and the modules disagree.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "aiocommit"
PAGE = ROOT / "docs" / "architecture.md"
START = "<!-- modules:start -->"
END = "<!-- modules:end -->"
SENTENCE_END = re.compile(r"(?<=[.!?])\s")
#: a first sentence longer than this is cut at a word
LONGEST = 180


def modules(source: Path = SOURCE) -> list[Path]:
    """Every module of the package, as paths relative to it, packages first in each folder."""
    return sorted(
        (path.relative_to(source) for path in source.rglob("*.py")),
        key=lambda path: (path.parent.parts, path.name != "__init__.py", path.name),
    )


def summary(path: Path) -> str:
    """The module docstring's first sentence, on one line (empty without a docstring)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    first = SENTENCE_END.split(paragraph, maxsplit=1)[0]
    if len(first) > LONGEST:
        first = first[:LONGEST].rsplit(" ", 1)[0] + " …"
    return first.replace("|", "\\|")


def table(source: Path = SOURCE) -> str:
    rows = ["| module | what it is |", "| --- | --- |"]
    for relative in modules(source):
        rows.append(f"| `{relative.as_posix()}` | {summary(source / relative)} |")
    return "\n".join(rows)


def with_table(page: str, source: Path = SOURCE) -> str:
    """``page`` with the text between its markers replaced by the current table."""
    before, start, rest = page.partition(START)
    _, end, after = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{PAGE.relative_to(ROOT)}: no {START} ... {END} markers")
    return f"{before}{START}\n{table(source)}\n{END}{after}"


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    wanted = with_table(page)
    if "--check" in argv:
        if page != wanted:
            print(
                f"{PAGE.relative_to(ROOT)}: the module table is stale: run "
                "python scripts/module_table.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if page != wanted:
        PAGE.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
