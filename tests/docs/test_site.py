"""The documentation site builds with warnings as errors, and says what the CLI does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from aiocommit.cli import exits, main
from tests.docs.conftest import DOCS, ROOT


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    configuration = (site / "configuration" / "index.html").read_text(encoding="utf-8")
    assert "mapreduce.manifest.committer.io.threads" in configuration
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="aiocommit.client.job.commit_job"' in api
    protocol = (site / "protocol" / "index.html").read_text(encoding="utf-8")
    assert '<pre class="mermaid"><code>stateDiagram-v2' in protocol  # rendered, not code
    for state in ("set up", "committing", "committed", "aborted"):
        assert f"<td>{state}</td>" in protocol


def test_nav_lists_every_page() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config[config.index("\nnav:") :]
    pages = set(re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)$", nav, flags=re.MULTILINE))
    on_disk = {
        path.relative_to(DOCS).as_posix()
        for path in DOCS.rglob("*.md")
        if "_hooks" not in path.parts
    }
    assert pages == on_disk
    for required in ("protocol.md", "architecture.md", "spark.md", "stress.md", "api.md"):
        assert required in pages


def test_cli_page_documents_commands_and_exit_codes() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for command in main.list_commands(click.Context(main)):
        assert f"`aiocommit {command}" in text, command
    codes = {int(code) for code in re.findall(r"^\| (\d+) \|", text, flags=re.MULTILINE)}
    constants = {value for name, value in vars(exits).items() if name.startswith("EXIT_")}
    assert codes == constants
