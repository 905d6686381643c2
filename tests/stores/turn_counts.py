"""Requests an HTTP store client starts per event-loop turn, counted (not timed)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def starts_per_turn(
    holder: object, attribute: str, calls: list[Callable[[], Awaitable[T]]]
) -> tuple[list[T], Counter[int]]:
    """Run ``calls`` at once (ready in one loop turn) with ``holder.<attribute>`` (an aiohttp
    session) counting each ``request`` started against the loop turn it started in."""
    session = getattr(holder, attribute)
    turn = 0
    per_turn: Counter[int] = Counter()

    class Counting:
        def request(self, *args: Any, **kwargs: Any) -> Any:
            per_turn[turn] += 1
            return session.request(*args, **kwargs)

    async def count_turns() -> None:
        nonlocal turn
        while True:
            turn += 1
            await asyncio.sleep(0)  # runs once per loop turn

    setattr(holder, attribute, Counting())
    counter = asyncio.create_task(count_turns())
    try:
        await asyncio.sleep(0)
        results = await asyncio.gather(*(call() for call in calls))
    finally:
        counter.cancel()
        setattr(holder, attribute, session)
    return results, per_turn
