"""The integration's parts without a Spark session: escaping, option parsing, Arrow
splitting and the commit/overwrite protocol against the memory and local stores."""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aiocommit import CommitOptions, new_job_id
from aiocommit.errors import UnknownOption
from aiocommit.integrations.spark import files as files_module
from aiocommit.integrations.spark.committer import (
    TaskOutcome,
    abort_write,
    close_task_attempt,
    commit_task_files,
    commit_write,
    open_task_attempt,
    prepare_job,
)
from aiocommit.integrations.spark.files import (
    LocalFile,
    TaskOutput,
    split_by_partition,
)
from aiocommit.integrations.spark.paths import (
    DEFAULT_PARTITION_NAME,
    escape_path_name,
    partition_path,
    unescape_path_name,
)
from aiocommit.integrations.spark.settings import TestHooks, WriteSettings
from aiocommit.integrations.spark.text_formats import csv_field_encoder, json_encoder
from aiocommit.integrations.spark.values import (
    date_string,
    java_float_string,
    partition_timestamp,
    plain_decimal,
    text_timestamp,
    zone,
)
from aiocommit.stores import LocalStore
from aiocommit.stores.base import join
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.registry import open_store
from tests.helpers import walk

#: Spark's ExternalCatalogUtils.charToEscape (not on Windows), plus NUL
SPARK_ESCAPED = {chr(c) for c in range(0x20)} | set("\"#%'*/:=?\\\x7f{[]^")


def test_escaping_is_sparks_character_set() -> None:
    for code in range(0x80):
        char = chr(code)
        expected = f"%{code:02X}" if char in SPARK_ESCAPED else char
        assert escape_path_name(char) == expected
    assert escape_path_name("a/b c") == "a%2Fb c"
    assert escape_path_name("ünï 日本") == "ünï 日本"
    assert escape_path_name("100%") == "100%25"
    for text in ["a/b", "x%2Fy", "%", "%4", "%zz", "tab\t", "ü=?#"]:
        assert unescape_path_name(escape_path_name(text)) == text
    assert partition_path(["k", "a/b"], [None, ""]) == (
        f"k={DEFAULT_PARTITION_NAME}/a%2Fb={DEFAULT_PARTITION_NAME}"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (2.5, "2.5"),
        (100.0, "100.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (1.5e20, "1.5E20"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_java_float_strings(value: float, text: str) -> None:
    assert java_float_string(value) == text


def test_float32_partition_values_are_short() -> None:
    (value,) = pa.array([0.1], pa.float32()).to_pylist()
    assert java_float_string(value, single=True) == "0.1"


def test_commit_option_names_survive_sparks_lower_casing() -> None:
    for name, hadoop in CommitOptions.names().items():
        assert name == name.lower()
        assert hadoop is None or hadoop == hadoop.lower()


def test_settings_from_lower_cased_spark_options() -> None:
    settings = WriteSettings.from_options(
        {
            "path": "memory://x/dest",
            "format": "CSV",
            "partitionby": " a, b ",
            "partitionoverwritemode": "DYNAMIC",
            "header": "true",
            "spark.hadoop.mapreduce.manifest.committer.io.threads": "9",
            "aiocommit.validate_output": "true",
            "Cleanup_Skip": "true",
            "aiocommit.test.failpartitionalways": "3",
        }
    )
    assert settings.format == "csv" and settings.header
    assert settings.partition_by == ("a", "b")
    assert settings.partition_overwrite_mode == "dynamic"
    assert settings.compression is None
    assert settings.commit.concurrency == 9
    assert settings.commit.validate_output and settings.commit.cleanup_skip
    assert settings.hooks == TestHooks(fail_partition_always=3)
    parquet = WriteSettings.from_options({"path": "/d", "compression": "uncompressed"})
    assert parquet.format == "parquet" and parquet.compression is None
    assert WriteSettings.from_options({"path": "/d"}).compression == "snappy"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "aiocommit cannot write through SQL INSERT/CTAS"),
        ({"format": "orc"}, "format must be"),
        ({"compression": "lzo"}, "compression for parquet"),
        ({"format": "json", "compression": "zstd"}, "compression for json"),
        ({"format": "csv", "codec": "brotli"}, "compression for csv"),
        ({"format": "csv", "inferschema": "true"}, "'inferschema' is an option of Spark's readers"),
        ({"format": "json", "writenonasciicharacterascodepoint": "true"}, "does not honour"),
        ({"format": "csv", "pretty": "true"}, "not an option of Spark's csv writer"),
        ({"format": "json", "sep": ";"}, "not an option of Spark's json writer"),
        ({"header": "true"}, "not an option of Spark's parquet writer"),
        ({"format": "csv", "quote": "ab"}, "one character"),
        ({"format": "csv", "quoteall": "yes"}, "quoteAll must be true or false"),
        ({"format": "csv", "encoding": "no-such-charset"}, "unknown charset"),
        ({"format": "csv", "linesep": ""}, "lineSep"),
        ({"format": "json", "timestampformat": "yyyy-MM-dd zzz"}, "timestampFormat"),
        ({"format": "csv", "dateformat": "YYYY-ww"}, "Spark refuses it too"),
        ({"format": "json", "locale": "de-DE"}, "locale 'de-DE'"),
        ({"partitionby": "a,a"}, "twice"),
        ({"rowgroupsize": "0"}, "rowGroupSize"),
        ({"aiocommit.test.nosuchhook": "1"}, "unknown test hook"),
        ({"aiocommit.test.commitfault": "rename"}, "OPERATION:TEXT"),
        ({"mapreduce.manifest.committer.io.threads": "0"}, "concurrency"),
    ],
)
def test_bad_settings(options: dict[str, str], message: str) -> None:
    full = {"path": "/d", **options} if options else options
    with pytest.raises(ValueError, match=message):
        WriteSettings.from_options(full)


