"""Ctrl-C ends a command even when the work it interrupts loses one cancellation."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time

import anyio
import anyio.lowlevel
import pytest

from aiocommit.cli.exits import run_interruptible

#: how long the work goes on after swallowing the cancellation: far beyond the bound on
#: an interrupted run, so a loaded test worker's pauses cannot decide it
WORK_SECONDS = 30.0


async def _loses_one_cancellation(seconds: float = 2.0) -> str:
    """Work that, like an ``except`` somewhere in a library, swallows the cancellation
    the interrupt delivered, then goes on for ``seconds``."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        pass
    await anyio.sleep(seconds)
    return "finished"


@pytest.mark.slow
def test_plain_run_lets_work_swallow_a_ctrl_c() -> None:
    """The defect: asyncio cancels the main task once on SIGINT, so the run finishes."""
    assert anyio.run(_loses_one_cancellation) == "finished"


def test_ctrl_c_cannot_be_swallowed_by_the_work() -> None:
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_interruptible(functools.partial(_loses_one_cancellation, WORK_SECONDS))
    assert time.monotonic() - started < WORK_SECONDS / 3  # not after the work's end


def test_work_without_ctrl_c_returns_its_result() -> None:
    async def work() -> int:
        await anyio.lowlevel.checkpoint()
        return 7

    assert run_interruptible(work) == 7
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_runs_off_the_main_thread_too() -> None:
    """A command invoked from a worker thread (a test runner, a service): no signal
    handler can be installed there, and none is needed."""
    results: list[int] = []

    async def work() -> int:
        await anyio.lowlevel.checkpoint()
        return 3

    thread = threading.Thread(target=lambda: results.append(run_interruptible(work)))
    thread.start()
    thread.join(timeout=10)
    assert results == [3]


def test_every_command_runs_through_run_interruptible() -> None:
    """A command that called ``anyio.run`` itself (``demo`` did) would get asyncio's
    cancel-once Ctrl-C back."""
    from pathlib import Path

    import aiocommit.cli as cli_package

    package = Path(cli_package.__file__).parent
    callers = sorted(
        path.name
        for path in package.glob("*.py")
        if path.name != "exits.py" and "anyio.run(" in path.read_text(encoding="utf-8")
    )
    assert callers == []
