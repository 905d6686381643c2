"""A service-like host for ``bench loop``'s commit parts.

The issue's service is a small aiohttp service calling ``commit_job`` in its own event
loop. The harness's process is not one: it also holds the stress CLI, rich, click and
psutil, ~18,000 tracked objects a service does not have, and a full garbage collection,
which a commit's allocations can set off, walks every one of them. So the commits run
in a fresh interpreter that loads what such a service loads (aiohttp's server and
client, aiocommit) plus the loop probes, beside a 1 ms ticker, and the figures come back
as JSON.

``python -m aiocommit_stress.loop_host`` reads one pickled ``HostRequest`` on stdin and
prints one JSON object on stdout: the ticker's, the collections' and the stages' figures,
the wall and loop-thread CPU seconds of the commits, and ``host_tracked_objects`` (what a
full collection walked before the commits began).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import pickle
import sys
import time
from dataclasses import dataclass
from typing import Any

import aiohttp.web  # noqa: F401 - the host is an aiohttp service
import anyio

from aiocommit import CommitOptions, commit_job
from aiocommit.stores.base import Store, StoreOpener
from aiocommit_stress.loop_probes import (
    GapSplit,
    collections_watched,
    full_collection_ms,
    stages_watched,
)
from aiocommit_testing.ticker import ticking


@dataclass(frozen=True)
class HostRequest:
    """The commits to run: the store (opened here by ``opener``), each job's destination
    and ID (all committed at once), and the options."""

    opener: StoreOpener
    jobs: list[tuple[str, str]]
    options: CommitOptions


async def run_commits(request: HostRequest) -> dict[str, Any]:
    """Commit ``request.jobs`` at once beside the ticker, on the store its opener opens;
    the loop figures."""
    store = request.opener()
    try:
        return await commit_beside_ticker(store, request.jobs, request.options)
    finally:
        await store.aclose()


async def commit_beside_ticker(
    store: Store, jobs: list[tuple[str, str]], options: CommitOptions
) -> dict[str, Any]:
    """Commit ``jobs`` (destination, job ID) at once on ``store`` beside a 1 ms ticker in
    this process; the loop figures (see the module docstring)."""
    tracked = len(gc.get_objects())  # no collection first: the host's state as it was
    started, loop_cpu_started = time.perf_counter(), time.thread_time()
    with stages_watched() as stages:
        async with collections_watched() as collected:
            split = GapSplit(collected)

            def on_gap(cpu: float, wall: float) -> None:
                stages.gap(cpu, wall)
                split.gap(cpu)

            async with ticking(on_gap=on_gap) as ticker, anyio.create_task_group() as group:
                for dest, job_id in jobs:
                    group.start_soon(
                        functools.partial(commit_job, dest, job_id, store=store, options=options)
                    )
    return {
        "commit_seconds": round(time.perf_counter() - started, 2),
        # the loop thread's CPU over the commits (the ticker's included): near the wall
        # time, the loop is what sets the pace
        "loop_cpu_seconds": round(time.thread_time() - loop_cpu_started, 2),
        "host_tracked_objects": tracked,
        "host_full_collection_ms": full_collection_ms(),
        **ticker.figures(),
        **collected.figures(),
        **split.figures(),
        "stage_worst_stall_ms": stages.figures(),
    }


def main() -> None:
    # run as __main__, this module's classes are not the ones the request was pickled
    # with: use the importable module's
    from aiocommit_stress import loop_host

    request = pickle.loads(sys.stdin.buffer.read())
    if not isinstance(request, loop_host.HostRequest):
        raise SystemExit(f"loop_host: expected a HostRequest on stdin, not {type(request)}")
    figures = asyncio.run(loop_host.run_commits(request))
    sys.stdout.write(json.dumps(figures) + "\n")


if __name__ == "__main__":
    main()
