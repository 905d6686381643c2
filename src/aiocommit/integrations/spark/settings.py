"""The options of ``df.write.format("aiocommit")``, parsed once on the driver.

Spark hands the options over as a case-insensitive mapping whose keys arrive
lower-cased (``partitionBy`` becomes ``partitionby``) and whose values are strings.
Keys are therefore compared lower-cased here. The commit options go through the one
key resolver (``aiocommit.options.resolve_key``, case-insensitive): our names
(``concurrency``, ``aiocommit.concurrency``), Hadoop's
(``mapreduce.manifest.committer.io.threads``) and the S3A ones (``fs.s3a.committer.name``,
``fs.s3a.endpoint`` ...), with or without ``spark.hadoop.``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiocommit.errors import InvalidInput
from aiocommit.integrations.spark.text_compression import TEXT_CODECS
from aiocommit.integrations.spark.text_options import TEXT_OPTIONS, TextOptions
from aiocommit.options import (
    CREDENTIAL_KEYS,
    HADOOP_ONLY_OPTIONS,
    S3A_PREFIX,
    SPARK_HADOOP_PREFIX,
    CommitOptions,
    UnknownOption,
    closest_key,
    command_line_defaults,
)

FORMATS = ("parquet", "csv", "json")
PARQUET_CODECS = ("snappy", "gzip", "zstd", "lz4", "brotli", "none", "uncompressed")
#: Spark's ``spark.sql.parquet.outputTimestampType`` values (INT96 is Spark's default)
TIMESTAMP_TYPES = ("INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS")

#: row group ceiling in bytes of buffered Arrow data, whatever ``rowGroupSize`` says
ROW_GROUP_BYTES = 128 * 1024 * 1024
#: total buffered Arrow data per task before the largest buffer is flushed early
TASK_BUFFER_BYTES = 512 * 1024 * 1024

#: Parquet row group cap in rows: none to speak of, as Spark's (``ROW_GROUP_BYTES`` rules)
DEFAULT_ROW_GROUP_ROWS = 64 * 1024 * 1024

#: URL schemes of S3, where Hadoop's ``fs.s3a.*`` keys apply
S3_SCHEMES = ("s3", "s3a")
#: Hadoop's per-bucket S3A settings: ``fs.s3a.bucket.BUCKET.KEY`` is ``fs.s3a.KEY`` there
S3A_BUCKET_PREFIX = "fs.s3a.bucket."

TEST_PREFIX = "aiocommit.test."
#: how ``register(spark)``'s DataFrameWriter passes ``mode("errorifexists"|"ignore")``,
#: which Spark refuses for Python data sources, to ``writer()``
SAVE_MODE_OPTION = "aiocommit.savemode"
SAVE_MODES = ("errorifexists", "ignore", "append", "overwrite")
#: why SQL INSERT/CTAS and writeTo cannot write through aiocommit, and what to use: one
#: line, as the first thing the user reads
TABLE_WRITES_REFUSED = (
    "aiocommit cannot write through SQL INSERT/CTAS or writeTo() (Spark gives a Python data "
    'source no path there): use df.write.format("aiocommit").saveAsTable(name) or .save(path)'
)

#: saveAsTable/insertInto on a Spark Connect session (its writer holds a plan, not a
#: DataFrame, so the table write cannot be routed to a path)
CONNECT_TABLE_WRITES_REFUSED = (
    "aiocommit cannot write tables through Spark Connect (saveAsTable/insertInto): "
    'write to a path with df.write.format("aiocommit").save(path), then CREATE TABLE '
    "... USING parquet LOCATION path"
)


def streaming_refused(release: str) -> str:
    """Why ``writeStream.format("aiocommit")`` fails on a pyspark without Spark's Python
    streaming sink API (before 4.0), and the recipe to use: one line."""
    return (
        f"aiocommit's streaming sink needs pyspark >= 4.0, not {release}: write each "
        'micro-batch with writeStream.foreachBatch(lambda df, batch_id: df.write.format("'
        'aiocommit").mode("append").save(path))'
    )


#: why a streaming write other than append is refused: one line
STREAM_APPEND_ONLY = (
    'aiocommit\'s streaming sink appends each micro-batch: use outputMode("append") '
    "(complete/update would replace the destination at every batch)"
)


#: the major Java version of Spark's JVM (``register(spark)``'s DataFrameWriter sets it):
#: Spark's CSV/JSON writers and partition names print doubles as that Java does
JAVA_VERSION_OPTION = "aiocommit.javaversion"

#: the write options this data source knows (lower-cased, as Spark hands them over),
#: besides the commit options (``CommitOptions``) and the test hooks
WRITE_OPTIONS = (
    "path",
    "format",
    "partitionby",
    "partitionoverwritemode",
    "compression",
    "rowgroupsize",
    "header",
    "localdir",
    "maxrecordsperfile",
    "timezone",
    "committer",
    "outputtimestamptype",
    "casesensitive",
    SAVE_MODE_OPTION,
    JAVA_VERSION_OPTION,
    "checkpointlocation",  # writeStream's: the query's ID and batches are read there
    "engine",  # auto | jvm | python: read by register()'s DataFrameWriter and write()
    *TEXT_OPTIONS,
)


@dataclass(frozen=True)
class TestHooks:
    """TEST-ONLY fault hooks, set by options under ``aiocommit.test.``. Never use them
    on real data: they make tasks or commits fail on purpose.

    * ``aiocommit.test.failPartitionOnFirstAttempt=N``: the task of partition N, on its
      attempt 0, uploads its files into its attempt directory and then raises.
    * ``aiocommit.test.failPartitionAlways=N``: the same on every attempt.
    * ``aiocommit.test.killFirstAttempts=true``: every task's attempt 0 is killed (its
      process exits at once, no ``finally`` runs) after it was handed its second batch,
      the files written so far left in its attempt directory.
    * ``aiocommit.test.commitFault=OP:TEXT``: ``commit()`` opens its store wrapped in a
      ``FaultyStore`` that fails store operation OP (``rename``, ``delete``, ...) on every
      path containing TEXT.
    * ``aiocommit.test.abortFault=OP:TEXT``: the same for ``abort()``.
    """

    __test__ = False  # not a pytest class

    fail_partition_on_first_attempt: int | None = None
    fail_partition_always: int | None = None
    kill_first_attempts: bool = False
    commit_fault: tuple[str, str] | None = None
    abort_fault: tuple[str, str] | None = None


@dataclass(frozen=True)
class WriteSettings:
    """Everything a writer needs, picklable; built on the driver in ``writer()``."""

    url: str
    format: str = "parquet"
    #: the partition columns (``writer()`` sets the schema's spelling of each)
    partition_by: tuple[str, ...] = ()
    #: the partition directories' column names: as given to ``partitionBy``, as Spark
    #: names them (``COUNTRY=de`` for a column ``country``); empty: ``partition_by``
    partition_names: tuple[str, ...] = ()
    partition_overwrite_mode: str = "static"
    compression: str | None = "snappy"
    row_group_size: int = DEFAULT_ROW_GROUP_ROWS
    #: Spark's ``maxRecordsPerFile``: rows per file before the next ``-c001`` file; 0: no limit
    max_records_per_file: int = 0
    header: bool = False
    #: Parquet timestamps: ``spark.sql.parquet.outputTimestampType`` (Spark's default INT96)
    timestamp_type: str = "INT96"
    #: CSV and JSON writer options (Spark's names and defaults)
    text: TextOptions = field(default_factory=TextOptions)
    local_dir: str | None = None
    #: on S3: the S3A committer, ``staging`` (default) or ``magic`` (the ``committer``
    #: option, or ``fs.s3a.committer.name``); its client settings are ``commit.store``
    committer: str = "staging"
    #: the session time zone (``spark.sql.session.timeZone``) or the ``timeZone`` option
    time_zone: str | None = None
    #: ``errorifexists`` or ``ignore`` when register()'s DataFrameWriter asked for them;
    #: empty for Spark's own append/overwrite
    save_mode: str = ""
    #: ``spark.sql.caseSensitive``: whether ``id`` and ``ID`` are two columns
    case_sensitive: bool = False
    commit: CommitOptions = field(default_factory=CommitOptions)
    hooks: TestHooks = field(default_factory=TestHooks)
    #: whether an append's conflict mode applies to each partition directory written
    #: (S3's partitioned committer: a partitioned write, unless ``fs.s3a.committer.name``
    #: says ``directory``) rather than to the whole destination
    per_partition: bool = False

    def commit_options(self, overwriting: bool) -> CommitOptions:
        """The job commit's options, its conflict mode decided by Spark's save mode:
        overwrite is ``replace``, per partition when dynamic; append is the conflict mode
        the write set (``fs.s3a.committer.staging.conflict-mode`` or ``conflict_mode``:
        ``fail``, ``append`` or ``replace``, per partition as ``per_partition`` says,
        as Hadoop's staging committers under Spark's append), else ``append``."""
        if not overwriting:
            mode = self.commit.conflict_mode or "append"
            per_partition = self.commit.replace_partitions
            if per_partition is None:
                per_partition = self.per_partition
            return self.commit.with_values(conflict_mode=mode, replace_partitions=per_partition)
        dynamic = self.partition_overwrite_mode == "dynamic" and bool(self.partition_by)
        return self.commit.with_values(conflict_mode="replace", replace_partitions=dynamic)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> WriteSettings:
        """Parse Spark's options; ``ValueError`` names a bad one."""
        lowered = {str(k).lower(): v for k, v in options.items()}
        check_known(lowered)
        url = lowered.get("path")
        if not url:
            raise InvalidInput(TABLE_WRITES_REFUSED)
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
        codec = lowered.get("compression", lowered.get("codec", default_codec)).strip().lower()
        allowed = PARQUET_CODECS if fmt == "parquet" else TEXT_CODECS
        if codec not in allowed:
            raise ValueError(f"compression for {fmt} must be one of {', '.join(allowed)}")
        row_group_size = int(lowered.get("rowgroupsize", str(DEFAULT_ROW_GROUP_ROWS)))
        if row_group_size < 1:
            raise ValueError(f"rowGroupSize must be >= 1, not {row_group_size}")
        max_records = int(lowered.get("maxrecordsperfile", "0"))
        text = TextOptions.from_options(fmt, lowered)
        java = lowered.get(JAVA_VERSION_OPTION, "").strip()
        if java:
            if not java.isdigit():
                raise ValueError(
                    f"{JAVA_VERSION_OPTION} must be a Java major version, not {java!r}"
                )
            text = dataclasses.replace(text, java_before_19=int(java) < 19)
        timestamp_type = lowered.get("outputtimestamptype", "INT96").strip().upper()
        if timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(
                f"outputTimestampType must be one of {', '.join(TIMESTAMP_TYPES)}, "
                f"not {timestamp_type!r}"
            )
        if fmt != "parquet" and "outputtimestamptype" in lowered:
            raise ValueError("outputTimestampType applies to parquet only")
        secrets = sorted(
            k for k in lowered if k.removeprefix(SPARK_HADOOP_PREFIX) in CREDENTIAL_KEYS
        )
        if secrets:
            raise ValueError(
                f"credentials never go in options ({', '.join(secrets)}): set "
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or a profile, or instance "
                "credentials) in the environment before the session starts"
            )
        on_s3 = url.partition("://")[0].lower() in S3_SCHEMES
        commit = CommitOptions.from_mapping(
            hadoop_view(lowered, url),
            handled_prefixes=(TEST_PREFIX, *WRITE_OPTIONS),
            defaults=command_line_defaults(),  # the driver exists to commit
        )
        per_partition = on_s3 and bool(partition_by) and commit.committer.name != "directory"
        committer = commit.committer.name or "staging"
        committer = {"directory": "staging", "partitioned": "staging"}.get(committer, committer)
        if committer not in ("staging", "magic"):
            raise InvalidInput(f"committer must be staging or magic, not {committer!r}")
        save_mode = lowered.get(SAVE_MODE_OPTION, "").strip().lower()
        if save_mode not in ("", *SAVE_MODES):
            raise ValueError(f"save mode must be one of {', '.join(SAVE_MODES)}, not {save_mode!r}")
        return cls(
            url=url,
            format=fmt,
            partition_by=partition_by,
            partition_overwrite_mode=mode,
            compression=None if codec in ("none", "uncompressed") else codec,
            row_group_size=row_group_size,
            max_records_per_file=max(0, max_records),
            header=text.header,
            text=text,
            timestamp_type=timestamp_type,
            local_dir=lowered.get("localdir") or None,
            committer=committer,
            time_zone=lowered.get("timezone") or None,
            save_mode=save_mode if save_mode in ("errorifexists", "ignore") else "",
            case_sensitive=lowered.get("casesensitive", "false").strip().lower() == "true",
            commit=commit,
            hooks=_hooks(lowered),
            per_partition=per_partition,
        )


