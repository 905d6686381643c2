"""Bad input gets a clear error and nothing is renamed or lost."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiocommit import ManifestError, OutputConflict, commit_job, commit_task, setup_job
from aiocommit.errors import CommitError
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.manifest import FileEntry, TaskManifest, decode_manifest, encode_manifest
from aiocommit.stores.base import Store, join
from tests.helpers import output, run_tasks, task_files, write_task


async def committed_manifest(
    store: Store, dest: str, job_id: str, task_id: str
) -> tuple[str, TaskManifest]:
    path = JobLayout(dest, job_id).manifest_path(task_id)
    return path, decode_manifest(await store.read_bytes(path))


async def job_with_bad_manifest(
    store: Store, dest: str, corrupt: Callable[[bytes, TaskManifest, Store, str], bytes]
) -> str:
    """Three good tasks and one whose manifest ``corrupt`` rewrites."""
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=3)
    layout = JobLayout(dest, job_id)
    path = layout.manifest_path(f"task_{job_id[4:]}_m_000001")
    data = await store.read_bytes(path)
    await store.write_bytes(path, corrupt(data, decode_manifest(data), store, dest))
    return job_id


def with_entry(manifest: TaskManifest, **changes: str) -> bytes:
    first = manifest.files[0]
    manifest.files[0] = FileEntry(
        source=changes.get("source", first.source),
        dest=changes.get("dest", first.dest),
        size=first.size,
        etag=first.etag,
    )
    return encode_manifest(manifest)


CORRUPTIONS: dict[str, Callable[[bytes, TaskManifest, Store, str], bytes]] = {
    "not json": lambda data, m, s, d: b"<html>not json</html>",
    "truncated": lambda data, m, s, d: data[: len(data) // 2],
    "empty file": lambda data, m, s, d: b"",
    "unknown version": lambda data, m, s, d: data.replace(b'"version": 1', b'"version": 7'),
    "wrong type": lambda data, m, s, d: data.replace(b"TaskManifest/1", b"Other/1"),
    "another job": lambda data, m, s, d: data.replace(m.job_id.encode(), b"job_209901010000_0007"),
    "size not a number": lambda data, m, s, d: data.replace(b'"z": ', b'"z": "x').replace(
        b",\n", b'",\n', 1
    ),
    "dest with ..": lambda data, m, s, d: with_entry(m, dest=s.qualify(join(d, "../escaped.dat"))),
    "dest absolute elsewhere": lambda data, m, s, d: with_entry(
        m, dest=s.qualify("/etc/passwd-copy")
    ),
    "dest in another store": lambda data, m, s, d: with_entry(
        m, dest="memory://other-container/x.dat"
    ),
    "dest into _temporary": lambda data, m, s, d: with_entry(
        m, dest=s.qualify(join(d, "_temporary/x"))
    ),
    "dest is _SUCCESS": lambda data, m, s, d: with_entry(m, dest=s.qualify(join(d, "_SUCCESS"))),
    "source outside attempt": lambda data, m, s, d: with_entry(
        m, source=s.qualify(join(d, "part=0/x"))
    ),
    "source with ..": lambda data, m, s, d: with_entry(
        m, source=m.files[0].source.rsplit("/", 1)[0] + "/../../../../../../victim"
    ),
    "attempt dir of another job": lambda data, m, s, d: data.replace(
        b"/tasks/", b"/../../job_other/00/tasks/"
    ),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
async def test_bad_manifest_renames_nothing(store_root: tuple[Store, str], case: str) -> None:
    store, root = store_root
    dest = join(root, "out")
    await store.write_bytes(join(dest, "existing.dat"), b"keep")
    job_id = await job_with_bad_manifest(store, dest, CORRUPTIONS[case])
    with pytest.raises(ManifestError) as caught:
        await commit_job(dest, job_id, store=store)
    assert caught.value.path, "the error names the manifest"
    assert await output(store, dest) == {"existing.dat": b"keep"}
    assert await store.read_bytes(join(dest, "existing.dat")) == b"keep"


async def test_two_tasks_claiming_one_destination(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id = await setup_job(dest, store=store)
    same = {"part=0/clash.dat": b"a"}
    await commit_task(
        await write_task(store, dest, job_id, 0, 0, {**same, **task_files(0, 2)}), store=store
    )
    await commit_task(
        await write_task(store, dest, job_id, 1, 0, {**same, **task_files(1, 2)}), store=store
    )
    with pytest.raises(OutputConflict) as caught:
        await commit_job(dest, job_id, store=store)
    assert caught.value.path is not None and caught.value.path.endswith("part=0/clash.dat")
    assert "task_" in str(caught.value)
    assert await output(store, dest) == {}


async def test_existing_destination_file_conflicts_unless_replacing(
    store_root: tuple[Store, str],
) -> None:
    from aiocommit import CommitOptions

    store, root = store_root
    dest = join(root, "out")
    await store.write_bytes(join(dest, "part=0/part-00000-0000.dat"), b"from an earlier job")
    job_id, expected = await run_tasks(store, dest, tasks=1, files_per_task=3)
    with pytest.raises(OutputConflict):
        await commit_job(dest, job_id, store=store, options=CommitOptions(concurrency=1))
    await commit_job(dest, job_id, store=store, options=CommitOptions(delete_target_files=True))
    assert await output(store, dest) == expected


async def test_file_where_a_directory_must_go_is_deleted(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=3)
    await store.write_bytes(join(dest, "part=1"), b"a stray file")
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected


async def test_manifest_outside_manifests_dir_is_refused(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=1, files_per_task=1)
    with pytest.raises(ManifestError):
        await commit_job(
            dest, job_id, store=store, task_records=[join(root, "elsewhere/x-manifest.json")]
        )


async def test_missing_named_manifest(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=1, files_per_task=1)
    with pytest.raises(ManifestError, match="not found"):
        await commit_job(dest, job_id, store=store, task_records=["task_nope-manifest.json"])


async def test_changed_manifest_after_commit_started_is_refused(
    store_root: tuple[Store, str],
) -> None:
    """A late attempt that replaces a manifest after the job commit started must not get
    its files mixed with the planned attempt's."""
    from aiocommit.stores.faulty import Faults, FaultyStore

    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=2, files_per_task=4)
    crashing = FaultyStore(
        store, Faults(fail_paths=lambda op, path: op == "rename" and "part=1" in path)
    )
    with pytest.raises(CommitError):
        await commit_job(dest, job_id, store=crashing)
    late = await write_task(store, dest, job_id, 0, 5, task_files(0, 4, tag="-late"))
    await commit_task(late, store=store)
    with pytest.raises(ManifestError, match="changed since"):
        await commit_job(dest, job_id, store=store)


