"""Requests an HTTP store client starts per event-loop turn, counted (not timed)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class LoopTurns:
    """The running loop's turns, counted where each begins: every turn of an asyncio
    selector loop calls its selector's ``select`` once, before running what is ready."""

    def __init__(self) -> None:
        self.turn = 0


@contextmanager
def loop_turns() -> Iterator[LoopTurns]:
    """Count the running asyncio loop's turns (its selector's ``select`` calls)."""
    loop = asyncio.get_running_loop()
    selector = loop._selector  # type: ignore[attr-defined]
    select = selector.select
    turns = LoopTurns()

    def counting_select(timeout: float | None = None) -> Any:
        ready = select(timeout)
        turns.turn += 1
        return ready

    selector.select = counting_select
    try:
        yield turns
    finally:
        del selector.select  # the class's method again


async def starts_per_turn(
    holder: object, attribute: str, calls: list[Callable[[], Awaitable[T]]]
) -> tuple[list[T], Counter[int]]:
    """Run ``calls`` at once (ready in one loop turn) with ``holder.<attribute>`` (an aiohttp
    session) counting each ``request`` started against the loop turn it started in."""
    session = getattr(holder, attribute)
    per_turn: Counter[int] = Counter()

    with loop_turns() as turns:

        class Counting:
            def request(self, *args: Any, **kwargs: Any) -> Any:
                per_turn[turns.turn] += 1
                return session.request(*args, **kwargs)

        setattr(holder, attribute, Counting())
        try:
            results = await asyncio.gather(*(call() for call in calls))
        finally:
            setattr(holder, attribute, session)
    return results, per_turn
