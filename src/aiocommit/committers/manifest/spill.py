"""Spilling what job commit must not hold in memory to one local, unlinked file.

The file is created unlinked (``tempfile.TemporaryFile``), so nothing is left behind
when the process is killed. Manifest entries are appended as msgpack blobs and read back
by offset; destination hashes are bucketed in memory and flushed to the same file once a
million have gathered, so memory stays bounded whatever the job's file count.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from array import array
from collections.abc import Iterable

from aiocommit.runtime.turns import take_turn

#: hashes gathered in memory before they are flushed to the spill file (8 MB)
FLUSH_AT = 1 << 20
BUCKETS = 256


class SpillFile:
    """An append-only local scratch file, read back by (offset, length)."""

    def __init__(self) -> None:
        # closed by close(); unlinked from the start, so a kill leaves nothing behind
        self._file = tempfile.TemporaryFile(prefix="aiocommit-spill-")  # noqa: SIM115
        self._fd = self._file.fileno()
        self._end = 0

    def append(self, data: bytes) -> tuple[int, int]:
        offset = self._end
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], offset + written)
        self._end += len(data)
        return offset, len(data)

    def read_into(self, offset: int, view: memoryview) -> None:
        """Fill ``view`` from ``offset`` on, allocating nothing (``view`` is a buffer the
        caller made: see ``plan_copies.save_copies``)."""
        done = 0
        while done < len(view):
            read = os.preadv(self._fd, [view[done:]], offset + done)
            if not read:
                raise OSError(f"spill file ended early at {offset + done}")
            done += read

    def read(self, offset: int, length: int) -> bytes:
        chunks = []
        done = 0
        while done < length:
            chunk = os.pread(self._fd, length - done, offset + done)
            if not chunk:
                raise OSError(f"spill file ended early at {offset + done}")
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self._file.close()


class DestinationHashes:
    """One 8-byte hash per destination, bucketed by its low byte; checks for repeats
    bucket by bucket, so memory holds at most ``FLUSH_AT`` hashes plus one bucket."""

    def __init__(self, spill: SpillFile):
        self._spill = spill
        self._buckets = [array("q") for _ in range(BUCKETS)]
        self._chunks: list[list[tuple[int, int]]] = [[] for _ in range(BUCKETS)]
        self._buffered = 0

    def add(self, hashes: Iterable[int]) -> None:
        buckets = self._buckets
        for value in hashes:
            buckets[value & 255].append(value)
            self._buffered += 1
        if self._buffered >= FLUSH_AT:
            self._flush()

    def _flush(self) -> None:
        for index, bucket in enumerate(self._buckets):
            if bucket:
                self._chunks[index].append(self._spill.append(bucket.tobytes()))
                self._buckets[index] = array("q")
        self._buffered = 0

    async def repeated(self) -> set[int]:
        """The hashes seen more than once (true repeats, or rare hash collisions); a
        bucket at a time, yielding the event loop between them as its slice runs out."""
        repeats: set[int] = set()
        for index in range(BUCKETS):
            await take_turn()
            bucket = array("q")
            for offset, length in self._chunks[index]:
                bucket.frombytes(self._spill.read(offset, length))
            bucket.extend(self._buckets[index])
            ordered = sorted(bucket)
            repeats.update(a for a, b in itertools.pairwise(ordered) if a == b)
        return repeats
