"""``load_manifests_stage``: every committed manifest read and checked, nothing renamed."""

from __future__ import annotations

import pytest

from aiocommit.committers.common.session import new_statistics
from aiocommit.committers.manifest.load_manifests import list_manifest_names, load_manifests_stage
from aiocommit.errors import ManifestError, OutputConflict
from aiocommit.protocol.manifest import decode_manifest, encode_manifest
from aiocommit.stores.base import join
from tests.helpers import output, write_task
from tests.stages.conftest import Job, load


async def test_loads_every_manifest_and_renames_nothing(job: Job) -> None:
    async with job.context() as context:
        seen: list[tuple[int, int, int]] = []
        names = await list_manifest_names(context)
        loaded = await load_manifests_stage(
            context, names, new_statistics(), on_loaded=lambda *totals: seen.append(totals)
        )
        try:
            assert len(loaded.manifests) == 3
            assert loaded.file_count == len(job.expected) == 12
            assert loaded.total_size == sum(map(len, job.expected.values()))
            assert {d for d, needed in loaded.directories.items() if needed} >= {
                join(job.dest, f"part={p}") for p in range(3)
            }
            entries = [e for m in loaded.manifests for e in loaded.entries(m, job.dest)]
            assert {dest for _, dest, _, _ in entries} == {
                join(job.dest, relative) for relative in job.expected
            }
            for source, _, size, _ in entries:
                assert (await job.store.stat(source)).size == size
        finally:
            loaded.close()
        assert seen[-1] == (3, 12, 3)
    assert await output(job.store, job.dest) == {}


async def test_truncated_manifest_is_refused(job: Job) -> None:
    async with job.context() as context:
        path = join(context.layout.manifests_dir, (await list_manifest_names(context))[1])
        data = await job.store.read_bytes(path)
        await job.store.write_bytes(path, data[: len(data) // 2])
        with pytest.raises(ManifestError) as caught:
            await load(context)
        assert caught.value.path == path


async def test_manifest_of_another_job_is_refused(job: Job) -> None:
    async with job.context() as context:
        path = join(context.layout.manifests_dir, (await list_manifest_names(context))[0])
        manifest = decode_manifest(await job.store.read_bytes(path))
        manifest.job_id = "job_202001010000_0001"
        await job.store.write_bytes(path, encode_manifest(manifest))
        with pytest.raises(ManifestError, match="belongs to job"):
            await load(context)


async def test_two_tasks_claiming_one_destination(job: Job) -> None:
    from aiocommit import commit_task

    twin = next(iter(job.expected))
    attempt = await write_task(job.store, job.dest, job.job_id, 7, 0, {twin: b"twin"})
    await commit_task(attempt, store=job.store)
    async with job.context() as context:
        with pytest.raises(OutputConflict, match="two tasks claim the same destination"):
            await load(context)
    assert await output(job.store, job.dest) == {}


async def test_a_changed_manifest_is_refused_against_its_digest(job: Job) -> None:
    async with job.context() as context:
        names = await list_manifest_names(context)
        digests = dict.fromkeys(names, "0" * 64)
        with pytest.raises(ManifestError, match="hash differs"):
            await load_manifests_stage(context, names, new_statistics(), digests=digests)


async def test_a_job_without_manifests_directory(job: Job) -> None:
    async with job.context() as context:
        await job.store.delete(context.layout.manifests_dir, recursive=True)
        with pytest.raises(ManifestError, match="no manifests directory"):
            await list_manifest_names(context)


async def test_the_parents_are_every_destinations_directory() -> None:
    """``LoadedJob.parents`` is exactly the directory of each file the job commits, the
    destination's own included: the conflict check lists those instead of passing over
    every file again."""
    from aiocommit import commit_task, setup_job
    from aiocommit.stores.base import parent_of
    from tests.stages.conftest import memory_store

    store = memory_store()
    job_id = await setup_job("/out", store=store)
    files = {"top.csv": b"t", "a/b/c.csv": b"c", "a/d.csv": b"d", "a/b/e.csv": b"e"}
    await commit_task(await write_task(store, "/out", job_id, 0, 0, files), store=store)
    async with Job(store, "/out", job_id, files).context() as context:
        loaded = await load(context)
        try:
            targets = {t for m in loaded.manifests for _, t, _, _ in loaded.entries(m, "/out")}
            assert (
                loaded.parents == {parent_of(t) for t in targets} == {"/out", "/out/a", "/out/a/b"}
            )
        finally:
            loaded.close()
