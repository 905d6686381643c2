"""``aiocommit stress`` forwards to the harness's click group, imported lazily."""

from __future__ import annotations

import sys
import types

import click
import pytest

from aiocommit.cli import EXIT_UNAVAILABLE
from tests.cli.conftest import Cli, one_error_line


def test_forwards_arguments(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int]] = []

    @click.group()
    def fake_main() -> None:
        """A stand-in for aiocommit.stress.cli.main."""

    @fake_main.command()
    @click.option("--files", type=int, default=1)
    @click.argument("scenario")
    def run(scenario: str, files: int) -> None:
        seen.append((scenario, files))
        click.echo(f"ran {scenario}")

    module = types.ModuleType("aiocommit.stress.cli")
    module.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aiocommit.stress.cli", module)
    result = cli("stress", "run", "big", "--files", "7")
    assert result.exit_code == 0, result.output
    assert seen == [("big", 7)]
    assert "ran big" in result.stdout
    helped = cli("stress", "--help")
    assert helped.exit_code == 0
    assert "aiocommit stress" in helped.stdout and "run" in helped.stdout
    assert cli("stress", "nope").exit_code == 2


def test_missing_harness(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "aiocommit.stress.cli", None)
    result = cli("stress", "--help")
    assert result.exit_code == EXIT_UNAVAILABLE
    assert "aiocommit[stress]" in one_error_line(result)