NAME = st.text(
    alphabet=st.sampled_from([*"ab Z9%#?&=+@,;~'", "é", "中", "🙂", "ß"]),
    min_size=1,
    max_size=16,
).filter(lambda n: n not in (".", "..") and not n.startswith(".aiocommit"))


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(partition=NAME, names=st.sets(NAME, min_size=1, max_size=4))
async def test_odd_names_commit(
    store_root: tuple[Store, str], partition: str, names: set[str]
) -> None:
    store, root = store_root
    dest = join(root, "odd")
    await store.delete(dest, recursive=True)
    job_id = await setup_job(dest, store=store)
    files = {f"k={partition}/{name}": name.encode() for name in names}
    await commit_task(await write_task(store, dest, job_id, 0, 0, files), store=store)
    summary = await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == files
    raw = msgspec.json.decode(await store.read_bytes(join(dest, "_SUCCESS")))
    assert sorted(raw["filenames"]) == sorted(summary.filenames)


async def test_very_deep_tree(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "deep")
    deep = "/".join(f"level{n}" for n in range(40))
    job_id = await setup_job(dest, store=store)
    files = {f"{deep}/leaf.dat": b"deep", "top.dat": b"top", f"{deep[:60]}/mid.dat": b"mid"}
    await commit_task(await write_task(store, dest, job_id, 0, 0, files), store=store)
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == files
