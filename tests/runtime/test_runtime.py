"""One ``Runtime`` per event loop: its slice and line, its store threads, and whether it
is dedicated to store calls belong to that loop, not to the process."""

from __future__ import annotations

import threading

import anyio

from aiocommit.runtime import blocking
from aiocommit.runtime.runtime import Runtime, current, here, loop_is_dedicated
from aiocommit.runtime.turns import take_turn


def test_each_loop_has_its_own_runtime_and_one_only() -> None:
    seen: list[tuple[Runtime, anyio.CapacityLimiter]] = []

    async def main() -> None:
        runtime = current()
        assert current() is runtime and here.runtime is runtime
        assert blocking.shared_thread_limiter() is runtime.threads
        await take_turn()
        assert here.runtime is runtime
        seen.append((runtime, runtime.threads))

    anyio.run(main)
    anyio.run(main)
    (first, first_threads), (second, second_threads) = seen
    assert first is not second and first_threads is not second_threads
    assert first_threads.total_tokens == second_threads.total_tokens == blocking.THREADS


def test_a_dedicated_loop_leaves_other_loops_alone() -> None:
    """A rename worker's loop runs its metadata calls inline; a loop in another thread
    of the same process (a host's) still sends them to threads."""
    dedicated = threading.Event()
    checked = threading.Event()
    results: dict[str, bool] = {}

    async def worker() -> None:
        blocking.dedicate_loop()
        results["worker"] = loop_is_dedicated()
        dedicated.set()
        await anyio.to_thread.run_sync(checked.wait)

    async def host() -> None:
        await anyio.to_thread.run_sync(dedicated.wait)
        current()
        results["host"] = loop_is_dedicated()
        checked.set()

    thread = threading.Thread(target=anyio.run, args=(worker,))
    thread.start()
    anyio.run(host)
    thread.join(10)
    assert results == {"worker": True, "host": False}
