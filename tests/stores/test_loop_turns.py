"""``StartsPerTurn``: at most ``limit`` requests start in any one loop turn."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from aiocommit.stores.loop_turns import STARTS_PER_TURN, StartsPerTurn

from .turn_counts import loop_turns


async def test_no_loop_turn_starts_more_than_the_limit() -> None:
    """300 workers whose "answers" come back 0-3 turns after they start (as requests that
    finish together do), each starting its next request at once. Counted against the
    loop's real turns (its selector calls), not against a task that runs once per turn
    somewhere in the middle of it."""
    starts = StartsPerTurn()
    rng = random.Random(0)
    per_turn: Counter[int] = Counter()

    with loop_turns() as turns:

        async def worker() -> None:
            for _ in range(20):
                await starts.wait()
                per_turn[turns.turn] += 1
                for _ in range(rng.randint(0, 3)):  # the answer, some turns later
                    await asyncio.sleep(0)

        await asyncio.gather(*(worker() for _ in range(300)))

    assert sum(per_turn.values()) == 300 * 20
    assert max(per_turn.values()) <= STARTS_PER_TURN
    # and it does not starve: most turns with starts start at least a quarter of the limit
    busy = [count for count in per_turn.values() if count >= STARTS_PER_TURN // 4]
    assert len(busy) >= 0.9 * len(per_turn)
