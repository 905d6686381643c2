"""Whole seeded jobs of the harness through the chaos proxy in front of each emulator,
checked at the destination directly."""

from __future__ import annotations

import pytest

from aiocommit import CommitOptions
from aiocommit_stress.chaos import chaos_settings, chaos_target, run_seed
from aiocommit_testing.chaos_proxy import KINDS, StoreKind

FAST = CommitOptions(retry_base_delay=0.005, retry_max_delay=0.05)


@pytest.mark.parametrize("kind", KINDS)
async def test_seeded_jobs_through_the_chaos_proxy(kind: StoreKind) -> None:
    """Two seeds per store at 20 % throttling, 5 % lost responses, 3 % resets and a
    long-tailed latency: set-up, tasks, job commit and an abort; no public call raises
    and the destination, read past the proxy, is exact."""
    chaos = chaos_settings(retry_after=0.01)
    async with chaos_target(kind, chaos) as target:
        for seed in (1, 2):
            result = await run_seed(target, seed, tasks=2, files=8, options=FAST)
            assert result.problems == [], result
            assert result.raised == [], result
            assert result.injected.get("throttled", 0) > 0
            assert result.injected.get("lost", 0) + result.injected.get("reset", 0) > 0
