"""Exit codes, and running a command's work so that any failure ends it in one line."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import anyio
import click

from aiocommit.errors import AiocommitError, InvalidInput, MissingExtra, NotFound, first_error
from aiocommit.options import CommitOptions, StoreSettings
from aiocommit.stores.base import Store
from aiocommit.stores.registry import EXTRAS, open_store

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """The command was sent SIGTERM (``kill``, ``timeout``, Kubernetes, Airflow): ended
    as Ctrl-C ends it, with exit code 143 (128 + 15, as the shell reports it)."""


class OneLineUsageError(click.UsageError):
    """A usage error shown as the command's other errors are: one line, exit 2."""

    def show(self, file: Any = None) -> None:
        where = f"; see `{self.ctx.command_path} --help`" if self.ctx is not None else ""
        message = one_line(self.format_message()).rstrip(".")
        click.echo(f"aiocommit: error: {message}{where}", err=True)


def _one_line_usage(error: click.UsageError) -> OneLineUsageError:
    if isinstance(error, OneLineUsageError):
        return error
    return OneLineUsageError(error.format_message(), error.ctx)


class CommandGroup(click.Group):
    """The ``aiocommit`` group: output cut short by its reader (``aiocommit show … | head``)
    ends the command with exit 0, as other Unix tools do, not click's exit 1; a usage
    error is one line."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as error:
            raise _one_line_usage(error) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            raise _one_line_usage(error) from None
        except BrokenPipeError:
            # nothing more can be written; keep the interpreter's final flush quiet too
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise click.exceptions.Exit(EXIT_OK) from None


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


def report(
    error: BaseException,
    target: str,
    *,
    resume: str | None = None,
    so_far: Callable[[], str] | None = None,
) -> NoReturn:
    """Print ``error`` in one line naming the path, and exit with its code. ``resume``
    tells an interrupted user how to finish or undo what was under way; ``so_far``
    what was done before the interruption (``ProgressBar.so_far``)."""
    error = first_error(error)
    if isinstance(error, Problem):
        fail(error.code, error.message)
    if isinstance(error, KeyboardInterrupt):
        what = "terminated (SIGTERM)" if isinstance(error, Terminated) else "interrupted"
        done = f" after {so_far()}" if so_far is not None and so_far() else ""
        click.echo(f"aiocommit: error: {what}{done}", err=True)
        if resume:
            click.echo(f"aiocommit: hint: {resume}", err=True)
        raise click.exceptions.Exit(
            EXIT_TERMINATED if isinstance(error, Terminated) else EXIT_INTERRUPTED
        )
    path = getattr(error, "path", None)
    where = "" if path else f"{target}: "
    if isinstance(error, NotFound):
        fail(EXIT_NOT_FOUND, f"{where}not found: {error}")
    if isinstance(error, MissingExtra):
        fail(EXIT_UNAVAILABLE, f"{target}: {error}")
    if isinstance(error, InvalidInput):
        fail(EXIT_USAGE, f"{where}{error}")
    if isinstance(error, AiocommitError):
        fail(EXIT_FAILED, f"{where}{as_flags(str(error))}")
    if isinstance(error, ModuleNotFoundError):
        scheme = target.partition("://")[0] if "://" in target else "file"
        extra = EXTRAS.get(scheme)
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


_OPTION_SETTING = re.compile(r"\b([a-z][a-z0-9_]*)=(True|'[^']*')")


def as_flags(message: str) -> str:
    """An error's message as the command line says it: a hint naming an option in
    Python (``delete_target_files=True``, ``conflict_mode='replace'``) names its flag
    (``--delete-target-files``, ``--conflict-mode replace``)."""
    fields = set(CommitOptions.names())

    def flag(found: re.Match[str]) -> str:
        name, value = found.group(1), found.group(2)
        if name not in fields:
            return found.group(0)
        spelled = "--" + name.replace("_", "-")
        return spelled if value == "True" else f"{spelled} {value.strip(chr(39))}"

    return _OPTION_SETTING.sub(flag, message)


def run_interruptible(function: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(function)`` where Ctrl-C (SIGINT) cancels the whole run through a cancel
    scope and raises ``KeyboardInterrupt`` once it has unwound; SIGTERM does the same and
    raises ``Terminated`` (a ``KeyboardInterrupt``). A scope's cancellation
    holds at every later await, so no ``except`` on the way can swallow it; asyncio's own
    handler cancels the main task once, and a commit that lost that one cancellation
    in flight ran to its end and exited 0. Off the main thread (where no signal
    arrives) it is ``anyio.run``."""
    if threading.current_thread() is not threading.main_thread():
        return anyio.run(function)  # signals reach the main thread only
    interrupted: signal.Signals | None = None
    results: list[T] = []

    async def watch(signals: AsyncIterator[signal.Signals], scope: anyio.CancelScope) -> None:
        nonlocal interrupted
        async for received in signals:
            interrupted = received
            scope.cancel()
            return

    async def main() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as group:
                group.start_soon(watch, signals, group.cancel_scope)
                results.append(await function())
                group.cancel_scope.cancel()

    try:
        anyio.run(main)
    except BaseException:
        if interrupted is not None:  # whatever the cancellation made of the work
            raise _interruption(interrupted) from None
        raise
    if interrupted is not None:
        raise _interruption(interrupted)
    return results[0]


def _interruption(received: signal.Signals) -> KeyboardInterrupt:
    return Terminated() if received == signal.SIGTERM else KeyboardInterrupt()


def run_reporting(
    function: Callable[[], Awaitable[T]],
    target: str,
    *,
    resume: str | None = None,
    so_far: Callable[[], str] | None = None,
) -> T:
    """Run a coroutine function; any failure is reported in one line and ends the command
    (``resume``, ``so_far``: see ``report``)."""
    try:
        return run_interruptible(function)
    except (Exception, KeyboardInterrupt, BaseExceptionGroup) as error:
        report(error, target, resume=resume, so_far=so_far)


def resume_hint(command: str, dest: str, job_id: str | None) -> str:
    """What to run after an interrupted ``commit``, ``abort`` or ``cleanup``."""
    job = f" --job-id {job_id}" if job_id else ""
    if command == "commit":
        return (
            f"nothing is lost: re-run the same command to finish the commit, or "
            f"`aiocommit abort {dest}{job}` to undo it"
        )
    return f"re-run the same command to finish the {command}"


def open_url(url: str, settings: StoreSettings | None = None) -> tuple[Store, str]:
    """The store of ``url`` and the path in it; ``settings``: its client's settings
    (``fs.s3a.endpoint`` ...: a usage error when ``url``'s store reads none of them)."""
    store: Store
    try:
        store, path = open_store(url, settings.as_s3a() if settings else None, strict=True)
    except (AiocommitError, ValueError, ModuleNotFoundError) as error:
        report(error, url)
    return store, path.rstrip("/") or "/"
