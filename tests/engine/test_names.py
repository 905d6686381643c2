"""Any legal file name commits on every store, and manifests name it in Hadoop's URI form
(``Path.toUri().toString()``): the same job through the local, memory, ADLS (emulator)
and GCS (fake-gcs-server) adapters."""

from __future__ import annotations

from aiocommit import commit_job, commit_task, setup_job
from aiocommit.integrations.spark.paths import partition_path
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.manifest import TaskManifest, decode_manifest
from aiocommit.protocol.uris import manifest_path, manifest_uri
from aiocommit.stores.base import Store, join
from tests.helpers import MANIFEST, output, write_task

NAMES = (
    "part=a b/file 1.txt",
    "k=a%3Ab/part-0.csv",
    "ü/é#?+ x.txt",
    "p=%25/日本語 100%.txt",
    "t=12:00/a:b+c.txt",
    "nb\u00a0sp/f\u00a0g",
    partition_path(["city", "note"], ["São Paulo", "a/b: 50% #1?"]) + "/part-00000.parquet",
)


async def test_special_names_on_every_store(any_store_root: tuple[Store, str]) -> None:
    store, root = any_store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    files = {name: name.encode() for name in NAMES}
    attempt = await write_task(store, dest, job_id, 0, 0, files)
    manifest = await commit_task(attempt, store=store)
    assert isinstance(manifest, TaskManifest)
    saved = decode_manifest(
        await store.read_bytes(
            join(JobLayout(dest, job_id).manifests_dir, manifest.task_id + "-manifest.json")
        )
    )
    uris = {entry.dest for entry in saved.files}
    assert uris == {manifest_uri(store.qualify(join(dest, name))) for name in NAMES}
    assert all(" " not in uri and "#" not in uri and "?" not in uri for uri in uris)
    assert {store.unqualify(manifest_path(uri)) for uri in uris} == {join(dest, n) for n in NAMES}
    summary = await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == files
    assert sorted(summary.filenames) == sorted(uris)
