"""``fewer_collections``: one process-wide garbage collector, so one process-wide count of
its uses, restored by the last use to end whatever the order."""

from __future__ import annotations

import gc
import threading

from aiocommit.runtime.gc_freeze import fewer_collections


def test_overlapping_uses_in_two_threads_restore_when_the_last_ends() -> None:
    """Two loops in two threads: the first use ends while the second still runs; the
    settings stay lowered until the second ends, then are as before."""
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, tuple[int, int, int]] = {}

    def first() -> None:
        with fewer_collections():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with fewer_collections():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.get_threshold()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen["after the first ended"][0] >= 100_000
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() <= frozen


def test_nested_uses_restore_at_the_outermost() -> None:
    threshold = gc.get_threshold()
    with fewer_collections():
        with fewer_collections():
            assert gc.get_threshold()[0] >= 100_000
        assert gc.get_threshold()[0] >= 100_000
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == threshold
