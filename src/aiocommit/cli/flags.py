"""Command line flags: one per leaf of ``CommitOptions`` (its flat name), ``--option
KEY=VALUE`` (any key ``aiocommit.options.resolve_key`` takes), the job's ID and attempt,
durations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from aiocommit.cli.units import parse_duration
from aiocommit.errors import InvalidInput
from aiocommit.options import (
    CONFLICT_MODES,
    CommitOptions,
    OptionSpec,
    UnknownOption,
    command_line_defaults,
    option_specs,
)
from aiocommit.protocol.layout import JobLayout

F = TypeVar("F", bound=Callable[..., Any])

#: options that only matter to a job commit (abort and cleanup do not take them)
COMMIT_ONLY_OPTIONS = frozenset(
    {
        "delete_target_files",
        "validate_output",
        "write_success",
        "cleanup_skip",
        "report_dir",
        "diagnostics_dir",
        "use_source_etag",
        "processes",
        "tune_gc",
        "conflict_mode",
        "replace_partitions",
        "part_size",
    }
)

#: options no command takes as a flag: the committer is chosen when a job is set up,
#: which no command does (a job keeps the committer it was set up with)
NOT_FLAGS = frozenset({"committer"})

#: options whose values are one of a few words
CHOICES = {"conflict_mode": CONFLICT_MODES}


def format_default(value: object) -> str:
    """A default as a user writes it: ``true``, ``256``, ``0.05``, ``unset``."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def option_fields(*, commit: bool) -> list[OptionSpec]:
    """The ``CommitOptions`` leaves a command takes as flags."""
    return [
        spec
        for spec in option_specs()
        if spec.name not in NOT_FLAGS and (commit or spec.name not in COMMIT_ONLY_OPTIONS)
    ]


def option_flag(name: str) -> str:
    """The command line flag of an option: ``validate_output`` -> ``--validate-output``."""
    return "--" + name.replace("_", "-")


def commit_options(*, commit: bool) -> Callable[[F], F]:
    """Decorate a command with one flag per ``CommitOptions`` leaf, plus ``--option``."""

    def decorate(function: F) -> F:
        function = click.option(
            "--option",
            "-o",
            "option_pairs",
            multiple=True,
            metavar="KEY=VALUE",
            help="Set any option by our name (concurrency), its tree path "
            "(limits.concurrency), a Hadoop name (mapreduce.manifest.committer.io.threads, "
            "fs.s3a.committer.name, fs.s3a.endpoint) or spark.hadoop.NAME. Repeatable; "
            "the flags above win.",
        )(function)
        for spec in reversed(option_fields(commit=commit)):
            hadoop = spec.hadoop
            default = (
                spec.default if spec.command_line_default is None else spec.command_line_default
            )
            help_text = f"{spec.doc} [default: {format_default(default)}]" + (
                f" (Hadoop: {hadoop})" if hadoop else ""
            )
            flag = option_flag(spec.name)
            kind = spec.kind
            if kind == "bool":
                decorator = click.option(
                    f"{flag}/--no-{flag[2:]}", spec.name, default=None, help=help_text
                )
            elif spec.name in CHOICES:
                decorator = click.option(
                    flag,
                    spec.name,
                    type=click.Choice(CHOICES[spec.name], case_sensitive=False),
                    default=None,
                    help=help_text,
                )
            else:
                types: dict[str, Any] = {
                    "int": click.INT,
                    "float": click.FLOAT,
                    "str": click.STRING,
                }
                decorator = click.option(
                    flag,
                    spec.name,
                    type=types.get(kind, click.STRING),
                    default=None,
                    help=help_text,
                    metavar=kind.upper() if kind != "str" else "TEXT",
                )
            function = decorator(function)
        return function

    return decorate


def option_name(key: str) -> str | None:
    """The ``CommitOptions`` field a key names (``CommitOptions.option_for``), or None."""
    return CommitOptions.option_for(key)


def _settings(pairs: Sequence[str]) -> dict[str, str]:
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--option {pair!r}: expected KEY=VALUE")
        settings[key.strip()] = value
    return settings


def build_options(values: Mapping[str, Any], pairs: Sequence[str]) -> CommitOptions:
    """``CommitOptions`` from ``--option KEY=VALUE`` pairs and flag values (flags win),
    with the command line's defaults (``command_line_defaults()``: every core for the
    rename stage); ``click.UsageError`` for an unknown key or a bad value."""
    settings = _settings(pairs)
    fields = CommitOptions.names()
    overrides = {k: v for k, v in values.items() if k in fields and v is not None}
    try:
        return CommitOptions.from_mapping(
            settings, others="error", defaults=command_line_defaults(), **overrides
        )
    except UnknownOption as error:
        raise click.UsageError(f"--option {error}") from None
    except InvalidInput as error:
        raise click.UsageError(f"bad option value: {error}") from None


def duration_flag(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as error:
        raise click.BadParameter(str(error), ctx=ctx, param=param) from None


def job_options(function: F) -> F:
    function = click.option(
        "--attempt", default=0, show_default=True, type=click.IntRange(min=0), help="Job attempt."
    )(function)
    return click.option("--job-id", required=True, help="The job's ID (its _temporary dir).")(
        function
    )


def job_layout(path: str, job_id: str, attempt: int = 0) -> JobLayout:
    try:
        return JobLayout(path, job_id, attempt)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--job-id") from None
