"""Manifests and _SUCCESS files are Hadoop's: real Hadoop-written samples load and
commit, and what we write has Hadoop's field names, order and omissions."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from aiocommit import CommitOptions, ManifestError, commit_job
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.manifest import (
    MANIFEST_TYPE,
    DirState,
    FileEntry,
    TaskManifest,
    decode_manifest,
    encode_manifest,
)
from aiocommit.protocol.success import SuccessData, decode_success, encode_success
from aiocommit.stores.local import LocalStore

DATA = Path(__file__).parent.parent / "data" / "hadoop"
HADOOP_MANIFEST = DATA / "task_202611210000_0001_m_000000-manifest.json"
HADOOP_SUCCESS = DATA / "_SUCCESS.json"


def test_hadoop_manifest_loads() -> None:
    manifest = decode_manifest(HADOOP_MANIFEST.read_bytes())
    assert manifest.job_id == "job_202611210000_0001"
    assert manifest.task_attempt_id == "attempt_202611210000_0001_m_000000_0"
    assert len(manifest.files) == 4 and all(f.size == 32 and f.etag is None for f in manifest.files)
    assert {d.state for d in manifest.directories} == {DirState.NOT_FOUND}
    assert manifest.iostatistics.counters["committer_task_file_count"] == 4
    assert manifest.iostatistics.meanstatistics["op_list_status.mean"].samples == 3


def test_hadoop_success_loads() -> None:
    success = decode_success(HADOOP_SUCCESS.read_bytes())
    assert success.success and success.job_id == "job_202611210000_0001"
    assert len(success.filenames) == 12
    assert success.diagnostics["stage"] == "committer_commit_job"


def test_written_manifest_has_hadoops_keys_in_order() -> None:
    ours = TaskManifest(
        job_id="job_1_0001",
        task_id="task_1_0001_m_000000",
        task_attempt_id="attempt_1_0001_m_000000_0",
        task_attempt_dir="file:/d/_temporary/job_1_0001/00/tasks/attempt_1_0001_m_000000_0",
        files=[
            FileEntry("file:/s/a", "file:/d/a", 3),
            FileEntry("file:/s/b", "file:/d/b", 4, "0x1"),
        ],
    )
    raw = msgspec.json.decode(encode_manifest(ours))
    hadoop = msgspec.json.decode(HADOOP_MANIFEST.read_bytes())
    assert list(raw) == list(hadoop)
    assert raw["type"] == MANIFEST_TYPE and raw["version"] == 1
    assert raw["files"][0] == {"s": "file:/s/a", "d": "file:/d/a", "z": 3}, "null etag left out"
    assert raw["files"][1]["e"] == "0x1"
    assert set(raw["iostatistics"]) == set(hadoop["iostatistics"])
    assert decode_manifest(encode_manifest(ours)) == ours


def test_written_success_has_hadoops_keys() -> None:
    ours = SuccessData.now("job_1_0001", "JobID")
    raw = msgspec.json.decode(encode_success(ours))
    hadoop = msgspec.json.decode(HADOOP_SUCCESS.read_bytes())
    assert list(raw) == list(hadoop)
    assert raw["date"].endswith("Z[Etc/UTC]")


def test_manifest_pretty_printed_like_hadoop() -> None:
    text = encode_manifest(TaskManifest(job_id="job_1_0001")).decode()
    assert text.startswith('{\n  "extraData": {},\n  "type": ')


async def test_commit_a_job_hadoop_wrote(tmp_path: Path) -> None:
    """Lay out a job directory as Hadoop 3.5.0 did, with its real manifest (paths moved
    to this machine), and let aiocommit commit it."""
    dest = tmp_path / "dest"
    text = HADOOP_MANIFEST.read_text()
    text = text.replace("slowfile:///path/to/dest", f"file://{dest}").replace(
        "slowfile:/path/to/dest", f"file:{dest}"
    )
    manifest = decode_manifest(text.encode())
    layout = JobLayout(str(dest), manifest.job_id)
    store = LocalStore()
    for entry in manifest.files:
        await store.write_bytes(store.unqualify(entry.source), b"h" * entry.size)
    await store.write_bytes(layout.manifest_path(manifest.task_id), text.encode())
    summary = await commit_job(
        str(dest), manifest.job_id, store=store, options=CommitOptions(validate_output=True)
    )
    landed = sorted(str(p.relative_to(dest)) for p in dest.rglob("*.dat"))
    assert landed == sorted(e.dest.split(str(dest) + "/")[1] for e in manifest.files)
    assert summary.success and not (dest / "_temporary").exists()
    assert decode_success((dest / "_SUCCESS").read_bytes()).job_id == "job_202611210000_0001"


@pytest.mark.parametrize("version", [0, 2])
def test_unknown_versions_refused(version: int) -> None:
    data = HADOOP_MANIFEST.read_bytes().replace(b'"version" : 1', f'"version" : {version}'.encode())
    with pytest.raises(ManifestError, match="version"):
        decode_manifest(data)