def _s3_bucket(url: str) -> str | None:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in S3_SCHEMES:
        return None
    return rest.split("/", 1)[0].lower()


def hadoop_view(lowered: Mapping[str, str], url: str) -> dict[str, str]:
    """The options as Hadoop reads its keys for the destination ``url``: ``fs.s3a.*``
    (with or without ``spark.hadoop.``) configure S3A, so they are dropped for any other
    store; on S3 a per-bucket ``fs.s3a.bucket.BUCKET.KEY`` for the destination's bucket
    becomes ``fs.s3a.KEY`` and wins over it (other buckets' are dropped)."""
    bucket = _s3_bucket(url)
    general: dict[str, str] = {}
    specific: dict[str, str] = {}
    for key, value in lowered.items():
        bare = key.removeprefix(SPARK_HADOOP_PREFIX)
        if not bare.startswith(S3A_PREFIX):
            general[key] = value
            continue
        if bucket is None:
            continue
        if bare.startswith(S3A_BUCKET_PREFIX):
            named, _, rest = bare.removeprefix(S3A_BUCKET_PREFIX).partition(".")
            if named == bucket and rest:
                specific[S3A_PREFIX + rest] = value
            continue
        general[key] = value
    for key in specific:  # the bucket's setting wins, under any spelling of the key
        for other in [k for k in general if k.removeprefix(SPARK_HADOOP_PREFIX) == key]:
            del general[other]
    return {**general, **specific}


