"""The Arrow filesystem view of an attempt: pyarrow's writers write through it unchanged,
and their files are byte for byte those the same writer writes to a plain directory."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import anyio
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from aiocommit.errors import InvalidInput, ReservedName
from aiocommit.integrations.arrow import write_table
from aiocommit.integrations.attempts import PLACED_PREFIX, EngineJob
from tests.integrations.helpers import committed_files, destination, s3_files

TABLE = pa.table(
    {
        "id": list(range(5000)),
        "k": ["a", "b", "c", "d b"] * 1250,
        "v": [i * 0.25 for i in range(5000)],
    }
)


def _plain(directory: Path) -> dict[str, bytes]:
    return committed_files(str(directory))


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_write_dataset_through_an_attempt_is_byte_identical(kind: str, tmp_path: Path) -> None:
    arguments = {
        "format": "parquet",
        "partitioning": ["k"],
        "partitioning_flavor": "hive",
        "basename_template": "part-{i}.parquet",
        "max_rows_per_file": 2000,
        "max_rows_per_group": 500,
    }
    plain = tmp_path / "plain"
    pads.write_dataset(TABLE, str(plain), **arguments)
    dest = destination(kind, tmp_path)
    job = EngineJob.setup(dest, mode="error")
    with job.handle(0).open() as attempt:
        pads.write_dataset(TABLE, "", filesystem=attempt.arrow_filesystem(), **arguments)
        record = attempt.commit()
    job.commit([record])
    through = committed_files(dest)
    assert through.pop("_SUCCESS")
    expected = _plain(plain)
    assert "k=d%20b/part-0.parquet" in expected
    assert through == expected


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_write_table_to_the_filesystem_and_a_file_object(kind: str, tmp_path: Path) -> None:
    pq.write_table(TABLE, tmp_path / "plain.parquet", row_group_size=1000)
    dest = destination(kind, tmp_path)
    job = EngineJob.setup(dest, mode="error")
    with job.handle(0).open() as attempt:
        pq.write_table(
            TABLE, "a/by-path.parquet", filesystem=attempt.arrow_filesystem(), row_group_size=1000
        )
        with attempt.open("b/by-file.parquet") as file:
            pq.write_table(TABLE, file, row_group_size=1000)
        record = attempt.commit()
    job.commit([record])
    files = committed_files(dest)
    expected = (tmp_path / "plain.parquet").read_bytes()
    assert files["a/by-path.parquet"] == expected
    assert files["b/by-file.parquet"] == expected


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_the_view_refuses_reads_and_deletes(kind: str, tmp_path: Path) -> None:
    job = EngineJob.setup(destination(kind, tmp_path), mode="error")
    with job.handle(0).open() as attempt:
        # local: Arrow's own output streams below the attempt directory
        assert (attempt.local_dir is not None) == (kind == "local")
        view = attempt.arrow_filesystem()
        with pytest.raises(NotImplementedError, match="only writes new files"):
            view.delete_dir("x")
        with pytest.raises(NotImplementedError):
            view.open_input_file("x")
        with pytest.raises(ReservedName):
            view.open_output_stream("_SUCCESS")
    job.abort()


@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_write_table_partitions_as_hive_directories(format: str, tmp_path: Path) -> None:
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest, mode="error")
    with job.handle(3).open() as attempt:
        write_table(attempt, TABLE, format=format, partition_by=["k"])
        record = attempt.commit()
    job.commit([record])
    names = sorted(name for name in committed_files(dest) if name != "_SUCCESS")
    stem = f"part-00003-{job.job_id.removeprefix('job_')}"
    suffix = "-0" if format != "json" else ""
    assert names == [f"k={k}/{stem}{suffix}.{format}" for k in ("a", "b", "c", "d%20b")]
    if format == "parquet":
        assert pads.dataset(dest, partitioning="hive").to_table().num_rows == len(TABLE)


@pytest.mark.parametrize("format", ["parquet", "csv", "json"])
def test_a_local_attempt_makes_no_directory_for_its_partitions(format: str, tmp_path: Path) -> None:
    """Partition files are written at the top of the attempt's directory (a ``mkdir``
    each in the task and an ``rmdir`` each at clean-up saved) and land in their
    partition directories at job commit."""
    dest = str(tmp_path / "out")
    job = EngineJob.setup(dest, mode="error")
    with job.handle(0).open() as attempt:
        write_table(attempt, TABLE, format=format, partition_by=["k"])
        assert attempt.local_dir is not None
        made = [root for root, dirs, _ in os.walk(attempt.local_dir) for _ in dirs]
        assert made == []
        assert len(os.listdir(attempt.local_dir)) == 4
        record = attempt.commit()
    job.commit([record])
    names = sorted(name for name in committed_files(dest) if name != "_SUCCESS")
    assert [name.split("/")[0] for name in names] == ["k=a", "k=b", "k=c", "k=d%20b"]
    assert not os.path.exists(os.path.join(dest, "_temporary"))


def test_the_local_view_lists_placed_files_where_they_land(tmp_path: Path) -> None:
    job = EngineJob.setup(str(tmp_path / "out"), mode="error")
    with job.handle(0).open() as attempt:
        view = attempt.arrow_filesystem()
        pq.write_table(TABLE, "a/b/x.parquet", filesystem=view)
        pq.write_table(TABLE, "top.parquet", filesystem=view)
        placed, directory, top, missing = view.get_file_info(
            ["a/b/x.parquet", "a/b", "top.parquet", "a/y.parquet"]
        )
        assert placed.type == pafs.FileType.File
        assert placed.size == os.path.getsize(
            os.path.join(str(attempt.local_dir), attempt.placed_name("a/b/x.parquet"))
        )
        assert directory.type == pafs.FileType.Directory
        assert top.type == pafs.FileType.File
        assert missing.type == pafs.FileType.NotFound
        listed = view.get_file_info(pafs.FileSelector("", recursive=True))
        assert sorted(info.path for info in listed) == [
            "a",
            "a/b",
            "a/b/x.parquet",
            "top.parquet",
        ]
        shallow = view.get_file_info(pafs.FileSelector("a"))
        assert [(info.path, info.type) for info in shallow] == [("a/b", pafs.FileType.Directory)]
        with pytest.raises(InvalidInput, match="attempt's own"):
            attempt.open(PLACED_PREFIX + "0-x.parquet")
        record = attempt.commit()
    job.commit([record])
    files = committed_files(str(tmp_path / "out"))
    assert files["a/b/x.parquet"] == files["top.parquet"]


@pytest.mark.parametrize("committer", ["staging", "magic"])
def test_write_dataset_through_the_s3_committers_is_byte_identical(
    s3_endpoint: str, tmp_path: Path, committer: str
) -> None:
    """Staging: Arrow's local streams below the attempt's local directory; magic: each
    file streams to a pending multipart upload."""
    from aiocommit_testing.s3_emulator import create_bucket

    arguments = {
        "format": "parquet",
        "partitioning": ["k"],
        "partitioning_flavor": "hive",
        "basename_template": "part-{i}.parquet",
    }
    plain = tmp_path / "plain"
    pads.write_dataset(TABLE, str(plain), **arguments)
    bucket = f"arrow-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    anyio.run(create_bucket, s3_endpoint, bucket)
    options = {
        "fs.s3a.endpoint": s3_endpoint,
        "fs.s3a.path.style.access": "true",
        "committer": committer,
    }
    job = EngineJob.setup(f"s3a://{bucket}/out", mode="error", options=options)
    with job.handle(0).open() as attempt:
        assert (attempt.local_dir is not None) == (committer == "staging")
        pads.write_dataset(TABLE, "", filesystem=attempt.arrow_filesystem(), **arguments)
        record = attempt.commit()
    job.commit([record])

    files = s3_files(s3_endpoint, bucket)
    assert files.pop("_SUCCESS")
    assert files == _plain(plain)
