"""The S3A committers' ``.pending`` / ``.pendingset`` files are Hadoop's: hand-written
samples in Hadoop's Jackson layout load, and what we write has exactly their field names
(Hadoop's ``SinglePendingCommit`` / ``PendingSet``, version 2)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from aiocommit.errors import ManifestError
from aiocommit.protocol.pending import (
    VERSION,
    PendingSet,
    SinglePendingCommit,
    decode_pending,
    decode_pendingset,
    encode_pending,
    encode_pendingset,
)

DATA = Path(__file__).parent.parent / "data" / "s3a"
PENDING = DATA / "part-0000.parquet.pending"
PENDINGSET = DATA / "task_202611210000_0001_m_000000.pendingset"

#: SinglePendingCommit's persisted fields, in Hadoop's declaration order
SINGLE_FIELDS = [
    "version",
    "filename",
    "uri",
    "uploadId",
    "bucket",
    "destinationKey",
    "created",
    "saved",
    "date",
    "jobId",
    "taskId",
    "text",
    "etags",
    "extraData",
    "iostatistics",
    "length",
]
PENDINGSET_FIELDS = ["version", "jobId", "commits", "extraData", "iostatistics"]


def test_sample_pending_loads() -> None:
    commit = decode_pending(PENDING.read_bytes(), path=str(PENDING))
    assert commit.version == VERSION == 2
    assert commit.uri == "s3a://bucket/table/year=2026/part-0000.parquet"
    assert commit.destination_key == "table/year=2026/part-0000.parquet"
    assert commit.upload_id.startswith("bpXSOVV")
    assert len(commit.etags) == 2 and commit.length == 5243392
    assert commit.iostatistics.counters == {"stream_write_block_uploads": 2}


def test_sample_pendingset_loads() -> None:
    pending = decode_pendingset(PENDINGSET.read_bytes(), path=str(PENDINGSET))
    assert pending.job_id == "job_202611210000_0001"
    assert [c.length for c in pending.commits] == [5243392, 1]
    assert pending.extra_data["task.attempt.id"].startswith("attempt_")


def test_we_write_hadoops_field_names_in_order() -> None:
    sample = msgspec.json.decode(PENDINGSET.read_bytes())
    assert list(sample) == PENDINGSET_FIELDS
    assert list(sample["commits"][0]) == SINGLE_FIELDS
    ours = msgspec.json.decode(
        encode_pendingset(decode_pendingset(PENDINGSET.read_bytes(), path="x"))
    )
    assert list(ours) == PENDINGSET_FIELDS
    assert list(ours["commits"][0]) == SINGLE_FIELDS
    assert ours["commits"] == sample["commits"]
    single = msgspec.json.decode(encode_pending(decode_pending(PENDING.read_bytes(), path="")))
    assert list(single) == SINGLE_FIELDS
    assert list(single["iostatistics"]) == [
        "counters",
        "gauges",
        "minimums",
        "maximums",
        "meanstatistics",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 1}, "wrong version"),
        ({"uploadId": ""}, "empty uploadId"),
        ({"bucket": ""}, "empty bucket"),
        ({"destinationKey": ""}, "empty destination"),
        ({"etags": ["", "x"]}, "empty etag"),
        ({"length": -1}, "invalid length"),
        ({"uri": ""}, "empty uri"),
    ],
)
def test_hadoops_validation(change: dict[str, object], message: str) -> None:
    raw = msgspec.json.decode(PENDING.read_bytes())
    raw.update(change)
    with pytest.raises(ManifestError, match=message):
        decode_pending(msgspec.json.encode(raw), path="p")


def test_duplicate_destination_in_one_set_refused() -> None:
    commit = decode_pending(PENDING.read_bytes(), path="")
    twice = PendingSet(job_id="job_1", commits=[commit, commit])
    with pytest.raises(ManifestError, match="more than one pending commit"):
        decode_pendingset(encode_pendingset(twice), path="s")
    assert isinstance(twice.commits[0], SinglePendingCommit)


def test_truncated_set_is_a_clear_error() -> None:
    data = PENDINGSET.read_bytes()
    with pytest.raises(ManifestError, match="malformed pending set"):
        decode_pendingset(data[: len(data) // 2], path="s")