def test_split_by_partition_groups_rows_and_drops_columns() -> None:
    batch = pa.record_batch(
        {
            "id": list(range(8)),
            "a": ["x", "y/z", None, "x", "y/z", "", "x", None],
            "b": [1, 1, 2, 1, 2, 2, 1, 2],
        }
    )
    groups = {path: part.to_pydict() for path, part in split_by_partition(batch, ("a", "b"))}
    default = DEFAULT_PARTITION_NAME
    assert groups == {
        "a=x/b=1": {"id": [0, 3, 6]},
        "a=y%2Fz/b=1": {"id": [1]},
        "a=y%2Fz/b=2": {"id": [4]},
        f"a={default}/b=2": {"id": [2, 5, 7]},
    }


def _task_output(tmp_path: Path, **extra: Any) -> TaskOutput:
    return TaskOutput(
        fmt="parquet",
        compression="snappy",
        row_group_size=10,
        header=False,
        local_dir=str(tmp_path),
        base_name="part-00000-job-1",
        partition_by=("k",),
        **extra,
    )


def _cycling_batches(output: TaskOutput, keys: list[str], rows: int = 90) -> None:
    for start in range(0, rows, 9):  # 9-row batches, k cycling through the keys
        ids = list(range(start, start + 9))
        output.add(pa.record_batch({"id": ids, "k": [keys[start // 9 % len(keys)]] * 9}))


def _ids(done: list[LocalFile]) -> list[int]:
    tables = (pq.read_table(f.local_path)["id"].to_pylist() for f in done)
    return sorted(itertools.chain.from_iterable(tables))


def test_more_partitions_than_open_files_still_one_file_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Spark (which sorts a task's rows by partition): one file per partition, even
    past MAX_OPEN_FILES partitions (the rest are spilled and written sorted)."""
    monkeypatch.setattr(files_module, "MAX_OPEN_FILES", 2)
    output = _task_output(tmp_path)
    _cycling_batches(output, ["a", "b", "c", "d", "e"])
    done = output.close()
    assert sorted(f.relative for f in done) == [
        f"k={k}/part-00000-job-1.c000.snappy.parquet" for k in "abcde"
    ]
    assert [f.rows for f in sorted(done, key=lambda f: f.relative)] == [18] * 5
    assert all(os.path.getsize(f.local_path) == f.size for f in done)
    assert _ids(done) == list(range(90))
    assert not os.path.exists(output.spill_path)
    for local in done:
        meta = pq.ParquetFile(local.local_path).metadata
        assert all(meta.row_group(i).num_rows <= 10 for i in range(meta.num_row_groups))


def test_max_records_per_file_rolls_over_per_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files_module, "MAX_OPEN_FILES", 2)
    output = _task_output(tmp_path, max_records_per_file=20)
    _cycling_batches(output, ["a", "b", "c"], rows=81)  # 27 rows per partition: 20 + 7
    done = output.close()
    by_name = {f.relative: f.rows for f in done}
    assert by_name == {
        f"k={k}/part-00000-job-1.c00{n}.snappy.parquet": rows
        for k in "abc"
        for n, rows in ((0, 20), (1, 7))
    }
    assert _ids(done) == list(range(81))


def test_parquet_footer_carries_sparks_schema(tmp_path: Path) -> None:
    metadata = {"org.apache.spark.sql.parquet.row.metadata": '{"type":"struct","fields":[]}'}
    output = _task_output(tmp_path, parquet_metadata=metadata)
    _cycling_batches(output, ["a"], rows=9)
    (done,) = output.close()
    footer = pq.read_metadata(done.local_path).metadata
    assert footer[b"org.apache.spark.sql.parquet.row.metadata"] == b'{"type":"struct","fields":[]}'
    assert b"ARROW:schema" not in footer  # as Spark's files: only Spark's keys


# -- the commit protocol, without Spark ---------------------------------------------

_names = itertools.count()


@pytest.fixture(params=["memory", "local"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield f"memory://spark-unit-{next(_names)}/dest"
    else:
        yield str(tmp_path / "dest")


def _swaps_partitions(url: str, scratch: Path) -> bool:
    """Whether a replace per partition at ``url`` swaps partition directories whole
    (a local filesystem with ``renameat2``: ``committers.manifest.swap_partitions``)."""
    if "://" in url:
        return False
    probe = scratch / "swap-probe"
    probe.mkdir()
    return LocalStore().can_swap_directories(str(probe))


async def files_at(url: str) -> dict[str, bytes]:
    store, path = open_store(url)
    try:
        return await walk(store, path)
    except Exception:
        return {}
    finally:
        await store.aclose()


def visible(found: dict[str, bytes]) -> dict[str, bytes]:
    """What a reader sees: it skips the protocol's ``_``-prefixed names (``_SUCCESS``,
    ``_temporary``, the destination's lease)."""
    return {k: v for k, v in found.items() if not k.startswith("_")}


def local_files(tmp_path: Path, tag: str, names: dict[str, str]) -> list[LocalFile]:
    out = []
    for index, (relative, content) in enumerate(names.items()):
        local = tmp_path / f"{tag}-{index}.tmp"
        local.write_text(content)
        partition = relative.rpartition("/")[0]
        out.append(LocalFile(relative, partition, str(local), rows=1, size=len(content)))
    return out


async def commit_attempt(
    settings: WriteSettings,
    job_id: str,
    *,
    partition: int,
    attempt_number: int,
    files: list[LocalFile],
) -> TaskOutcome:
    """A task attempt's steps on the executor: open, commit its files, close."""
    opened = await open_task_attempt(
        settings, job_id, partition=partition, attempt_number=attempt_number
    )
    try:
        return await commit_task_files(
            settings, opened, partition=partition, attempt_number=attempt_number, files=files
        )
    finally:
        await close_task_attempt(opened)


async def run_job(
    settings: WriteSettings,
    tmp_path: Path,
    tasks: dict[int, dict[str, str]],
) -> tuple[str, list[TaskOutcome]]:
    job_id = new_job_id()
    await prepare_job(settings, job_id)
    results = [
        await commit_attempt(
            settings,
            job_id,
            partition=p,
            attempt_number=0,
            files=local_files(tmp_path, f"{job_id}-{p}", names),
        )
        for p, names in tasks.items()
    ]
    return job_id, results


async def seed(settings: WriteSettings, tmp_path: Path, tasks: dict[int, dict[str, str]]) -> None:
    """Commit a first job's files (an append)."""
    job_id, results = await run_job(settings, tmp_path, tasks)
    await commit_write(settings, job_id, False, results)


async def test_spark_authorized_attempt_wins_over_a_later_loser(url: str, tmp_path: Path) -> None:
    settings = WriteSettings(url=url)
    job_id = new_job_id()
    await prepare_job(settings, job_id)
    winner = await commit_attempt(
        settings, job_id, partition=0, attempt_number=1,
        files=local_files(tmp_path, "w", {"p=1/part-00000-tid5.txt": "winner"}),
    )  # fmt: skip
    # the losing speculative attempt finishes later and saves its task manifest over the
    # winner's; the job commit loads the winner's own copy, named in its message
    await commit_attempt(
        settings, job_id, partition=0, attempt_number=0,
        files=local_files(tmp_path, "l", {"p=1/part-00000-tid4.txt": "loser"}),
    )  # fmt: skip
    assert winner.manifest.endswith(".attempt-manifest.json")
    await commit_write(settings, job_id, False, [winner])
    found = await files_at(url)
    assert visible(found) == {"p=1/part-00000-tid5.txt": b"winner"}
    assert not any(k.startswith("_temporary") for k in found)


async def test_abort_after_failed_overwrite_commit_keeps_old_data(url: str, tmp_path: Path) -> None:
    settings = WriteSettings(url=url)
    await seed(settings, tmp_path, {0: {"k=a/old-0.txt": "old"}, 1: {"k=b/old-1.txt": "old"}})
    job_id, results = await run_job(
        settings, tmp_path, {0: {"k=b/new-0.txt": "new"}, 1: {"k=c/new-1.txt": "new"}}
    )
    before = {"k=a/old-0.txt": b"old", "k=b/old-1.txt": b"old"}
    failing = WriteSettings(url=url, hooks=TestHooks(commit_fault=("rename", "new-1")))
    with pytest.raises(Exception, match="injected permanent failure"):
        await commit_write(failing, job_id, True, results)
    assert await abort_write(settings, job_id, True) == "aborted"
    assert await abort_write(settings, job_id, True) == "aborted"  # idempotent
    found = await files_at(url)
    assert visible(found) == before
    assert not any(k.startswith("_temporary") for k in found)


async def test_overwrite_killed_part_way_is_finished_by_a_rerun(url: str, tmp_path: Path) -> None:
    """The engine's replace, as a dynamic overwrite: the commit dies while the old files
    go; nobody calls abort. A re-run of the same commit() finishes it from the record
    in the commit plan."""
    settings = WriteSettings(url=url, partition_by=("k",), partition_overwrite_mode="dynamic")
    await seed(settings, tmp_path, {0: {"k=a/old-0.txt": "old"}, 1: {"k=b/old-1.txt": "old"}})
    job_id, results = await run_job(settings, tmp_path, {0: {"k=b/new-0.txt": "new"}})
    crashing = WriteSettings(
        url=url,
        partition_by=("k",),
        partition_overwrite_mode="dynamic",
        hooks=TestHooks(commit_fault=("rename", "old-1")),
    )
    with pytest.raises(Exception, match="injected permanent failure"):
        await commit_write(crashing, job_id, True, results)
    during = {"k=a/old-0.txt": b"old", "k=b/new-0.txt": b"new"}
    if not _swaps_partitions(url, tmp_path):
        # file by file: the new file is in, the old one of its partition could not go yet
        during["k=b/old-1.txt"] = b"old"
    # else the partition was swapped whole, and moving its old directory aside failed
    assert visible(await files_at(url)) == during
    await commit_write(settings, job_id, True, results)
    found = await files_at(url)
    assert visible(found) == {"k=a/old-0.txt": b"old", "k=b/new-0.txt": b"new"}
    assert not any(k.startswith("_temporary") for k in found)


async def test_static_overwrite_aborted_part_way_restores_the_old_output(
    url: str, tmp_path: Path
) -> None:
    settings = WriteSettings(url=url)
    await seed(settings, tmp_path, {0: {"old-0.txt": "old"}, 1: {"k=b/old-1.txt": "old"}})
    before = visible(await files_at(url))
    job_id, results = await run_job(settings, tmp_path, {0: {"new.txt": "new"}})
    crashing = WriteSettings(url=url, hooks=TestHooks(commit_fault=("rename", "old-1")))
    with pytest.raises(Exception, match="injected permanent failure"):
        await commit_write(crashing, job_id, True, results)
    assert await abort_write(settings, job_id, True) == "aborted"
    found = await files_at(url)
    assert visible(found) == before
    assert not any(k.startswith("_temporary") for k in found)


def test_memory_store_urls_share_one_store() -> None:
    store, path = open_store("memory://spark-unit-shared/dest")
    again, _ = open_store("memory://spark-unit-shared/other")
    assert isinstance(store, MemoryStore) and store is again and path == "/dest"
    assert join(path, "x") == "/dest/x"


LA = zone("America/Los_Angeles")


def _micros(moment: datetime.datetime) -> int:
    return (moment - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("moment", "tz", "partition", "text"),
    [
        (  # Los Angeles before 1883: local mean time, an offset with seconds
            datetime.datetime(1850, 1, 1, 0, 0, 0, 123456),
            LA,
            "1849-12-31 16:07:02.123456",
            "1849-12-31T16:07:02.123-07:52:58",
        ),
        (datetime.datetime(1, 1, 1), LA, "0000-12-31 16:07:02", "0000-12-31T16:07:02.000-07:52:58"),
        (datetime.datetime(2024, 3, 10, 10, 30, 0, 500), LA, "2024-03-10 03:30:00.0005", None),
        (datetime.datetime(2024, 7, 1, 12, 0), zone("UTC"), "2024-07-01 12:00:00", None),
        (datetime.datetime(2024, 7, 1, 12, 0), None, "2024-07-01 12:00:00", None),
    ],
)
def test_timestamps_as_spark_writes_them(
    moment: datetime.datetime, tz: datetime.tzinfo | None, partition: str, text: str | None
) -> None:
    assert partition_timestamp(_micros(moment), tz) == partition
    if text is not None:
        assert text_timestamp(_micros(moment), tz) == text
    assert text_timestamp(_micros(datetime.datetime(2024, 7, 1, 12)), zone("UTC")).endswith(".000Z")


def test_dates_and_decimals_as_spark_writes_them() -> None:
    assert date_string(0) == "1970-01-01"
    assert date_string(-719_163) == "0000-12-31"  # a day before 0001-01-01
    assert date_string(2_932_897) == "+10000-01-01"
    assert plain_decimal(Decimal("1.00000000000E-7")) == "0.000000100000000000"
    assert plain_decimal(Decimal("0E-18")) == "0.000000000000000000"


def test_text_formats_refuse_intervals_with_the_way_out() -> None:
    for encoder in (json_encoder, csv_field_encoder):
        with pytest.raises(TypeError, match="cast them to string first"):
            encoder(pa.duration("us"))


def test_datetime_patterns_print_as_javas_formatter() -> None:
    """Expected strings as Spark 4.3's writer printed them (tests/spark/test_parity.py
    checks the same patterns against Spark itself)."""
    from aiocommit.integrations.spark.datetime_patterns import compile_pattern
    from aiocommit.integrations.spark.values import local_time

    tz = zone("America/Los_Angeles")
    micros = 1_710_037_800_000_500  # 2024-03-10 02:30:00.0005 UTC
    text = compile_pattern("yyyy-MM-dd HH:mm:ss.SSSSSS XX a hh")(*local_time(micros, tz))
    assert text == "2024-03-09 18:30:00.000500 -0800 PM 06"
    day = compile_pattern("dd/MM/yyyy EEE 'at' MMM '' G")(*local_time(19727 * 86_400_000_000, None))
    assert day == "05/01/2024 Fri at Jan ' AD"
    assert compile_pattern("XXX x Z")(*local_time(0, zone("UTC"))) == "Z +00 +0000"


def test_csv_quoting_as_sparks_writer_with_its_defaults() -> None:
    """Spark 4.3's own output for these values (univocity's rules, Spark's settings)."""
    from aiocommit.integrations.spark.text_formats import CsvQuoting
    from aiocommit.integrations.spark.text_options import TextOptions

    field = CsvQuoting(TextOptions()).field
    written = [field(v, i) for i, v in enumerate(["#hash", 'a"b', "back\\slash", "  sp  "])]
    assert written == ['"#hash"', '"a\\"b"', "back\\slash", "sp"]
    assert [field(v, 1) for v in ["", None, "x,y", "l\ni", "q'"]] == [
        '""',
        "",
        '"x,y"',
        '"l\ni"',
        "q'",
    ]
    quote_all = CsvQuoting(TextOptions(quote_all=True, escape_quotes=False)).field
    assert [quote_all(v, 1) for v in ["back\\slash", None, 'a"b']] == [
        '"back\\\\slash"',
        '""',
        '"a\\"b"',
    ]


def test_day_time_intervals_as_sparks_text() -> None:
    """``CAST(interval AS STRING)`` as Spark 4.3 prints it (DAY TO SECOND and HOUR TO
    MINUTE are also compared with Spark's own CSV/JSON files in test_parity.py)."""
    from aiocommit.integrations.spark.values import day_time_interval_string as text

    day = 86_400_000_000
    assert text(day + 7, 0, 3) == "INTERVAL '1 00:00:00.000007' DAY TO SECOND"
    assert text(0, 0, 3) == "INTERVAL '0 00:00:00' DAY TO SECOND"
    assert text(-(5_400_000_000 + 1_500_000), 1, 3) == "INTERVAL '-01:30:01.5' HOUR TO SECOND"
    assert text(25 * 3_600_000_000, 1, 2) == "INTERVAL '25:00' HOUR TO MINUTE"
    assert text(61_500_000, 3, 3) == "INTERVAL '61.5' SECOND"
    assert text(2 * day + 18_000_000_000, 0, 1) == "INTERVAL '2 05' DAY TO HOUR"
    assert text(day, 0, 0) == "INTERVAL '1' DAY"


def test_pretty_json_lays_out_as_sparks_pretty_option() -> None:
    """Spark 4.3's ``df.write.option("pretty", "true").json(...)`` output for this row."""
    from aiocommit.integrations.spark.text_formats import pretty_json

    compact = '{"id":0,"a":[1.5,null],"e":[],"m":{"k":{"x":0,"y":[{"z":1}]}},"s":{},"t":"a\\",:{["}'
    assert pretty_json(compact) == (
        '{\n  "id" : 0,\n  "a" : [ 1.5, null ],\n  "e" : [ ],\n  "m" : {\n    "k" : {\n'
        '      "x" : 0,\n      "y" : [ {\n        "z" : 1\n      } ]\n    }\n  },\n'
        '  "s" : { },\n  "t" : "a\\",:{["\n}'
    )


def test_save_modes_decide_the_conflict_mode() -> None:
    """Overwrite replaces whatever the options say; an append runs the conflict mode
    the options set, as Hadoop's staging committers do under Spark's append."""
    settings = WriteSettings.from_options(
        {"path": "/x", "partitionBy": "k", "aiocommit.conflict_mode": "fail"}
    )
    assert settings.commit.conflict_mode == "fail"
    assert settings.commit_options(False).conflict_mode == "fail"
    static = settings.commit_options(True)
    assert (static.conflict_mode, static.replace_partitions) == ("replace", False)
    dynamic = dataclasses.replace(settings, partition_overwrite_mode="dynamic")
    assert dynamic.commit_options(True).replace_partitions is True


def test_s3a_settings_by_their_hadoop_names() -> None:
    """``spark.hadoop.fs.s3a.committer.name`` picks the committer (it kept staging) and the
    client settings land in the options tree's store settings."""
    from aiocommit.integrations.spark.committer import setup_options

    settings = WriteSettings.from_options(
        {
            "path": "s3a://bucket/out",
            "spark.hadoop.fs.s3a.committer.name": "magic",
            "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
            "spark.hadoop.fs.s3a.path.style.access": "true",
        }
    )
    assert settings.committer == "magic"
    assert settings.commit.store.as_s3a() == {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.path.style.access": "true",
    }
    assert setup_options(settings).committer.name == "magic"
    with pytest.raises(UnknownOption, match="did you mean 'concurrency'"):
        WriteSettings.from_options({"path": "/x", "concurency": "4"})
