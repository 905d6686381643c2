"""The options of ``df.write.format("aiocommit")``, parsed once on the driver.

Spark hands the options over as a case-insensitive mapping whose keys arrive
lower-cased (``partitionBy`` becomes ``partitionby``) and whose values are strings.
Keys are therefore compared lower-cased here. ``CommitOptions.from_mapping`` matches our
names (``concurrency``, ``aiocommit.concurrency``) and Hadoop's
(``mapreduce.manifest.committer.io.threads``, with or without ``spark.hadoop.``), all of
which are lower-case already; ``tests/spark/test_units.py`` checks that stays true.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiocommit.options import DRIVER_DEFAULTS, CommitOptions

FORMATS = ("parquet", "csv", "json")
PARQUET_CODECS = ("snappy", "gzip", "zstd", "lz4", "brotli", "none", "uncompressed")
TEXT_CODECS = ("none", "uncompressed", "gzip")

#: row group ceiling in bytes of buffered Arrow data, whatever ``rowGroupSize`` says
ROW_GROUP_BYTES = 128 * 1024 * 1024
#: total buffered Arrow data per task before the largest buffer is flushed early
TASK_BUFFER_BYTES = 512 * 1024 * 1024

#: Parquet row group cap in rows: none to speak of, as Spark's (``ROW_GROUP_BYTES`` rules)
DEFAULT_ROW_GROUP_ROWS = 64 * 1024 * 1024

TEST_PREFIX = "aiocommit.test."


@dataclass(frozen=True)
class TestHooks:
    """TEST-ONLY fault hooks, set by options under ``aiocommit.test.``. Never use them
    on real data: they make tasks or commits fail on purpose.

    * ``aiocommit.test.failPartitionOnFirstAttempt=N``: the task of partition N, on its
      attempt 0, uploads its files into its attempt directory and then raises.
    * ``aiocommit.test.failPartitionAlways=N``: the same on every attempt.
    * ``aiocommit.test.commitFault=OP:TEXT``: ``commit()`` opens its store wrapped in a
      ``FaultyStore`` that fails store operation OP (``rename``, ``delete``, ...) on every
      path containing TEXT.
    * ``aiocommit.test.abortFault=OP:TEXT``: the same for ``abort()``.
    """

    __test__ = False  # not a pytest class

    fail_partition_on_first_attempt: int | None = None
    fail_partition_always: int | None = None
    commit_fault: tuple[str, str] | None = None
    abort_fault: tuple[str, str] | None = None


@dataclass(frozen=True)
class WriteSettings:
    """Everything a writer needs, picklable; built on the driver in ``writer()``."""

    url: str
    format: str = "parquet"
    partition_by: tuple[str, ...] = ()
    partition_overwrite_mode: str = "static"
    compression: str | None = "snappy"
    row_group_size: int = DEFAULT_ROW_GROUP_ROWS
    #: Spark's ``maxRecordsPerFile``: rows per file before the next ``-c001`` file; 0: no limit
    max_records_per_file: int = 0
    header: bool = False
    local_dir: str | None = None
    commit: CommitOptions = field(default_factory=CommitOptions)
    hooks: TestHooks = field(default_factory=TestHooks)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> WriteSettings:
        """Parse Spark's options; ``ValueError`` names a bad one."""
        lowered = {str(k).lower(): v for k, v in options.items()}
        url = lowered.get("path")
        if not url:
            raise ValueError(
                'aiocommit needs a destination: df.write.format("aiocommit").save(url)'
            )
        fmt = lowered.get("format", "parquet").strip().lower()
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        partition_by = tuple(
            c.strip() for c in lowered.get("partitionby", "").split(",") if c.strip()
        )
        if len(set(partition_by)) != len(partition_by):
            raise ValueError(f"partitionBy names a column twice: {partition_by}")
        mode = lowered.get("partitionoverwritemode", "static").strip().lower()
        if mode not in ("static", "dynamic"):
            raise ValueError(f"partitionOverwriteMode must be static or dynamic, not {mode!r}")
        default_codec = "snappy" if fmt == "parquet" else "none"
        codec = lowered.get("compression", default_codec).strip().lower()
        allowed = PARQUET_CODECS if fmt == "parquet" else TEXT_CODECS
        if codec not in allowed:
            raise ValueError(f"compression for {fmt} must be one of {', '.join(allowed)}")
        row_group_size = int(lowered.get("rowgroupsize", str(DEFAULT_ROW_GROUP_ROWS)))
        if row_group_size < 1:
            raise ValueError(f"rowGroupSize must be >= 1, not {row_group_size}")
        max_records = int(lowered.get("maxrecordsperfile", "0"))
        header = _bool("header", lowered.get("header", "false"))
        return cls(
            url=url,
            format=fmt,
            partition_by=partition_by,
            partition_overwrite_mode=mode,
            compression=None if codec in ("none", "uncompressed") else codec,
            row_group_size=row_group_size,
            max_records_per_file=max(0, max_records),
            header=header,
            local_dir=lowered.get("localdir") or None,
            commit=CommitOptions.from_mapping({**DRIVER_DEFAULTS, **lowered}),
            hooks=_hooks(lowered),
        )


def _bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{name}: not a boolean: {text!r}")


def _fault(name: str, text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    operation, sep, fragment = text.partition(":")
    if not sep or not operation or not fragment:
        raise ValueError(f"{name} must look like OPERATION:TEXT, not {text!r}")
    return operation.strip(), fragment


def _hooks(lowered: Mapping[str, str]) -> TestHooks:
    known = {
        TEST_PREFIX + "failpartitiononfirstattempt",
        TEST_PREFIX + "failpartitionalways",
        TEST_PREFIX + "commitfault",
        TEST_PREFIX + "abortfault",
    }
    unknown = sorted(k for k in lowered if k.startswith(TEST_PREFIX) and k not in known)
    if unknown:
        raise ValueError(f"unknown test hook option(s): {', '.join(unknown)}")

    def partition(key: str) -> int | None:
        text = lowered.get(TEST_PREFIX + key)
        return None if text is None or text.strip() == "" else int(text)

    return TestHooks(
        fail_partition_on_first_attempt=partition("failpartitiononfirstattempt"),
        fail_partition_always=partition("failpartitionalways"),
        commit_fault=_fault("commitFault", lowered.get(TEST_PREFIX + "commitfault")),
        abort_fault=_fault("abortFault", lowered.get(TEST_PREFIX + "abortfault")),
    )
