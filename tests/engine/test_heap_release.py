"""A job commit hands the C heap's free pages back (glibc's ``malloc_trim``): a service
that commits job after job does not keep, per thread arena, what its commits freed."""

from __future__ import annotations

import ctypes

import psutil
import pytest

from aiocommit import commit_job, commit_task, setup_job, setup_task
from aiocommit.stores.memory import MemoryStore

try:
    _GLIBC = hasattr(ctypes.CDLL(None), "malloc_trim")
except OSError:
    _GLIBC = False


def _rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


def _free_memory_below_live_chunks(mb: int) -> list[bytes]:
    """``mb`` MB of malloc'd chunks (4 KB: above Python's small-object allocator), all
    freed but every 32nd: whole free pages between live chunks, which ``free`` cannot
    give back (only the top of a heap shrinks)."""
    chunks = [bytes(4000) for _ in range(mb * 256)]
    return chunks[::32]


@pytest.mark.skipif(not _GLIBC, reason="malloc_trim is glibc's")
async def test_a_job_commit_gives_the_heap_s_free_pages_back() -> None:
    store = MemoryStore("heap-release")
    job_id = await setup_job("/dest", store=store)
    attempt = await setup_task("/dest", job_id, 0, store=store)
    await store.write_bytes(attempt.path("a.txt"), b"a")
    await commit_task(attempt, store=store)

    live = _free_memory_below_live_chunks(128)
    before = _rss_mb()
    summary = await commit_job("/dest", job_id, store=store)
    after = _rss_mb()

    assert [name.rsplit("/", 1)[-1] for name in summary.filenames] == ["a.txt"]
    assert len(live) == 128 * 8
    # ~124 MB were free in whole pages below live chunks: most of it goes back
    assert before - after >= 64, f"RSS {before:.1f} -> {after:.1f} MB"
