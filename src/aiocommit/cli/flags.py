"""Command line flags: one per ``CommitOptions`` field, ``--option KEY=VALUE``, the job's
ID and attempt, durations."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from aiocommit.cli.units import parse_duration
from aiocommit.committers.s3a import S3CommitterOptions
from aiocommit.options import CONFLICT_MODES, CommitOptions, UnknownOption
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.s3_settings import CLIENT_KEYS

F = TypeVar("F", bound=Callable[..., Any])

#: keys under this prefix are the S3 committers' settings
S3_PREFIX = "fs.s3a."

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
    }
)

#: options no command takes as a flag: the committer is chosen when a job is set up,
#: which no command does (a job keeps the committer it was set up with)
NOT_FLAGS = frozenset({"committer"})

#: options whose values are one of a few words
CHOICES = {"conflict_mode": CONFLICT_MODES}


def _kind(field: dataclasses.Field[Any]) -> str:
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    return kind.split("|")[0].strip()


def format_default(value: object) -> str:
    """A default as a user writes it: ``true``, ``256``, ``0.05``, ``unset``."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def option_fields(*, commit: bool) -> list[dataclasses.Field[Any]]:
    """The ``CommitOptions`` fields a command takes as flags."""
    return [
        f
        for f in dataclasses.fields(CommitOptions)
        if f.name not in NOT_FLAGS and (commit or f.name not in COMMIT_ONLY_OPTIONS)
    ]


def option_flag(name: str) -> str:
    """The command line flag of an option: ``validate_output`` -> ``--validate-output``."""
    return "--" + name.replace("_", "-")


def commit_options(*, commit: bool) -> Callable[[F], F]:
    """Decorate a command with one flag per ``CommitOptions`` field, plus ``--option``."""

    def decorate(function: F) -> F:
        function = click.option(
            "--option",
            "-o",
            "option_pairs",
            multiple=True,
            metavar="KEY=VALUE",
            help="Set any option by our name (concurrency), a Hadoop name "
            "(mapreduce.manifest.committer.io.threads) or spark.hadoop.NAME. Repeatable; "
            "the flags above win.",
        )(function)
        for field in reversed(option_fields(commit=commit)):
            hadoop = field.metadata["hadoop"]
            doc = field.metadata["doc"]
            help_text = f"{doc} [default: {format_default(field.default)}]" + (
                f" (Hadoop: {hadoop})" if hadoop else ""
            )
            flag = option_flag(field.name)
            kind = _kind(field)
            if kind == "bool":
                decorator = click.option(
                    f"{flag}/--no-{flag[2:]}", field.name, default=None, help=help_text
                )
            elif field.name in CHOICES:
                decorator = click.option(
                    flag,
                    field.name,
                    type=click.Choice(CHOICES[field.name], case_sensitive=False),
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
                    field.name,
                    type=types.get(kind, click.STRING),
                    default=None,
                    help=help_text,
                    metavar=kind.upper() if kind != "str" else "URL",
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
    """``CommitOptions`` from ``--option KEY=VALUE`` pairs and flag values (flags win);
    ``click.UsageError`` for an unknown key or a bad value. ``fs.s3a.*`` keys are the S3
    committers' (``build_s3_options``)."""
    settings = _settings(pairs)
    fields = CommitOptions.names()
    overrides = {k: v for k, v in values.items() if k in fields and v is not None}
    try:
        return CommitOptions.from_mapping(
            settings,
            others="error",
            handled_prefixes=(S3_PREFIX,),
            **overrides,
        )
    except UnknownOption as error:
        raise click.UsageError(f"--option {error}") from None
    except (ValueError, TypeError) as error:
        raise click.UsageError(f"bad option value: {error}") from None


def build_s3_options(pairs: Sequence[str]) -> S3CommitterOptions | None:
    """The S3 committers' settings from ``--option fs.s3a.…=VALUE`` pairs, None without
    any; ``click.UsageError`` for an unknown ``fs.s3a.*`` key or a bad value. The S3
    client's settings (``fs.s3a.endpoint`` ...) are ``s3_client_options``'."""
    try:
        return S3CommitterOptions.from_settings(_settings(pairs), others=CLIENT_KEYS)
    except UnknownOption as error:
        raise click.UsageError(f"--option {error}") from None
    except (ValueError, TypeError) as error:
        raise click.UsageError(f"bad option value: {error}") from None


def s3_client_options(pairs: Sequence[str]) -> dict[str, str]:
    """The S3 client's settings among ``--option`` pairs (``fs.s3a.endpoint``,
    ``fs.s3a.path.style.access`` ...; ``spark.hadoop.`` dropped)."""
    found: dict[str, str] = {}
    for key, value in _settings(pairs).items():
        bare = key.removeprefix("spark.hadoop.")
        if bare in CLIENT_KEYS:
            found[bare] = value
    return found


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
