"""One options object for task and job commit, and the one normaliser of option keys.

A key names an option by our name (``concurrency``; also ``aiocommit.concurrency``,
``validate-output``, ``validate.output``) or by Hadoop's (``mapreduce.manifest.committer.
io.threads``), with or without ``spark.hadoop.``. An unknown key under our prefixes
(``aiocommit.``, ``mapreduce.manifest.committer.``) is an error naming the closest valid
key; a Hadoop ManifestCommitter option that aiocommit has no use for is a warning. Other
keys are ignored by default (a whole Spark or Hadoop configuration can be passed), or
refused (``others="error"``: the command line).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

SPARK_HADOOP_PREFIX = "spark.hadoop."
OWN_PREFIX = "aiocommit."
HADOOP_PREFIX = "mapreduce.manifest.committer."
#: the prefixes under which every key must be an option we know
OUR_PREFIXES = (OWN_PREFIX, HADOOP_PREFIX)
#: Hadoop 3.5.0 ManifestCommitter options (``ManifestCommitterConstants``) that have no
#: meaning here: the store operations class, the manifest writer's queue and save attempts
#: (aiocommit saves a manifest with its own retries), deleting the base directory first
HADOOP_ONLY_OPTIONS = frozenset(
    HADOOP_PREFIX + name
    for name in (
        "cleanup.parallel.delete.base.first",
        "manifest.save.attempts",
        "store.operations.classname",
        "writer.queue.capacity",
    )
)

logger = logging.getLogger("aiocommit")


class UnknownOption(ValueError):
    """A key under our prefixes that names no option; the message names the closest one."""

    def __init__(self, key: str, closest: str | None):
        hint = f"; did you mean {closest!r}?" if closest else ""
        super().__init__(f"unknown option {key!r}{hint}")
        self.key = key
        self.closest = closest


#: defaults of a process that exists to commit (the command line, a Spark driver), under
#: the settings a user gives: the rename stage uses every core
DRIVER_DEFAULTS: dict[str, object] = {"processes": 0}


def _option(default: Any, hadoop: str | None, doc: str) -> Any:
    return field(default=default, metadata={"hadoop": hadoop, "doc": doc})


@dataclass(frozen=True)
class CommitOptions:
    """How a job or task commit runs. Every field can also be set by its Hadoop name
    (see ``from_mapping``); ``docs/configuration.md`` lists them all."""

    concurrency: int = _option(
        2048,
        "mapreduce.manifest.committer.io.threads",
        "Most store operations in flight for the job (the job limiter), shared by its rename "
        "processes and capped by what the store client serves at once; adaptive concurrency "
        "backs off from it when the store throttles.",
    )
    adaptive_concurrency: bool = _option(
        True,
        None,
        "Cut the in-flight limit by 30% when the store throttles; grow it back by one per "
        "window of successes (AIMD).",
    )
    min_concurrency: int = _option(4, None, "Floor for adaptive concurrency.")
    rate_limit: float | None = _option(
        None, "fs.azure.io.rate.limit", "Store operations per second, shared per store client."
    )
    delete_rate_limit: float | None = _option(
        None, None, "Directory deletes per second, shared per store client."
    )
    max_attempts: int = _option(
        20, None, "Attempts per store operation, the first included, before its error surfaces."
    )
    retry_budget_seconds: float = _option(
        300.0, None, "Longest time one store operation may spend retrying."
    )
    retry_base_delay: float = _option(0.05, None, "First backoff delay in seconds.")
    retry_max_delay: float = _option(20.0, None, "Largest single backoff delay in seconds.")
    delete_target_files: bool = _option(
        False,
        "mapreduce.manifest.committer.delete.target.files",
        "Delete a file already at a destination before renaming onto it.",
    )
    validate_output: bool = _option(
        False,
        "mapreduce.manifest.committer.validate.output",
        "After renaming, check every destination's size, and etag where the store keeps it.",
    )
    write_success: bool = _option(
        True,
        "mapreduce.fileoutputcommitter.marksuccessfuljobs",
        "Write the _SUCCESS summary into the destination.",
    )
    cleanup_skip: bool = _option(
        False,
        "mapreduce.fileoutputcommitter.cleanup.skipped",
        "Leave the job directory under _temporary after the commit.",
    )
    cleanup_ignore_failures: bool = _option(
        False,
        "mapreduce.fileoutputcommitter.cleanup-failures.ignored",
        "A failing cleanup is logged and counted, not raised.",
    )
    cleanup_parallel_delete: bool = _option(
        True,
        "mapreduce.manifest.committer.cleanup.parallel.delete",
        "Delete task attempt directories in parallel before the job directory.",
    )
    report_dir: str | None = _option(
        None,
        "mapreduce.manifest.committer.summary.report.directory",
        "URL of a directory that gets summary-JOB.json, even when the commit fails.",
    )
    diagnostics_dir: str | None = _option(
        None,
        "mapreduce.manifest.committer.diagnostics.manifest.directory",
        "URL of a directory that gets a copy of the job's manifests under JOB/.",
    )
    use_source_etag: bool = _option(
        True, None, "Rename with the manifest's etag as a source precondition where known."
    )
    tune_gc: bool = _option(
        False,
        None,
        "Freeze the garbage collector's survivors and collect less often while the job "
        "commits (a process-wide change: only for a process that exists to commit; the "
        "rename worker processes always do).",
    )
    processes: int = _option(
        1,
        None,
        "Worker processes for the rename stage, one event loop and store client each; 1 keeps "
        "everything in the caller's event loop, 0 means one per CPU core. The command line "
        "and the Spark driver default to 0 (DRIVER_DEFAULTS).",
    )

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, not {self.concurrency}")
        if self.min_concurrency < 1:
            raise ValueError(f"min_concurrency must be >= 1, not {self.min_concurrency}")
        if self.processes < 0:
            raise ValueError(f"processes must be >= 0, not {self.processes}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, not {self.max_attempts}")
        for name in ("rate_limit", "delete_rate_limit"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, not {value}")

    @classmethod
    def names(cls) -> dict[str, str | None]:
        """Our option name -> its Hadoop name (or None)."""
        return {f.name: f.metadata["hadoop"] for f in dataclasses.fields(cls)}

    @classmethod
    def option_for(cls, key: str) -> str | None:
        """The field a key names, or None: ``aiocommit.validate-output``,
        ``spark.hadoop.mapreduce.manifest.committer.io.threads``, ``report_dir``."""
        stripped = key.strip().removeprefix(SPARK_HADOOP_PREFIX)
        hadoop = _hadoop_names()
        if stripped in hadoop:
            return hadoop[stripped]
        own = stripped.removeprefix(OWN_PREFIX)
        names = _field_names()
        for candidate in (own, own.replace("-", "_"), own.replace(".", "_")):
            if candidate in names:
                return candidate
        return None

    @classmethod
    def from_mapping(
        cls,
        settings: Mapping[str, object],
        *,
        others: Literal["ignore", "error"] = "ignore",
        handled_prefixes: Iterable[str] = (),
        **overrides: Any,
    ) -> CommitOptions:
        """Build from a mapping of option keys (see the module docstring) to values
        (strings are parsed); ``overrides`` (field names) win.

        Raises ``UnknownOption`` for an unknown key under our prefixes, or for any unknown
        key with ``others="error"``; keys under ``handled_prefixes`` belong to the caller
        and are skipped. ``ValueError`` for a bad value."""
        handled = tuple(handled_prefixes)
        values: dict[str, Any] = {}
        for raw_key, raw_value in settings.items():
            key = str(raw_key).strip()
            name = cls.option_for(key)
            if name is not None:
                values[name] = _parse(_fields()[name], raw_value)
                continue
            bare = key.removeprefix(SPARK_HADOOP_PREFIX)
            if handled and bare.startswith(handled):
                continue
            if bare in HADOOP_ONLY_OPTIONS:
                logger.warning("option %s is Hadoop's and has no effect on aiocommit", key)
            elif bare.startswith(OUR_PREFIXES) or others == "error":
                raise UnknownOption(key, _closest(bare))
        values.update(overrides)
        return cls(**values)


@functools.cache
def _fields() -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(CommitOptions)}


def _field_names() -> frozenset[str]:
    return frozenset(_fields())


@functools.cache
def _hadoop_names() -> dict[str, str]:
    return {
        f.metadata["hadoop"]: f.name
        for f in dataclasses.fields(CommitOptions)
        if f.metadata["hadoop"]
    }


def _closest(key: str) -> str | None:
    """The valid key most like ``key``: our names with and without ``aiocommit.``, and
    Hadoop's names."""
    names = _field_names()
    candidates = [*names, *(OWN_PREFIX + n for n in names), *_hadoop_names()]
    found = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    if not found and key.startswith(OWN_PREFIX):
        found = difflib.get_close_matches(key.removeprefix(OWN_PREFIX), list(names), n=1)
    return found[0] if found else None


def _parse(option: dataclasses.Field[Any], raw: object) -> Any:
    kind = option.type if isinstance(option.type, str) else getattr(option.type, "__name__", "")
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if kind.startswith("bool"):
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{option.name}: not a boolean: {raw!r}")
    if "None" in kind and text == "":
        return None
    if kind.startswith("int"):
        return int(text)
    if kind.startswith("float"):
        return float(text)
    return text
