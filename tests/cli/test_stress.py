"""``aiocommit stress`` forwards to the harness's click group, imported lazily, as every
command found through the ``aiocommit.commands`` entry points."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint

import click
import pytest

from aiocommit.cli import entry_points
from aiocommit.cli.entry_points import GROUP
from aiocommit.cli.exits import EXIT_UNAVAILABLE
from tests.cli.conftest import Cli, one_error_line


def test_forwards_arguments(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int]] = []

    @click.group()
    def fake_main() -> None:
        """A stand-in for aiocommit_stress.cli.main."""

    @fake_main.command()
    @click.option("--files", type=int, default=1)
    @click.argument("scenario")
    def run(scenario: str, files: int) -> None:
        seen.append((scenario, files))
        click.echo(f"ran {scenario}")

    module = types.ModuleType("aiocommit_stress.cli")
    module.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aiocommit_stress.cli", module)
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
    monkeypatch.setitem(sys.modules, "aiocommit_stress.cli", None)
    result = cli("stress", "--help")
    assert result.exit_code == EXIT_UNAVAILABLE
    assert "pip install 'aiocommit-stress'" in one_error_line(result)


@click.command()
@click.argument("name")
def hello(name: str) -> None:
    """A command another package adds through the entry point group."""
    click.echo(f"hello {name}")


def test_commands_of_other_packages(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    added = {
        "hello": EntryPoint("hello", f"{__name__}:hello", GROUP),
        "broken": EntryPoint("broken", "aiocommit_no_such_plugin:main [extra]", GROUP),
    }
    monkeypatch.setattr(entry_points, "command_entry_points", lambda: added)
    listed = cli("--help")
    assert "hello" in listed.stdout and "broken" in listed.stdout and "stress" in listed.stdout
    result = cli("hello", "world")
    assert result.exit_code == 0 and result.stdout == "hello world\n"
    result = cli("broken")
    assert result.exit_code == EXIT_UNAVAILABLE
    assert "[extra]'" in one_error_line(result)
    assert cli("nope").exit_code == 2
