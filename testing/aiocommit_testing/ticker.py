"""A ticker on the running event loop: the loop thread's CPU and the wall time of every gap
between two wake-ups, to find what holds the loop."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio


@dataclass
class Ticker:
    """A ``period`` ticker on the running loop. Per gap between two wake-ups: the loop
    thread's own CPU (``thread_time``) and the wall time, each also handed to
    ``on_gap(cpu, wall)`` when given (to attribute gaps to what ran in them)."""

    period: float = 0.001
    worst_cpu: float = 0.0
    worst_wall: float = 0.0
    gaps: int = 0
    cpu_over_10ms: int = 0
    walls: list[float] = field(default_factory=list)
    on_gap: Callable[[float, float], None] | None = None

    async def run(self) -> None:
        thread_time, clock = time.thread_time, time.perf_counter
        cpu, wall = thread_time(), clock()
        while True:
            await anyio.sleep(self.period)
            now_cpu, now_wall = thread_time(), clock()
            gap_cpu, gap_wall = now_cpu - cpu, now_wall - wall
            cpu, wall = now_cpu, now_wall
            self.gaps += 1
            if gap_cpu > 0.010:
                self.cpu_over_10ms += 1
            if gap_cpu > self.worst_cpu:
                self.worst_cpu = gap_cpu
            if gap_wall > self.worst_wall:
                self.worst_wall = gap_wall
            self.walls.append(gap_wall)
            if self.on_gap is not None:
                self.on_gap(gap_cpu, gap_wall)

    def figures(self) -> dict[str, Any]:
        walls = sorted(self.walls)
        p99 = walls[int(0.99 * (len(walls) - 1))] if walls else 0.0
        return {
            "worst_stall_ms": round(self.worst_cpu * 1000, 1),
            "worst_wall_gap_ms": round(self.worst_wall * 1000, 1),
            "p99_wall_gap_ms": round(p99 * 1000, 2),
            "gaps": self.gaps,
            "gaps_over_10ms_cpu": self.cpu_over_10ms,
        }


@asynccontextmanager
async def ticking(
    period: float = 0.001, on_gap: Callable[[float, float], None] | None = None
) -> AsyncIterator[Ticker]:
    """A ``Ticker`` running for the block (``on_gap``: see ``Ticker``)."""
    ticker = Ticker(period, on_gap=on_gap)
    async with anyio.create_task_group() as group:
        group.start_soon(ticker.run)
        try:
            yield ticker
        finally:
            group.cancel_scope.cancel()
