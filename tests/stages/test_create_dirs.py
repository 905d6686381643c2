"""``create_directories_stage`` and its undo, ``remove_created_directories``."""

from __future__ import annotations

from aiocommit.committers.manifest.create_dirs import (
    create_directories_stage,
    leaf_directories,
    remove_created_directories,
)
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import join
from tests.helpers import exists
from tests.stages.conftest import Job, load


def test_only_leaves_are_asked_for() -> None:
    wanted = {"/d/a": True, "/d/a/b": True, "/d/a/b/c": True, "/d/x": True, "/d/seen": False}
    assert leaf_directories(wanted) == ["/d/a/b/c", "/d/x"]
    assert leaf_directories({"/d/ab": True, "/d/a": True}) == ["/d/a", "/d/ab"]


async def test_creates_every_directory_and_clears_a_file_in_the_way(job: Job) -> None:
    await job.store.write_bytes(join(job.dest, "part=1"), b"a file where a directory goes")
    async with job.context() as context:
        loaded = await load(context)
        try:
            leaves = await create_directories_stage(context, loaded.directories)
        finally:
            loaded.close()
        assert leaves == 3
        for partition in range(3):
            assert (await job.store.stat(join(job.dest, f"part={partition}"))).is_dir
        counters = context.stats.snapshot().counters
        assert counters[S.COMMITTER_FILES_DELETED_IN_THE_WAY] == 1
        assert counters[S.COMMITTER_DIRECTORIES_CREATED] == 3


async def test_remove_keeps_what_someone_filled(job: Job) -> None:
    async with job.context() as context:
        loaded = await load(context)
        try:
            await create_directories_stage(context, loaded.directories)
            await job.store.write_bytes(join(job.dest, "part=2/theirs.dat"), b"not ours")
            await remove_created_directories(context, loaded.directories)
        finally:
            loaded.close()
    assert not await exists(job.store, join(job.dest, "part=0"))
    assert not await exists(job.store, join(job.dest, "part=1"))
    assert await job.store.read_bytes(join(job.dest, "part=2/theirs.dat")) == b"not ours"
    assert await exists(job.store, job.dest), "the destination itself stays"
