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
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiocommit.errors import InvalidInput
from aiocommit.errors import UnknownOption as UnknownOption  # re-exported: its old home

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

#: what a job commit does with output already in its destination (Hadoop S3A's
#: ``fs.s3a.committer.staging.conflict-mode`` values)
CONFLICT_MODES = ("fail", "append", "replace")

#: the committers ``CommitOptions.committer`` names (Hadoop's ``directory`` is staging,
#: its ``file`` the manifest committer)
COMMITTERS = ("manifest", "staging", "partitioned", "magic", "directory", "file")


def _option(
    default: Any,
    hadoop: str | None,
    doc: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
) -> Any:
    """A ``CommitOptions`` field: its default, Hadoop name, documentation, and the range
    its value must be in (``minimum`` inclusive, ``above`` exclusive). Its type comes from
    the annotation and is checked too (``__post_init__``)."""
    return field(
        default=default,
        metadata={"hadoop": hadoop, "doc": doc, "minimum": minimum, "above": above},
    )


#: (smaller, larger): ``smaller`` may not exceed ``larger``, unless ``smaller`` is left at
#: its default (then it yields: the limiter's floor is never above its limit)
RELATIONS: tuple[tuple[str, str], ...] = (
    ("min_concurrency", "concurrency"),
    ("retry_base_delay", "retry_max_delay"),
)


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
        minimum=1,
    )
    adaptive_concurrency: bool = _option(
        True,
        None,
        "Adapt to a throttling store: cut the in-flight limit by 30% when it throttles, grow "
        "it back by one per window of successes (AIMD); once it throttles half of the calls "
        "(a limit in requests/s), pace them at the rate it admits, probing upward (AIMD on "
        "the rate).",
    )
    min_concurrency: int = _option(
        4, None, "Floor for adaptive concurrency; at most ``concurrency``.", minimum=1
    )
    rate_limit: float | None = _option(
        None,
        "fs.azure.io.rate.limit",
        "Store operations per second, shared per store client.",
        above=0,
    )
    delete_rate_limit: float | None = _option(
        None, None, "Directory deletes per second, shared per store client.", above=0
    )
    max_attempts: int = _option(
        20,
        None,
        "Attempts per store operation, the first included, before its error surfaces.",
        minimum=1,
    )
    retry_budget_seconds: float = _option(
        300.0, None, "Longest time one store operation may spend retrying.", minimum=0
    )
    retry_base_delay: float = _option(
        0.05, None, "First backoff delay in seconds; at most ``retry_max_delay``.", minimum=0
    )
    retry_max_delay: float = _option(
        20.0, None, "Largest single backoff delay in seconds.", minimum=0
    )
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
        "URL of a directory that gets summary-JOB.json, even when the commit fails; checked "
        "when the options are built (a known scheme; a local path must be writable).",
    )
    diagnostics_dir: str | None = _option(
        None,
        "mapreduce.manifest.committer.diagnostics.manifest.directory",
        "URL of a directory that gets a copy of the job's manifests under JOB/.",
    )
    use_source_etag: bool = _option(
        True, None, "Rename with the manifest's etag as a source precondition where known."
    )
    committer: str | None = _option(
        None,
        None,
        "The committer of a new job (set up by setup_job): manifest (renames), staging, "
        "partitioned or magic (S3 multipart uploads, nothing renamed). Hadoop's names are "
        "accepted too: file (the classic committer) means manifest, directory means staging. "
        "Unset: staging on S3, manifest elsewhere. A job keeps the committer it was set up "
        "with.",
    )
    conflict_mode: str | None = _option(
        None,
        "fs.s3a.committer.staging.conflict-mode",
        "What the job commit does with output already in the destination (or, with "
        "replace_partitions, in the partitions it writes): fail, append or replace. Unset: "
        "append, or what the job's commit plan recorded when a commit of the job started "
        "earlier.",
    )
    replace_partitions: bool | None = _option(
        None,
        None,
        "Apply the conflict mode per partition: to each directory the job writes files into, "
        "with everything below it (Hadoop's partitioned committer), not to the whole "
        "destination. Unset: false, or what the job's commit plan recorded.",
    )
    tune_gc: bool = _option(
        False,
        None,
        "Freeze the garbage collector's survivors and collect less often while the job "
        "commits (a process-wide change: only for a process that exists to commit; the "
        "rename worker processes always do).",
    )
    processes: int = _option(
        0,
        None,
        "Worker processes for the rename stage, one event loop and store client each; 0 means "
        "one per CPU core, used only from 10,000 files per process (a smaller job renames in "
        "the caller's event loop); 1 keeps everything in the caller's event loop.",
        minimum=0,
    )

    def __new__(cls, *args: Any, **kwargs: Any) -> CommitOptions:
        # before the generated __init__: a misspelt keyword is an UnknownOption naming
        # the closest field, not a TypeError
        for key in kwargs:
            if key not in _fields():
                raise UnknownOption(key, _closest(key))
        if len(args) > len(_fields()):
            raise InvalidInput(f"CommitOptions takes at most {len(_fields())} values")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        """Check every value against its field's type and range, then the relations
        between fields; ``InvalidInput`` names the first that does not hold."""
        if self.committer is not None and self.committer not in COMMITTERS:
            raise InvalidInput(f"committer must be one of {COMMITTERS}, not {self.committer!r}")
        if isinstance(self.conflict_mode, str):  # Hadoop reads the mode in any case
            object.__setattr__(self, "conflict_mode", self.conflict_mode.strip().lower())
            if self.conflict_mode not in CONFLICT_MODES:
                choices = ", ".join(CONFLICT_MODES)
                raise InvalidInput(
                    f"conflict_mode must be one of {choices}, not {self.conflict_mode!r}"
                )
        hints = _type_hints()
        for name, option in _fields().items():
            value = _checked(name, hints[name], getattr(self, name), option.metadata)
            object.__setattr__(self, name, value)
        from aiocommit.stores.registry import check_directory_url

        for name in ("report_dir", "diagnostics_dir"):
            url = getattr(self, name)
            if url is not None:
                try:
                    check_directory_url(url)
                except InvalidInput as error:
                    raise InvalidInput(f"{name}: {error}") from None
        defaults = CommitOptions.__dataclass_fields__
        for smaller, larger in RELATIONS:
            low, high = getattr(self, smaller), getattr(self, larger)
            if low > high and low != defaults[smaller].default:
                raise InvalidInput(f"{smaller} ({low}) must not exceed {larger} ({high})")

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
        and are skipped. ``InvalidInput`` (a ``ValueError``) for a bad value."""
        handled = tuple(handled_prefixes)
        values: dict[str, Any] = {}
        for raw_key, raw_value in settings.items():
            key = str(raw_key).strip()
            name = cls.option_for(key)
            if name is not None:
                try:
                    values[name] = _parse(_fields()[name], raw_value)
                except ValueError as error:
                    raise InvalidInput(f"{key}: {error}") from error
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


def _type_name(kind: Any) -> str:
    return " or ".join(sorted(getattr(k, "__name__", str(k)) for k in kind))


def _checked(name: str, annotation: Any, value: Any, metadata: Mapping[str, Any]) -> Any:
    """``value`` if it is of the field's type (an ``int`` widened to ``float``) and in its
    range; ``InvalidInput`` otherwise. Literal types are checked as choices; a type this
    does not know (a class) by ``isinstance``."""
    origin = typing.get_origin(annotation)
    members = typing.get_args(annotation) if origin in (typing.Union, types.UnionType) else ()
    kinds = members or (annotation,)
    if value is None:
        if type(None) in kinds:
            return None
        raise InvalidInput(f"{name} must be set (not None)")
    for kind in kinds:
        if typing.get_origin(kind) is Literal:
            if value in typing.get_args(kind):
                return value
            choices = ", ".join(repr(c) for c in typing.get_args(kind))
            raise InvalidInput(f"{name} must be one of {choices}, not {value!r}")
    plain = tuple(k for k in kinds if isinstance(k, type) and k is not type(None))
    if float in plain and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    exact = isinstance(value, plain) and not (isinstance(value, bool) and bool not in plain)
    if plain and not exact:
        raise InvalidInput(
            f"{name} must be {_type_name(plain)}, not {value!r} ({type(value).__name__})"
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        minimum, above = metadata.get("minimum"), metadata.get("above")
        if isinstance(value, float) and math.isnan(value):
            raise InvalidInput(f"{name} must be a number, not NaN")
        if minimum is not None and not value >= minimum:
            raise InvalidInput(f"{name} must be >= {minimum}, not {value}")
        if above is not None and not value > above:
            bound = "positive" if above == 0 else f"> {above}"
            raise InvalidInput(f"{name} must be {bound}, not {value}")
    return value


@functools.cache
def _type_hints() -> dict[str, Any]:
    return typing.get_type_hints(CommitOptions)


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
        raise ValueError(f"not a boolean: {raw!r}")
    if "None" in kind and text == "":
        return None
    try:
        if kind.startswith("int"):
            return int(text)
        if kind.startswith("float"):
            return float(text)
    except ValueError:
        what = "an integer" if kind.startswith("int") else "a number"
        raise ValueError(f"not {what}: {raw!r}") from None
    return text
