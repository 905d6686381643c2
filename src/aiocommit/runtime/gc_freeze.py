"""Garbage collection made cheap for a process whose loop does nothing but store calls."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_collections_lowered = 0


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Garbage collection made cheap for a busy loop, in processes that exist to do one
    job: what is alive now is frozen (never scanned again) and the youngest generation
    collects every 100,000 allocations instead of 700. Each store call allocates
    coroutines, futures and handles that die young without cycles; at 2,048 calls in
    flight the default collections cost ~20 us per call (a third of the CPU) on this
    machine. Nested uses are no-ops: the outermost restores the settings."""
    global _collections_lowered
    if _collections_lowered:
        yield
        return
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], 100_000), threshold[1], threshold[2])
    _collections_lowered += 1
    try:
        yield
    finally:
        _collections_lowered -= 1
        gc.set_threshold(*threshold)
        gc.unfreeze()
