"""The configuration reference lists every option, its Hadoop name and its default."""

from __future__ import annotations

import logging
import types

import pytest

from aiocommit.cli.flags import NOT_FLAGS, format_default, option_flag
from aiocommit.options import option_specs
from tests.docs.conftest import DOCS, options_hook

PAGE = DOCS / "configuration.md"


def _rows() -> dict[str, str]:
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            rows[line.split("`")[1]] = line
    return rows


def test_every_option_is_documented() -> None:
    rows = _rows()
    specs = option_specs()
    assert set(rows) == {spec.name for spec in specs}
    for spec in specs:
        row = rows[spec.name]
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert cells[1] == f"`{spec.path}`", row
        assert cells[3] == (f"`{spec.hadoop}`" if spec.hadoop else "—"), row
        assert cells[4].startswith(f"`{format_default(spec.default)}`"), row
        if spec.command_line_default is not None:  # the command line's own, said too
            assert f"command line, Spark driver: `{spec.command_line_default}`" in cells[4]
        if spec.name in NOT_FLAGS:
            assert cells[2].startswith("—"), row
        else:
            assert cells[2].startswith(f"`{option_flag(spec.name)}`"), row
        assert spec.doc in row


def test_committed_table_is_current() -> None:
    hook = options_hook()
    text = PAGE.read_text(encoding="utf-8")
    assert hook.replace_table(text) == text, "run: python docs/_hooks/options.py"


def test_hook_regenerates_and_warns_when_stale(caplog: pytest.LogCaptureFixture) -> None:
    hook = options_hook()
    page = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="configuration.md"))
    stale = f"# Configuration\n\n{hook.BEGIN}\n| old |\n{hook.END}\n"
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.options"):
        fresh = hook.on_page_markdown(stale, page=page, config={}, files=[])
    assert "`mapreduce.manifest.committer.io.threads`" in fresh
    assert "| old |" not in fresh
    assert "out of date" in caplog.text
    other = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="index.md"))
    assert hook.on_page_markdown(stale, page=other, config={}, files=[]) == stale
    with pytest.raises(ValueError, match="markers"):
        hook.replace_table("no markers here")
