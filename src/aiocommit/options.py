"""One options tree for task and job commit, and the one resolver of option keys.

``CommitOptions`` is a tree of small frozen groups (as httpx's ``Timeout`` and
``Limits``, object_store's ``RetryConfig``)::

    CommitOptions(
        retry=RetryOptions(max_attempts, budget_seconds, base_delay, max_delay),
        limits=LimitOptions(concurrency, adaptive_concurrency, min_concurrency,
                            rate_limit, delete_rate_limit, processes, tune_gc),
        conflicts=ConflictOptions(mode, per_partition, delete_target_files),
        committer=CommitterOptions(name, validate_output, use_source_etag, write_success,
                                   s3a=S3AOptions(part_size, abort_pending_uploads)),
        cleanup=CleanupOptions(skip, ignore_failures, parallel_delete),
        diagnostics=DiagnosticsOptions(report_dir, manifests_dir),
        store=StoreSettings(endpoint, region, path_style_access, ...),
    )

Every leaf also has a flat name (``concurrency``, ``retry_base_delay``, ``conflict_mode``):
the command line's flags, the keyword aliases ``CommitOptions(concurrency=8)`` and
read-only properties ``options.concurrency`` (both deprecated: use the tree).

``resolve_key`` is the one resolver of option keys, for ``from_mapping``, the command
line and the Spark data source. A key names a leaf by our flat name (``concurrency``;
also ``aiocommit.concurrency``, ``validate-output``, ``validate.output``), its tree path
(``limits.concurrency``), Hadoop's name (``mapreduce.manifest.committer.io.threads``,
``fs.s3a.committer.name``, ``fs.s3a.endpoint`` ...), each with or without
``spark.hadoop.``, in any case. An unknown key under our prefixes (``aiocommit.``,
``mapreduce.manifest.committer.``), or a bare one (no dot) close to one of our names, is
an ``UnknownOption`` naming the closest valid key; a Hadoop ManifestCommitter option that
aiocommit has no use for is a warning; credentials are refused. Other keys are ignored by
default (a whole Spark or Hadoop configuration can be passed), or refused
(``others="error"``: the command line).
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
from typing import Any, ClassVar, Literal

from aiocommit.errors import InvalidInput
from aiocommit.errors import UnknownOption as UnknownOption  # re-exported: its old home

SPARK_HADOOP_PREFIX = "spark.hadoop."
OWN_PREFIX = "aiocommit."
HADOOP_PREFIX = "mapreduce.manifest.committer."
S3A_PREFIX = "fs.s3a."
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
#: refused as options: credentials come from the environment (docs/stores/s3.md); an
#: options tree is recorded in the commit plan and must hold no secret
CREDENTIAL_KEYS = frozenset({"fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token"})

logger = logging.getLogger("aiocommit")

#: what a job commit does with output already in its destination (Hadoop S3A's
#: ``fs.s3a.committer.staging.conflict-mode`` values)
CONFLICT_MODES = ("fail", "append", "replace")

#: the committers ``CommitterOptions.name`` names (Hadoop's ``directory`` is staging,
#: its ``file`` the manifest committer)
COMMITTERS = ("manifest", "staging", "partitioned", "magic", "directory", "file")

#: the smallest part of a multipart upload but the last (S3's limit)
MIN_PART_SIZE = 5 * 1024 * 1024


def _option(
    default: Any,
    doc: str,
    *,
    flat: str | None = None,
    hadoop: str | None = None,
    aliases: tuple[str, ...] = (),
    minimum: float | None = None,
    above: float | None = None,
    size: bool = False,
    command_line: Any = None,
) -> Any:
    """A leaf of the tree: its default, documentation, flat name (default: the leaf's
    own), Hadoop's name and other accepted keys, and the range its value must be in
    (``minimum`` inclusive, ``above`` exclusive); ``size``: a byte count that may be
    written ``64M``; ``command_line``: the default of a process that exists to commit
    (the command line, the Spark driver) when it differs from the library's. Its type
    comes from the annotation and is checked too."""
    return field(
        default=default,
        metadata={
            "command_line": command_line,
            "doc": doc,
            "flat": flat,
            "hadoop": hadoop,
            "aliases": aliases,
            "minimum": minimum,
            "above": above,
            "size": size,
        },
    )


class _Group:
    """A group of the tree: frozen, every leaf checked against its type and range,
    then ``RELATIONS`` (smaller, larger): ``smaller`` may not exceed ``larger`` unless it
    is left at its default (then it yields)."""

    PATH: ClassVar[str]
    RELATIONS: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for leaf in dataclasses.fields(self):  # type: ignore[arg-type]
            if leaf.metadata.get("group"):
                continue
            name = f"{self.PATH}.{leaf.name}"
            if leaf.metadata["flat"]:  # the name a flag or flat keyword gave it
                name += f" ({leaf.metadata['flat']})"
            value = _checked(name, hints[leaf.name], getattr(self, leaf.name), leaf.metadata)
            object.__setattr__(self, leaf.name, value)
        for smaller, larger in self.RELATIONS:
            low, high = getattr(self, smaller), getattr(self, larger)
            default = type(self).__dataclass_fields__[smaller].default  # type: ignore[attr-defined]
            if low > high and low != default:
                raise InvalidInput(
                    f"{self.PATH}.{smaller} ({low}) must not exceed {self.PATH}.{larger} ({high})"
                )


@dataclass(frozen=True)
class RetryOptions(_Group):
    """How a store operation is retried (object_store's ``RetryConfig``)."""

    PATH: ClassVar[str] = "retry"
    RELATIONS: ClassVar[tuple[tuple[str, str], ...]] = (("base_delay", "max_delay"),)

    max_attempts: int = _option(
        20,
        "Attempts per store operation, the first included, before its error surfaces.",
        minimum=1,
    )
    budget_seconds: float = _option(
        300.0,
        "Longest time one store operation may spend retrying.",
        flat="retry_budget_seconds",
        minimum=0,
    )
    base_delay: float = _option(
        0.05,
        "First backoff delay in seconds; at most ``retry_max_delay``.",
        flat="retry_base_delay",
        minimum=0,
    )
    max_delay: float = _option(
        20.0, "Largest single backoff delay in seconds.", flat="retry_max_delay", minimum=0
    )


@dataclass(frozen=True)
class LimitOptions(_Group):
    """How much of the store a job uses at once, and where it runs (httpx's ``Limits``)."""

    PATH: ClassVar[str] = "limits"
    RELATIONS: ClassVar[tuple[tuple[str, str], ...]] = (("min_concurrency", "concurrency"),)

    concurrency: int = _option(
        2048,
        "Most store operations in flight for the job (the job limiter), shared by its rename "
        "processes and capped by what the store client serves at once; adaptive concurrency "
        "backs off from it when the store throttles. Left at its default with "
        "``processes=1``, a remote store (ADLS, GCS, S3) keeps 128 in flight on the "
        "caller's event loop; set it to go higher.",
        hadoop="mapreduce.manifest.committer.io.threads",
        minimum=1,
    )
    adaptive_concurrency: bool = _option(
        True,
        "Adapt to a throttling store: cut the in-flight limit by 30% when it throttles, grow "
        "it back by one per window of successes (AIMD); once it throttles half of the calls "
        "(a limit in requests/s), pace them at the rate it admits, probing upward (AIMD on "
        "the rate).",
    )
    min_concurrency: int = _option(
        4, "Floor for adaptive concurrency; at most ``concurrency``.", minimum=1
    )
    rate_limit: float | None = _option(
        None,
        "Store operations per second, shared by the jobs of one client.",
        hadoop="fs.azure.io.rate.limit",
        above=0,
    )
    delete_rate_limit: float | None = _option(
        None, "Directory deletes per second, shared by the jobs of one client.", above=0
    )
    processes: int = _option(
        1,
        "Worker processes for the rename stage, one event loop and store client each; 1 "
        "keeps everything in the caller's event loop (the library's default: an embedded "
        "commit never forks unasked); 0 means one per CPU core, used only from 10,000 files "
        "per process (a smaller job renames in the caller's event loop).",
        minimum=0,
        command_line=0,
    )
    tune_gc: bool = _option(
        False,
        "Freeze the garbage collector's survivors and collect less often while the job "
        "commits (a process-wide change: only for a process that exists to commit; the "
        "rename worker processes always do).",
    )


@dataclass(frozen=True)
class ConflictOptions(_Group):
    """What a job commit does with output already in its destination."""

    PATH: ClassVar[str] = "conflicts"

    mode: str | None = _option(
        None,
        "What the job commit does with output already in the destination (or, with "
        "replace_partitions, in the partitions it writes): fail, append or replace. Unset: "
        "append, or what the job's commit plan recorded when a commit of the job started "
        "earlier.",
        flat="conflict_mode",
        hadoop="fs.s3a.committer.staging.conflict-mode",
    )
    per_partition: bool | None = _option(
        None,
        "Apply the conflict mode per partition: to each directory the job writes files into, "
        "with everything below it (Hadoop's partitioned committer), not to the whole "
        "destination. Unset: false, or what the job's commit plan recorded.",
        flat="replace_partitions",
    )
    delete_target_files: bool = _option(
        False,
        "Delete a file already at a destination before renaming onto it.",
        hadoop="mapreduce.manifest.committer.delete.target.files",
    )
    lease_seconds: float = _option(
        30.0,
        "How long the destination's publish lease (DEST/_aiocommit.lease) stays valid "
        "without renewal: the holder renews it every third of this; a job waiting for it "
        "takes it over (settling the holder's unfinished commit first) once it expired.",
        above=0,
    )

    def __post_init__(self) -> None:
        if isinstance(self.mode, str):  # Hadoop reads the mode in any case
            object.__setattr__(self, "mode", self.mode.strip().lower())
            if self.mode not in CONFLICT_MODES:
                choices = ", ".join(CONFLICT_MODES)
                raise InvalidInput(f"conflict_mode must be one of {choices}, not {self.mode!r}")
        super().__post_init__()


@dataclass(frozen=True)
class S3AOptions(_Group):
    """The S3A committers' own settings. Unset: what the job recorded at setup, else
    the default in brackets."""

    PATH: ClassVar[str] = "committer.s3a"

    part_size: int | None = _option(
        None,
        "S3A committers: bytes per uploaded part, at least 5 MiB (64M, 1G ... accepted). "
        "Unset: what the job was set up with, else 64 MiB.",
        hadoop="fs.s3a.multipart.size",
        minimum=MIN_PART_SIZE,
        size=True,
    )
    abort_pending_uploads: bool | None = _option(
        None,
        "S3A committers: job cleanup and abort also abort the job's own uncompleted uploads "
        "(those its records name; never another job's: the destination-wide sweep is "
        "`aiocommit cleanup --uploads`). Unset: what the job was set up with, else true.",
        hadoop="fs.s3a.committer.abort.pending.uploads",
    )


@dataclass(frozen=True)
class CommitterOptions(_Group):
    """Which committer a new job uses, and how it puts output in place."""

    PATH: ClassVar[str] = "committer"

    name: str | None = _option(
        None,
        "The committer of a new job (set up by setup_job): manifest (renames), staging, "
        "partitioned or magic (S3 multipart uploads, nothing renamed). Hadoop's names are "
        "accepted too: file (the classic committer) means manifest, directory means staging. "
        "Unset: staging on S3, manifest elsewhere. A job keeps the committer it was set up "
        "with.",
        flat="committer",
        hadoop="fs.s3a.committer.name",
    )
    validate_output: bool = _option(
        False,
        "After renaming, check every destination's size, and etag where the store keeps it.",
        hadoop="mapreduce.manifest.committer.validate.output",
    )
    use_source_etag: bool = _option(
        True, "Rename with the manifest's etag as a source precondition where known."
    )
    write_success: bool = _option(
        True,
        "Write the _SUCCESS summary into the destination.",
        hadoop="mapreduce.fileoutputcommitter.marksuccessfuljobs",
    )
    s3a: S3AOptions = field(default_factory=S3AOptions, metadata={"group": True})

    def __post_init__(self) -> None:
        if isinstance(self.name, str):
            object.__setattr__(self, "name", self.name.strip().lower())
            if self.name not in COMMITTERS:
                raise InvalidInput(f"committer must be one of {COMMITTERS}, not {self.name!r}")
        if not isinstance(self.s3a, S3AOptions):
            raise InvalidInput(f"committer.s3a must be S3AOptions, not {self.s3a!r}")
        super().__post_init__()


@dataclass(frozen=True)
class CleanupOptions(_Group):
    """What the job commit leaves behind."""

    PATH: ClassVar[str] = "cleanup"

    skip: bool = _option(
        False,
        "Leave the job directory under _temporary after the commit.",
        flat="cleanup_skip",
        hadoop="mapreduce.fileoutputcommitter.cleanup.skipped",
    )
    ignore_failures: bool = _option(
        False,
        "A failing cleanup is logged and counted, not raised.",
        flat="cleanup_ignore_failures",
        hadoop="mapreduce.fileoutputcommitter.cleanup-failures.ignored",
    )
    parallel_delete: bool = _option(
        True,
        "Delete task attempt directories in parallel before the job directory.",
        flat="cleanup_parallel_delete",
        hadoop="mapreduce.manifest.committer.cleanup.parallel.delete",
    )


@dataclass(frozen=True)
class DiagnosticsOptions(_Group):
    """What the job commit reports, and where."""

    PATH: ClassVar[str] = "diagnostics"

    report_dir: str | None = _option(
        None,
        "URL of a directory that gets summary-JOB.json, even when the commit fails; checked "
        "when the options are built (a known scheme; a local path must be writable).",
        hadoop="mapreduce.manifest.committer.summary.report.directory",
    )
    manifests_dir: str | None = _option(
        None,
        "URL of a directory that gets a copy of the job's manifests under JOB/.",
        flat="diagnostics_dir",
        hadoop="mapreduce.manifest.committer.diagnostics.manifest.directory",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        # a report that cannot be written is refused here, not lost after the commit
        from aiocommit.stores.registry import check_directory_url

        for leaf in dataclasses.fields(self):
            url = getattr(self, leaf.name)
            if url is not None:
                try:
                    check_directory_url(url)
                except InvalidInput as error:
                    name = f"{self.PATH}.{leaf.name} ({leaf.metadata['flat'] or leaf.name})"
                    raise InvalidInput(f"{name}: {error}") from None


@dataclass(frozen=True)
class StoreSettings(_Group):
    """How the destination's store client connects (S3: Hadoop's ``fs.s3a.*`` names);
    what ``S3Store(options=...)`` takes (``as_s3a``). Credentials are never settings."""

    PATH: ClassVar[str] = "store"

    endpoint: str | None = _option(
        None,
        "S3: an S3-compatible endpoint URL (MinIO, moto). Unset: AWS.",
        hadoop="fs.s3a.endpoint",
    )
    region: str | None = _option(
        None,
        "S3: the signing region. Unset: AWS_REGION, else us-east-1.",
        hadoop="fs.s3a.endpoint.region",
    )
    path_style_access: bool | None = _option(
        None,
        "S3: address buckets as ENDPOINT/BUCKET, not BUCKET.ENDPOINT.",
        hadoop="fs.s3a.path.style.access",
    )
    connection_maximum: int | None = _option(
        None,
        "S3: size of the client's connection pool. Unset: 256.",
        hadoop="fs.s3a.connection.maximum",
        minimum=1,
    )
    paging_maximum: int | None = _option(
        None,
        "S3: keys per listing page (at most 1000). Unset: 1000.",
        hadoop="fs.s3a.paging.maximum",
        minimum=1,
    )
    request_timeout: float | None = _option(
        None,
        "S3: seconds per HTTP request. Unset: 60.",
        hadoop="fs.s3a.connection.request.timeout",
        above=0,
    )

    def __bool__(self) -> bool:
        return any(getattr(self, leaf.name) is not None for leaf in dataclasses.fields(self))

    def as_s3a(self) -> dict[str, str]:
        """The settings that are set, by their ``fs.s3a.*`` names, as strings (what
        ``S3Store(options=...)`` reads)."""
        found: dict[str, str] = {}
        for leaf in dataclasses.fields(self):
            value = getattr(self, leaf.name)
            if value is not None:
                found[leaf.metadata["hadoop"]] = _text(value)
        return found


#: the groups of ``CommitOptions``, by attribute name
GROUPS: dict[str, type[_Group]] = {
    "retry": RetryOptions,
    "limits": LimitOptions,
    "conflicts": ConflictOptions,
    "committer": CommitterOptions,
    "cleanup": CleanupOptions,
    "diagnostics": DiagnosticsOptions,
    "store": StoreSettings,
}


@dataclass(frozen=True)
class OptionSpec:
    """One leaf of the tree, as the resolver, the command line and the docs see it."""

    #: the flat name: ``concurrency``, ``retry_base_delay``, ``part_size``
    name: str
    #: the attribute path in the tree: ``limits.concurrency``, ``committer.s3a.part_size``
    path: str
    hadoop: str | None
    aliases: tuple[str, ...]
    doc: str
    default: Any
    annotation: Any
    minimum: float | None
    above: float | None
    size: bool
    #: the default of a process that exists to commit (the command line, the Spark
    #: driver), None when it is the library's
    command_line_default: Any = None

    @property
    def kind(self) -> str:
        """``bool``, ``int``, ``float`` or ``str``."""
        kinds = typing.get_args(self.annotation) or (self.annotation,)
        for kind in (bool, int, float, str):
            if kind in kinds:
                return kind.__name__
        return "str"


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(group: type[Any]) -> dict[str, Any]:
    """A group's type hints, resolved once."""
    if group not in _HINTS:
        _HINTS[group] = typing.get_type_hints(group)
    return _HINTS[group]


def _leaves(group: type[_Group], path: str) -> list[OptionSpec]:
    hints = _hints(group)
    found: list[OptionSpec] = []
    for leaf in dataclasses.fields(group):  # type: ignore[arg-type]
        if leaf.metadata.get("group"):
            found += _leaves(hints[leaf.name], f"{path}.{leaf.name}")
            continue
        meta = leaf.metadata
        found.append(
            OptionSpec(
                name=meta["flat"] or leaf.name,
                path=f"{path}.{leaf.name}",
                hadoop=meta["hadoop"],
                aliases=meta["aliases"],
                doc=meta["doc"],
                default=leaf.default,
                annotation=hints[leaf.name],
                minimum=meta["minimum"],
                above=meta["above"],
                size=meta["size"],
                command_line_default=meta["command_line"],
            )
        )
    return found


@functools.cache
def option_specs() -> tuple[OptionSpec, ...]:
    """Every leaf of the tree, in the tree's order."""
    return tuple(spec for name, group in GROUPS.items() for spec in _leaves(group, name))


def command_line_defaults() -> dict[str, Any]:
    """Flat name -> default, for the leaves whose default differs in a process that
    exists to commit (the command line, the Spark driver): ``{"processes": 0}``."""
    return {
        spec.name: spec.command_line_default
        for spec in option_specs()
        if spec.command_line_default is not None
    }


@functools.cache
def _by_flat_name() -> dict[str, OptionSpec]:
    return {spec.name: spec for spec in option_specs()}


@dataclass(frozen=True, init=False)
class CommitOptions:
    """How a job or task commit runs: a tree of small frozen groups (see the module
    docstring). Every leaf can also be set by its Hadoop name (``from_mapping``);
    ``docs/configuration.md`` lists them all.

    The flat keyword arguments (``CommitOptions(concurrency=8)``) and read-only flat
    attributes (``options.concurrency``) are deprecated aliases of the tree's leaves.
    """

    retry: RetryOptions = field(default_factory=RetryOptions)
    limits: LimitOptions = field(default_factory=LimitOptions)
    conflicts: ConflictOptions = field(default_factory=ConflictOptions)
    committer: CommitterOptions = field(default_factory=CommitterOptions)
    cleanup: CleanupOptions = field(default_factory=CleanupOptions)
    diagnostics: DiagnosticsOptions = field(default_factory=DiagnosticsOptions)
    store: StoreSettings = field(default_factory=StoreSettings)

    def __init__(
        self,
        retry: RetryOptions | None = None,
        limits: LimitOptions | None = None,
        conflicts: ConflictOptions | None = None,
        committer: CommitterOptions | str | None = None,
        cleanup: CleanupOptions | None = None,
        diagnostics: DiagnosticsOptions | None = None,
        store: StoreSettings | None = None,
        **flat: Any,
    ) -> None:
        """Groups given whole, then flat leaves (deprecated) over them. ``UnknownOption``
        names the closest valid name for a misspelt keyword; ``InvalidInput`` the first
        value out of its type or range."""
        if isinstance(committer, str):  # the flat ``committer=NAME``
            flat["committer"] = committer
            committer = None
        given: dict[str, Any] = {
            "retry": retry,
            "limits": limits,
            "conflicts": conflicts,
            "committer": committer,
            "cleanup": cleanup,
            "diagnostics": diagnostics,
            "store": store,
        }
        changes: dict[str, dict[str, Any]] = {name: {} for name in GROUPS}
        nested: dict[str, Any] = {}
        for key, value in flat.items():
            spec = _by_flat_name().get(key)
            if spec is None:
                raise UnknownOption(key, _closest(key))
            parts = spec.path.split(".")
            if len(parts) == 3:
                nested[parts[2]] = value
            else:
                changes[parts[0]][parts[1]] = value
        for name, kind in GROUPS.items():
            value = given[name]
            if value is None:
                value = kind()
            elif not isinstance(value, kind):
                raise InvalidInput(f"{name} must be {kind.__name__}, not {value!r}")
            if name == "committer" and nested:
                changes[name]["s3a"] = dataclasses.replace(value.s3a, **nested)  # type: ignore[attr-defined]
            if changes[name]:
                value = dataclasses.replace(value, **changes[name])  # type: ignore[type-var]
            object.__setattr__(self, name, value)

    # -- deprecated flat read-only aliases of the leaves

    @property
    def concurrency(self) -> int:
        return self.limits.concurrency

    @property
    def adaptive_concurrency(self) -> bool:
        return self.limits.adaptive_concurrency

    @property
    def min_concurrency(self) -> int:
        return self.limits.min_concurrency

    @property
    def rate_limit(self) -> float | None:
        return self.limits.rate_limit

    @property
    def delete_rate_limit(self) -> float | None:
        return self.limits.delete_rate_limit

    @property
    def processes(self) -> int:
        return self.limits.processes

    @property
    def tune_gc(self) -> bool:
        return self.limits.tune_gc

    @property
    def max_attempts(self) -> int:
        return self.retry.max_attempts

    @property
    def retry_budget_seconds(self) -> float:
        return self.retry.budget_seconds

    @property
    def retry_base_delay(self) -> float:
        return self.retry.base_delay

    @property
    def retry_max_delay(self) -> float:
        return self.retry.max_delay

    @property
    def conflict_mode(self) -> str | None:
        return self.conflicts.mode

    @property
    def replace_partitions(self) -> bool | None:
        return self.conflicts.per_partition

    @property
    def delete_target_files(self) -> bool:
        return self.conflicts.delete_target_files

    @property
    def validate_output(self) -> bool:
        return self.committer.validate_output

    @property
    def use_source_etag(self) -> bool:
        return self.committer.use_source_etag

    @property
    def write_success(self) -> bool:
        return self.committer.write_success

    @property
    def cleanup_skip(self) -> bool:
        return self.cleanup.skip

    @property
    def cleanup_ignore_failures(self) -> bool:
        return self.cleanup.ignore_failures

    @property
    def cleanup_parallel_delete(self) -> bool:
        return self.cleanup.parallel_delete

    @property
    def report_dir(self) -> str | None:
        return self.diagnostics.report_dir

    @property
    def diagnostics_dir(self) -> str | None:
        return self.diagnostics.manifests_dir

    def with_values(self, **values: Any) -> CommitOptions:
        """A copy with these leaves (by flat name) or groups changed."""
        groups = {name: getattr(self, name) for name in GROUPS}
        if isinstance(values.get("committer"), str):  # the flat name of the committer
            values["committer"] = dataclasses.replace(self.committer, name=values["committer"])
        return CommitOptions(**{**groups, **values})

    # -- the tree as data

    def value(self, spec: OptionSpec) -> Any:
        """The value of one leaf."""
        node: Any = self
        for part in spec.path.split("."):
            node = getattr(node, part)
        return node

    def as_record(self) -> dict[str, str]:
        """Every leaf that is set, by its tree path, as text (what the commit plan
        records; ``from_record`` reads it back)."""
        return {
            spec.path: _text(value)
            for spec in option_specs()
            if (value := self.value(spec)) is not None
        }

    @classmethod
    def from_record(cls, record: Mapping[str, str]) -> CommitOptions:
        """The tree ``as_record`` gave (``InvalidInput`` for a bad record)."""
        return cls.from_mapping(record, others="error")

    @classmethod
    def names(cls) -> dict[str, str | None]:
        """Every leaf's flat name -> its Hadoop name (or None)."""
        return {spec.name: spec.hadoop for spec in option_specs()}

    @classmethod
    def option_for(cls, key: str) -> str | None:
        """The flat name of the leaf a key names, or None (``resolve_key``)."""
        spec = resolve_key(key)
        return spec.name if spec is not None else None

    @classmethod
    def from_mapping(
        cls,
        settings: Mapping[str, object],
        *,
        others: Literal["ignore", "error"] = "ignore",
        handled_prefixes: Iterable[str] = (),
        defaults: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> CommitOptions:
        """Build from a mapping of option keys (see the module docstring) to values
        (strings are parsed); ``overrides`` (flat names) win; ``defaults`` (flat names)
        stand in for the library's defaults of leaves neither sets
        (``command_line_defaults()``).

        Raises ``UnknownOption`` for an unknown key under our prefixes or a bare one close
        to one of our names, or for any unknown key with ``others="error"``; keys under
        ``handled_prefixes`` (any case) belong to the caller and are skipped.
        ``InvalidInput`` for a bad value, or for credentials."""
        handled = tuple(prefix.lower() for prefix in handled_prefixes)
        values: dict[str, Any] = {}
        for raw_key, raw_value in settings.items():
            key = str(raw_key).strip()
            spec = resolve_key(key)
            if spec is not None:
                try:
                    values[spec.name] = parse_value(spec, raw_value)
                except ValueError as error:
                    raise InvalidInput(f"{key}: {error}") from error
                continue
            bare = _bare(key)
            if handled and bare.startswith(handled):
                continue
            if bare in CREDENTIAL_KEYS:
                raise InvalidInput(
                    f"credentials never go in options ({key}): set AWS_ACCESS_KEY_ID / "
                    "AWS_SECRET_ACCESS_KEY (or a profile, or instance credentials) in the "
                    "environment"
                )
            if bare in HADOOP_ONLY_OPTIONS:
                logger.warning("option %s is Hadoop's and has no effect on aiocommit", key)
                continue
            if bare.startswith(OUR_PREFIXES) or others == "error":
                raise UnknownOption(key, _closest(bare))
            if "." not in bare:  # a misspelt name of ours?
                near = difflib.get_close_matches(bare, _flat_names(), n=1, cutoff=BARE_CUTOFF)
                if near:
                    raise UnknownOption(key, near[0])
        values.update(overrides)
        for name, value in (defaults or {}).items():
            values.setdefault(name, value)
        return cls(**values)


#: how like one of our names a bare unknown key must be to be refused as its misspelling
BARE_CUTOFF = 0.8


def _flat_names() -> list[str]:
    return list(_by_flat_name())


def _bare(key: str) -> str:
    """A key lower-cased, ``spark.hadoop.`` dropped."""
    lowered = key.strip().lower()
    return lowered.removeprefix(SPARK_HADOOP_PREFIX)


@functools.cache
def _spellings() -> dict[str, OptionSpec]:
    """Every accepted key (lower-case, without ``spark.hadoop.``) -> its leaf."""
    table: dict[str, OptionSpec] = {}
    for spec in option_specs():
        ours = {spec.name, spec.path, spec.path.replace("committer.s3a.", "s3a.")}
        ours |= {spelling.replace("_", "-") for spelling in ours}
        ours |= {spec.name.replace("_", ".")}
        for spelling in ours:
            table[spelling] = spec
            table[OWN_PREFIX + spelling] = spec
        for hadoop in (spec.hadoop, *spec.aliases):
            if hadoop:
                table[hadoop.lower()] = spec
    return table


def resolve_key(key: str) -> OptionSpec | None:
    """The leaf a key names, or None: any case, with or without ``spark.hadoop.`` (see
    the module docstring)."""
    return _spellings().get(_bare(key))


def _closest(key: str) -> str | None:
    """The valid key most like ``key``: our flat names with and without ``aiocommit.``,
    and Hadoop's names."""
    key = key.strip().lower()
    names = [spec.name for spec in option_specs()]
    hadoop = [spec.hadoop for spec in option_specs() if spec.hadoop]
    candidates = [*names, *(OWN_PREFIX + n for n in names), *hadoop]
    found = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    if not found and key.startswith(OWN_PREFIX):
        found = difflib.get_close_matches(key.removeprefix(OWN_PREFIX), names, n=1)
    return found[0] if found else None


def closest_key(key: str) -> str | None:
    """The valid option key most like ``key`` (for "did you mean" hints), or None."""
    return _closest(_bare(key))


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _type_name(kind: Any) -> str:
    return " or ".join(sorted(getattr(k, "__name__", str(k)) for k in kind))


def _checked(name: str, annotation: Any, value: Any, metadata: Mapping[str, Any]) -> Any:
    """``value`` if it is of the leaf's type (an ``int`` widened to ``float``) and in its
    range; ``InvalidInput`` otherwise."""
    origin = typing.get_origin(annotation)
    members = typing.get_args(annotation) if origin in (typing.Union, types.UnionType) else ()
    kinds = members or (annotation,)
    if value is None:
        if type(None) in kinds:
            return None
        raise InvalidInput(f"{name} must be set (not None)")
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


_SIZE_SUFFIXES = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_value(spec: OptionSpec, raw: object) -> Any:
    """A leaf's value from its text (other values as given); ``ValueError`` for text
    that is not of the leaf's kind."""
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    kind = spec.kind
    if text == "" and type(None) in typing.get_args(spec.annotation):
        return None
    if kind == "bool":
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise InvalidInput(f"not a boolean: {raw!r}")
    try:
        if kind == "int":
            scale = _SIZE_SUFFIXES.get(text[-1:].lower(), 1) if spec.size else 1
            return int(text[:-1] if scale > 1 else text) * scale
        if kind == "float":
            return float(text)
    except ValueError:
        what = "an integer" if kind == "int" else "a number"
        raise InvalidInput(f"not {what}: {raw!r}") from None
    return text
