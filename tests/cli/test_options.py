"""Options on the command line: generated flags, ``--option`` with any name."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from aiocommit.cli.flags import (
    COMMIT_ONLY_OPTIONS,
    NOT_FLAGS,
    build_options,
    format_default,
    option_fields,
    option_flag,
    option_name,
)
from aiocommit.options import CommitOptions
from tests.cli.conftest import Cli


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("concurrency", "concurrency"),
        ("aiocommit.concurrency", "concurrency"),
        ("mapreduce.manifest.committer.io.threads", "concurrency"),
        ("spark.hadoop.mapreduce.manifest.committer.io.threads", "concurrency"),
        ("validate-output", "validate_output"),
        ("validate.output", "validate_output"),
        ("fs.azure.io.rate.limit", "rate_limit"),
        (" report_dir ", "report_dir"),
        ("io.threads", None),
        ("", None),
    ],
)
def test_option_name(key: str, name: str | None) -> None:
    assert option_name(key) == name


def test_every_hadoop_name_is_recognised() -> None:
    for name, hadoop in CommitOptions.names().items():
        assert option_name(name) == name
        if hadoop:
            assert option_name(hadoop) == name
            assert option_name("spark.hadoop." + hadoop) == name


def test_build_options_precedence() -> None:
    options = build_options(
        {"concurrency": 3, "validate_output": None, "report_dir": None},
        ["concurrency=9", "mapreduce.manifest.committer.validate.output=true", "rate_limit=2.5"],
    )
    assert options.concurrency == 3
    assert options.validate_output is True
    assert options.rate_limit == 2.5
    # the command line's defaults are the library's, but for every core in the rename stage
    assert build_options({}, []) == CommitOptions(processes=0)
    assert build_options({"processes": 1}, []).processes == 1
    assert build_options({}, ["rate_limit="]).rate_limit is None
    with pytest.raises(click.UsageError, match="bad option value"):
        build_options({}, ["max_attempts=0"])


def test_flags_per_command(cli: Cli) -> None:
    names = set(CommitOptions.names())
    assert {f.name for f in option_fields(commit=True)} == names - NOT_FLAGS
    assert {f.name for f in option_fields(commit=False)} == names - COMMIT_ONLY_OPTIONS - NOT_FLAGS
    for command in ("abort", "cleanup"):
        text = cli(command, "--help").stdout
        for name in names - COMMIT_ONLY_OPTIONS - NOT_FLAGS:
            assert (option_flag(name) + " ") in text or (option_flag(name) + "/") in text, name
        for name in COMMIT_ONLY_OPTIONS:
            assert option_flag(name) not in text.replace("--no-", "--"), name


def test_format_default() -> None:
    assert format_default(True) == "true"
    assert format_default(None) == "unset"
    assert format_default(256) == "256"
    assert format_default(0.05) == "0.05"


def test_cli_refuses_a_typo(cli: Cli, tmp_path: Path) -> None:
    result = cli(
        "commit",
        str(tmp_path),
        "--job-id",
        "job_1_0001",
        "--option",
        "mapreduce.manifest.committer.io.thread=4",
    )
    assert result.exit_code == 2
    assert (
        "--option unknown option 'mapreduce.manifest.committer.io.thread'; "
        "did you mean 'mapreduce.manifest.committer.io.threads'?"
    ) in result.stderr
