"""What ``bench loop`` watches while commits share an event loop with its ticker: the
garbage collections (``Collections``) and the worst loop-thread slice per stage of the
library (``StageWatch``). Light on imports, so a host process can load it without the
harness (``loop_host``)."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Collections:
    """The garbage collections of generation 2 (full ones: they walk every tracked
    object of the process, the host's included) while it is installed: how many and the
    CPU each took (``thread_time`` of the thread that ran it; a collection holds the
    GIL, so it stalls the loop whichever thread runs it), and the collections of the
    younger generations (generation 1's timed: each promotes its survivors into the
    oldest generation, which is what sets the next full collection off)."""

    full: list[float] = field(default_factory=list)
    middle: list[float] = field(default_factory=list)
    young: int = 0
    #: the CPU of every collection so far, all generations
    spent: float = 0.0
    _started: float = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
            return
        took = time.thread_time() - self._started
        self.spent += took
        if info["generation"] == 2:
            self.full.append(took)
        else:
            self.young += 1
            if info["generation"] == 1:
                self.middle.append(took)

    def figures(self) -> dict[str, Any]:
        return {
            "full_collections": len(self.full),
            "longest_full_collection_ms": round(max(self.full, default=0.0) * 1000, 1),
            "full_collections_ms": round(sum(self.full) * 1000, 1),
            "young_collections": self.young,
            "generation1_collections": len(self.middle),
            "longest_generation1_collection_ms": round(max(self.middle, default=0.0) * 1000, 1),
        }


@asynccontextmanager
async def collections_watched() -> AsyncIterator[Collections]:
    """A ``Collections`` record of the block (a ``gc.callbacks`` hook)."""
    watch = Collections()
    gc.callbacks.append(watch._callback)
    try:
        yield watch
    finally:
        gc.callbacks.remove(watch._callback)


@dataclass
class GapSplit:
    """Ticker gaps split into the collections run in them (``collections.spent``) and
    the rest: the worst gap's share of each, and the worst rest of any gap (the loop
    thread's work that is not the collector's)."""

    collections: Collections
    worst: float = 0.0
    worst_collecting: float = 0.0
    worst_rest: float = 0.0
    _spent: float = 0.0

    def gap(self, cpu: float) -> None:
        collecting = self.collections.spent - self._spent
        self._spent = self.collections.spent
        if cpu > self.worst:
            self.worst, self.worst_collecting = cpu, collecting
        self.worst_rest = max(self.worst_rest, cpu - collecting)

    def figures(self) -> dict[str, float]:
        return {
            "worst_stall_collecting_ms": round(self.worst_collecting * 1000, 1),
            "worst_stall_rest_ms": round((self.worst - self.worst_collecting) * 1000, 1),
            "worst_rest_ms": round(self.worst_rest * 1000, 1),
        }


#: the label of a gap in which no stage of the library ran
NO_STAGE = "(no stage)"


class StageWatch(logging.Filter):
    """The stages the library runs, from its own stage records (``stage NAME starting``
    and ``stage NAME done``, DEBUG on the ``aiocommit`` logger; dropped here), and per
    stage the loop thread's worst CPU slice: a ticker gap counts for every stage that
    started or ended in it and for the innermost one open at its end."""

    def __init__(self, floor: int) -> None:
        super().__init__()
        self.floor = floor  # records below this level are dropped as before
        self.open: list[str] = []
        self.touched: set[str] = set()
        self.worst: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        if record.levelno == logging.DEBUG and message.startswith("stage %s ") and record.args:
            name = str(record.args[0] if isinstance(record.args, tuple) else record.args)
            if message.startswith("stage %s starting"):
                self.open.append(name)
            elif name in self.open:
                del self.open[len(self.open) - 1 - self.open[::-1].index(name)]
            self.touched.add(name)
            return False
        return record.levelno >= self.floor

    def gap(self, cpu: float, wall: float) -> None:
        labels = set(self.touched)
        if self.open:
            labels.add(self.open[-1])
        self.touched.clear()
        for label in labels or {NO_STAGE}:
            if cpu > self.worst.get(label, 0.0):
                self.worst[label] = cpu

    def figures(self) -> dict[str, float]:
        """The worst slice per stage in ms, worst first."""
        ranked = sorted(self.worst.items(), key=lambda item: -item[1])
        return {name: round(cpu * 1000, 1) for name, cpu in ranked}


@contextmanager
def stages_watched() -> Iterator[StageWatch]:
    """A ``StageWatch`` of the block: the ``aiocommit`` logger at DEBUG with the watch
    as its filter (other records pass at the level they passed before)."""
    logger = logging.getLogger("aiocommit")
    level = logger.level
    watch = StageWatch(logger.getEffectiveLevel())
    logger.addFilter(watch)
    logger.setLevel(logging.DEBUG)
    try:
        yield watch
    finally:
        logger.setLevel(level)
        logger.removeFilter(watch)


def full_collection_ms() -> float:
    """The loop thread's CPU for one full collection of this process now, in ms: what a
    full collection set off during a commit costs at least (the commit's objects in
    flight then add to it)."""
    started = time.thread_time()
    gc.collect()
    return round((time.thread_time() - started) * 1000, 1)