def _is_s3a_option(key: str) -> bool:
    return key.removeprefix(SPARK_HADOOP_PREFIX).startswith(S3A_PREFIX)


def is_commit_option(key: str) -> bool:
    """Whether the one key resolver (``aiocommit.options``) takes the key."""
    return (
        CommitOptions.option_for(key) is not None
        or key.removeprefix(SPARK_HADOOP_PREFIX) in HADOOP_ONLY_OPTIONS
    )


def check_known(lowered: Mapping[str, str]) -> None:
    """``UnknownOption`` naming each unknown option and the closest valid name: a typo
    such as ``compresion`` must not silently write with the default. ``fs.s3a.*`` keys
    the resolver does not take are Hadoop's (a whole configuration may be passed)."""
    unknown = sorted(
        k
        for k in lowered
        if k not in WRITE_OPTIONS
        and not k.startswith(TEST_PREFIX)
        and not _is_s3a_option(k)
        and not is_commit_option(k)
    )
    if not unknown:
        return
    hints = []
    closest: list[str | None] = []
    for key in unknown:
        close = _closest(key)
        closest.append(close)
        hints.append(f"{key!r}" + (f" (did you mean {close!r}?)" if close else ""))
    error = UnknownOption(unknown[0], closest[0])
    error.args = (f"unknown option(s) for aiocommit: {', '.join(hints)}",)
    raise error


def _closest(key: str) -> str | None:
    """The write option or commit option key most like ``key``."""
    close = difflib.get_close_matches(key, WRITE_OPTIONS, n=1, cutoff=0.6)
    return close[0] if close else closest_key(key)


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
        TEST_PREFIX + "killfirstattempts",
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
        kill_first_attempts=lowered.get(TEST_PREFIX + "killfirstattempts", "").strip().lower()
        == "true",
        commit_fault=_fault("commitFault", lowered.get(TEST_PREFIX + "commitfault")),
        abort_fault=_fault("abortFault", lowered.get(TEST_PREFIX + "abortfault")),
    )
