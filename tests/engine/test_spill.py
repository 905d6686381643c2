"""The spill file and the bounded-memory duplicate check."""

from __future__ import annotations

import os

import pytest

from aiocommit.committers.manifest import spill
from aiocommit.committers.manifest.spill import DestinationHashes, SpillFile


def test_spill_round_trip_and_leaves_no_file() -> None:
    scratch = SpillFile()
    first = scratch.append(b"abc")
    second = scratch.append(b"x" * 100_000)
    assert scratch.read(*first) == b"abc"
    assert scratch.read(*second) == b"x" * 100_000
    assert os.fstat(scratch._fd).st_nlink == 0, "unlinked: nothing stays if the process dies"
    scratch.close()


async def test_repeats_found_across_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "FLUSH_AT", 1000)
    scratch = SpillFile()
    hashes = DestinationHashes(scratch)
    for start in range(0, 10_000, 500):
        hashes.add(range(start, start + 500))
    hashes.add([42, 7777, -5])
    hashes.add([-5])
    assert hashes._buffered < 1000, "flushed to the spill file, not held"
    assert await hashes.repeated() == {42, 7777, -5}
    scratch.close()
