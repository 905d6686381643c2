"""Exit codes, and running a command's work so that any failure ends it in one line."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import anyio
import click

from aiocommit.errors import AiocommitError, NotFound, first_error
from aiocommit.stores.base import Store
from aiocommit.stores.registry import open_store

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130

#: URL scheme -> the pip extra that installs its adapter's packages
_EXTRAS = {"abfs": "azure", "abfss": "azure", "gs": "gcs"}


class Problem(Exception):
    """A failure the command reports in one line and exits with ``code``."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def one_line(text: str) -> str:
    return " ".join(text.split())


def fail(code: int, message: str) -> NoReturn:
    click.echo(f"aiocommit: error: {one_line(message)}", err=True)
    raise click.exceptions.Exit(code)


def report(error: BaseException, target: str) -> NoReturn:
    """Print ``error`` in one line naming the path, and exit with its code."""
    error = first_error(error)
    if isinstance(error, Problem):
        fail(error.code, error.message)
    if isinstance(error, KeyboardInterrupt):
        fail(EXIT_INTERRUPTED, "interrupted")
    path = getattr(error, "path", None)
    where = "" if path else f"{target}: "
    if isinstance(error, NotFound):
        fail(EXIT_NOT_FOUND, f"{where}not found: {error}")
    if isinstance(error, AiocommitError):
        fail(EXIT_FAILED, f"{where}{error}")
    if isinstance(error, ModuleNotFoundError):
        scheme = target.partition("://")[0] if "://" in target else "file"
        extra = _EXTRAS.get(scheme)
        hint = f"; install them with: pip install 'aiocommit[{extra}]'" if extra else ""
        fail(
            EXIT_UNAVAILABLE,
            f"{target}: the {scheme}:// store needs packages that are not installed "
            f"({error}){hint}",
        )
    if isinstance(error, ValueError):
        fail(EXIT_USAGE, f"{where}{error}")
    if isinstance(error, OSError):
        fail(EXIT_FAILED, f"{where}{error}")
    raise error


def run_reporting(function: Callable[[], Awaitable[T]], target: str) -> T:
    """Run a coroutine function; any failure is reported in one line and ends the command."""
    try:
        return anyio.run(function)
    except (Exception, KeyboardInterrupt, BaseExceptionGroup) as error:
        report(error, target)


def open_url(url: str) -> tuple[Store, str]:
    try:
        store, path = open_store(url)
    except (ValueError, ModuleNotFoundError) as error:
        report(error, url)
    return store, path.rstrip("/") or "/"
