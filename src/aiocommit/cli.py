"""The ``aiocommit`` command.

Subcommands: ``demo``, ``show``, ``jobs``, ``commit``, ``abort``, ``cleanup`` and
``stress``. Paths are store URLs (``file:///…``, ``memory://NAME/…``, ``abfss://…``,
``gs://…``) or local paths; cloud credentials come from the environment, as each store
adapter documents.

Exit codes:

* 0 - done;
* 1 - the operation failed (a commit, abort or cleanup error; a malformed file);
* 2 - usage error: bad arguments, option values or URL;
* 3 - not found: the path, the destination or the job does not exist;
* 4 - unavailable: a store adapter's packages or the stress harness are not installed;
* 130 - interrupted.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import anyio
import click
import msgspec
from rich import box
from rich import progress as rich_progress
from rich.console import Console
from rich.table import Table
from rich.text import Text

from aiocommit.engine.job import abort_job, cleanup_job, commit_job
from aiocommit.errors import AiocommitError, CommitError, ManifestError, NotFound
from aiocommit.observability import configure_logging
from aiocommit.options import DRIVER_DEFAULTS, CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatisticsSnapshot
from aiocommit.protocol.layout import (
    MANIFEST_SUFFIX,
    SUCCESS,
    TEMP_MANIFEST_SUFFIX,
    TEMPORARY,
    JobLayout,
)
from aiocommit.protocol.manifest import DirState, TaskManifest, decode_manifest
from aiocommit.protocol.success import SuccessData, decode_success
from aiocommit.stages.context import Progress
from aiocommit.stores.base import Store, join
from aiocommit.stores.registry import open_store

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130

#: URL scheme -> the pip extra that installs its adapter's packages
_EXTRAS = {"abfs": "azure", "abfss": "azure", "gs": "gcs"}
#: options that only matter to a job commit (abort and cleanup do not take them)
COMMIT_ONLY_OPTIONS = frozenset(
    {
        "delete_target_files",
        "validate_output",
        "write_success",
        "cleanup_skip",
        "report_dir",
        "diagnostics_dir",
        "use_source_etag",
        "page_hint",
        "processes",
    }
)


class Problem(Exception):
    """A failure the command reports in one line and exits with ``code``."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# -- errors and running ------------------------------------------------------------------


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fail(code: int, message: str) -> NoReturn:
    click.echo(f"aiocommit: error: {_one_line(message)}", err=True)
    raise click.exceptions.Exit(code)


def _report(error: BaseException, target: str) -> NoReturn:
    """Print ``error`` in one line naming the path, and exit with its code."""
    error = _leaf(error)
    if isinstance(error, Problem):
        _fail(error.code, error.message)
    if isinstance(error, KeyboardInterrupt):
        _fail(EXIT_INTERRUPTED, "interrupted")
    path = getattr(error, "path", None)
    where = "" if path else f"{target}: "
    if isinstance(error, NotFound):
        _fail(EXIT_NOT_FOUND, f"{where}not found: {error}")
    if isinstance(error, AiocommitError):
        _fail(EXIT_FAILED, f"{where}{error}")
    if isinstance(error, ModuleNotFoundError):
        scheme = target.partition("://")[0] if "://" in target else "file"
        extra = _EXTRAS.get(scheme)
        hint = f"; install them with: pip install 'aiocommit[{extra}]'" if extra else ""
        _fail(
            EXIT_UNAVAILABLE,
            f"{target}: the {scheme}:// store needs packages that are not installed "
            f"({error}){hint}",
        )
    if isinstance(error, ValueError):
        _fail(EXIT_USAGE, f"{where}{error}")
    if isinstance(error, OSError):
        _fail(EXIT_FAILED, f"{where}{error}")
    raise error


def _run(function: Callable[[], Awaitable[T]], target: str) -> T:
    """Run a coroutine function; any failure is reported in one line and ends the command."""
    try:
        return anyio.run(function)
    except (Exception, KeyboardInterrupt, BaseExceptionGroup) as error:
        _report(error, target)


def _open(url: str) -> tuple[Store, str]:
    try:
        store, path = open_store(url)
    except (ValueError, ModuleNotFoundError) as error:
        _report(error, url)
    return store, path.rstrip("/") or "/"


# -- formatting --------------------------------------------------------------------------


def human_bytes(size: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def human_duration(seconds: float | None) -> str:
    """``93784`` -> ``"1d 2h"``; None -> ``"-"``."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``"2h"``, ``"3d"``, ``"1h30m"``, ``"90s"`` -> seconds; ``ValueError`` otherwise."""
    compact = text.strip().lower()
    parts = _DURATION_PART.findall(compact)
    if not compact or "".join(f"{n}{u}" for n, u in parts) != compact.replace(" ", ""):
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h, 3d, 1w, 1h30m)")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as error:
        raise click.BadParameter(str(error), ctx=ctx, param=param) from None


# -- summaries ---------------------------------------------------------------------------


def _is_stage(name: str) -> bool:
    return (
        name in S.JOB_STAGES
        or name in S.TASK_STAGES
        or name.startswith(("job_stage_", "task_stage_"))
        or name == S.COMMITTER_COMMIT_JOB
    )


def _mean(stats: IOStatisticsSnapshot, name: str) -> tuple[int, float] | None:
    mean = stats.meanstatistics.get(name + ".mean") or stats.meanstatistics.get(name)
    if mean is None or mean.samples <= 0:
        return None
    return mean.samples, mean.sum / mean.samples


def _extreme(values: Mapping[str, int], key: str) -> int | None:
    value = values.get(key)
    return value if value is not None and value >= 0 else None


def statistics_rows(stats: IOStatisticsSnapshot, *, stages: bool) -> list[dict[str, Any]]:
    """One row per statistic that happened (non-zero count, failures or samples), stages
    only or everything else: count, failures, mean, min and max (``None`` when unset)."""
    names: set[str] = set()
    for key, value in stats.counters.items():
        if value:
            names.add(key.removesuffix(".failures"))
    for key, statistic in stats.meanstatistics.items():
        if statistic.samples:
            names.add(key.removesuffix(".mean").removesuffix(".failures"))
    rows = []
    for name in sorted(names):
        if _is_stage(name) != stages:
            continue
        mean = _mean(stats, name)
        rows.append(
            {
                "name": name,
                "count": stats.counters.get(name, 0),
                "failures": stats.counters.get(name + ".failures", 0),
                "mean": None if mean is None else round(mean[1], 3),
                "min": _extreme(stats.minimums, name + ".min"),
                "max": _extreme(stats.maximums, name + ".max"),
                "total": None if mean is None else round(mean[0] * mean[1], 3),
            }
        )
    return rows


def success_summary(path: str, success: SuccessData) -> dict[str, Any]:
    """The facts of a ``_SUCCESS`` (or ``summary-JOB.json``) file, as plain data."""
    stats = success.iostatistics
    counters = stats.counters
    tasks = counters.get(S.COMMITTER_TASKS_COMPLETED) or counters.get(S.TASK_STAGE_COMMIT, 0)
    state = success.state if isinstance(success.state, str) else None
    stage = success.stage if isinstance(success.stage, str) else None
    return {
        "kind": "success",
        "path": path,
        "job_id": success.job_id,
        "job_id_source": success.job_id_source,
        "success": success.success,
        "state": state or ("SUCCESS" if success.success else "FAILED"),
        "failed_stage": stage,
        "date": success.date,
        "hostname": success.hostname,
        "committer": success.committer,
        "tasks": tasks,
        "files": counters.get(S.COMMITTER_FILES_COMMITTED, 0),
        "bytes": counters.get(S.COMMITTER_BYTES_COMMITTED, 0),
        "directories_created": counters.get(S.COMMITTER_DIRECTORIES_CREATED),
        "task_directories": counters.get(S.COMMITTER_TASK_DIRECTORY_COUNT, 0),
        "filenames": list(success.filenames),
        "stages": statistics_rows(stats, stages=True),
        "statistics": statistics_rows(stats, stages=False),
        "gauges": {k: v for k, v in sorted(stats.gauges.items()) if v},
        "diagnostics": dict(success.diagnostics),
    }


def manifest_summary(path: str, manifest: TaskManifest) -> dict[str, Any]:
    """The facts of a task manifest, as plain data."""
    stats = manifest.iostatistics
    return {
        "kind": "manifest",
        "path": path,
        "job_id": manifest.job_id,
        "job_attempt": manifest.job_attempt_number,
        "task_id": manifest.task_id,
        "task_attempt_id": manifest.task_attempt_id,
        "task_attempt_dir": manifest.task_attempt_dir,
        "files": len(manifest.files),
        "bytes": manifest.total_size,
        "directories": len(manifest.directories),
        "directories_to_create": sum(
            1 for d in manifest.directories if d.state == DirState.NOT_FOUND
        ),
        "stages": statistics_rows(stats, stages=True),
        "statistics": statistics_rows(stats, stages=False),
        "gauges": {k: v for k, v in sorted(stats.gauges.items()) if v},
        "diagnostics": dict(manifest.extra_data),
    }


def decode_document(data: bytes, path: str) -> dict[str, Any]:
    """Summarise a ``_SUCCESS``/summary file or a task manifest, whichever ``data`` is."""
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise ManifestError(f"not JSON: {error}", path=path) from error
    if isinstance(raw, dict) and "name" in raw:
        return success_summary(path, decode_success(data, path=path))
    if isinstance(raw, dict) and ("type" in raw or "files" in raw or "taskID" in raw):
        return manifest_summary(path, decode_manifest(data, path=path))
    raise ManifestError("neither a task manifest nor a _SUCCESS file", path=path)


def _console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 200  # piped or captured: do not fold tables at 80 columns
    return console


def _print_facts(console: Console, rows: Iterable[tuple[str, object]]) -> None:
    rows = list(rows)
    width = max((len(key) for key, _ in rows), default=0)
    for key, value in rows:
        line = Text(key.ljust(width + 2), style="bold")
        line.append("-" if value is None else str(value))
        console.print(line, overflow="ignore", crop=False)


def _number(value: object) -> Text:
    if value is None:
        return Text("-")
    if isinstance(value, float):
        return Text(f"{value:,.1f}")
    return Text(f"{value:,}" if isinstance(value, int) else str(value))


def _statistics_table(title: str, rows: list[dict[str, Any]], *, total: bool) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("statistic", no_wrap=True)
    for name in ("count", "failures", "mean", "min", "max", *(["total ms"] if total else [])):
        table.add_column(name, justify="right")
    for row in rows:
        cells = [row["count"], row["failures"], row["mean"], row["min"], row["max"]]
        if total:
            cells.append(row["total"])
        table.add_row(Text(row["name"]), *(_number(cell) for cell in cells))
    return table


def render_summary(console: Console, summary: Mapping[str, Any], *, filenames: int = 10) -> None:
    """Print a summary from ``success_summary``/``manifest_summary`` for people."""
    if summary["kind"] == "success":
        console.print(Text(f"_SUCCESS of job {summary['job_id']}", style="bold"))
        facts: list[tuple[str, object]] = [
            ("path", summary["path"]),
            ("state", summary["state"]),
            ("failed stage", summary["failed_stage"]),
            ("job id source", summary["job_id_source"]),
            ("committer", summary["committer"]),
            ("date", summary["date"]),
            ("host", summary["hostname"]),
            ("tasks", summary["tasks"]),
            ("files", f"{summary['files']:,}"),
            ("bytes", f"{summary['bytes']:,} ({human_bytes(summary['bytes'])})"),
            ("directories created", summary["directories_created"]),
            ("task directories", summary["task_directories"]),
        ]
        if summary["failed_stage"] is None:
            facts.pop(2)
    else:
        console.print(Text(f"task manifest of {summary['task_id']}", style="bold"))
        facts = [
            ("path", summary["path"]),
            ("job", summary["job_id"]),
            ("job attempt", summary["job_attempt"]),
            ("task attempt", summary["task_attempt_id"]),
            ("attempt dir", summary["task_attempt_dir"]),
            ("files", f"{summary['files']:,}"),
            ("bytes", f"{summary['bytes']:,} ({human_bytes(summary['bytes'])})"),
            ("directories", summary["directories"]),
            ("to create", summary["directories_to_create"]),
        ]
    _print_facts(console, facts)
    if summary["stages"]:
        console.print(_statistics_table("stages (ms)", summary["stages"], total=True))
    if summary["statistics"]:
        console.print(
            _statistics_table("IOStatistics (durations in ms)", summary["statistics"], total=False)
        )
    if summary["diagnostics"]:
        console.print(Text("diagnostics", style="bold"))
        _print_facts(console, sorted(summary["diagnostics"].items()))
    names = summary.get("filenames") or []
    if names and filenames:
        console.print(Text(f"files ({len(names)} listed in the file)", style="bold"))
        for name in names[:filenames]:
            console.print(Text(f"  {name}"))
        if len(names) > filenames:
            console.print(Text(f"  ... {len(names) - filenames} more (--json lists them all)"))


def _echo_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2))


# -- jobs under a destination ------------------------------------------------------------


@dataclass
class JobInfo:
    """A job directory under ``DEST/_temporary``."""

    job_id: str
    attempts: list[int] = dataclasses.field(default_factory=list)
    manifests: int = 0
    pending_manifests: int = 0
    bad_manifests: int = 0
    files: int = 0
    size: int = 0
    started: float | None = None
    commit_started: bool = False
    committed: bool = False

    @property
    def state(self) -> str:
        if self.committed:
            return "committed (temporary files left)"
        if self.commit_started:
            return "commit started, unfinished"
        return "pending"

    def age(self, now: float) -> float | None:
        return None if self.started is None else max(0.0, now - self.started)

    def as_json(self, now: float) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "attempts": self.attempts,
            "manifests": self.manifests,
            "manifests_in_progress": self.pending_manifests,
            "bad_manifests": self.bad_manifests,
            "files": self.files,
            "size": self.size,
            "age_seconds": self.age(now),
            "state": self.state,
        }


_OUR_JOB_ID = re.compile(r"^job_(\d{14})[0-9a-f]{12}_\d+$")
_HADOOP_JOB_ID = re.compile(r"^job_(\d+)_\d+$")


def job_started(job_id: str) -> float | None:
    """When a job started, from the timestamp in its ID (ours, Spark's ``yyyyMMddHHmmss``,
    ``yyyyMMddHHmm`` or MapReduce's epoch milliseconds); None when the ID has none."""
    found = _OUR_JOB_ID.match(job_id) or _HADOOP_JOB_ID.match(job_id)
    if found is None:
        return None
    digits = found.group(1)
    formats = {14: "%Y%m%d%H%M%S", 12: "%Y%m%d%H%M"}
    try:
        if len(digits) in formats:
            moment = datetime.datetime.strptime(digits, formats[len(digits)])
            started = moment.replace(tzinfo=datetime.UTC).timestamp()
        elif len(digits) == 13:
            started = int(digits) / 1000
        else:
            return None
    except ValueError:
        return None
    plausible = 946684800 <= started <= time.time() + 86400  # 2000 .. tomorrow
    return started if plausible else None


async def _local_mtime(store: Store, path: str) -> float | None:
    from aiocommit.stores.local import LocalStore

    if not isinstance(store, LocalStore):
        return None
    try:
        return (await anyio.Path(path).stat()).st_mtime
    except OSError:
        return None


async def _children(store: Store, path: str) -> list[Any]:
    found: list[Any] = []
    try:
        async for page in store.list_dir(path):
            found.extend(page)
    except NotFound:
        return []
    return found


async def _exists(store: Store, path: str) -> bool:
    try:
        await store.stat(path)
    except NotFound:
        return False
    return True


async def read_dest_success(store: Store, dest: str) -> SuccessData | None:
    """``DEST/_SUCCESS`` if it is there and readable."""
    try:
        data = await store.read_bytes(join(dest, SUCCESS))
        return decode_success(data, path=join(dest, SUCCESS))
    except (NotFound, ManifestError):
        return None


async def _require_dir(store: Store, path: str) -> None:
    try:
        status = await store.stat(path)
    except NotFound:
        raise Problem(EXIT_NOT_FOUND, f"{store.qualify(path)}: no such directory") from None
    if not status.is_dir:
        raise Problem(EXIT_NOT_FOUND, f"{store.qualify(path)}: not a directory")


async def scan_job(
    store: Store, dest: str, job_id: str, committed_job: str | None, limiter: anyio.CapacityLimiter
) -> JobInfo:
    """What is under ``DEST/_temporary/JOB``: attempts, committed manifests and their size."""
    layout = JobLayout(dest, job_id)
    info = JobInfo(job_id, committed=committed_job == job_id)
    manifest_paths: list[str] = []
    for entry in await _children(store, layout.job_dir):
        if not (entry.is_dir and entry.name.isdigit()):
            continue
        attempt = JobLayout(dest, job_id, int(entry.name))
        info.attempts.append(attempt.attempt)
        for manifest in await _children(store, attempt.manifests_dir):
            if manifest.name.endswith(MANIFEST_SUFFIX):
                manifest_paths.append(manifest.path)
            elif manifest.name.endswith(TEMP_MANIFEST_SUFFIX):
                info.pending_manifests += 1
        info.commit_started |= await _exists(store, attempt.commit_plan_path)
    info.attempts.sort()
    info.manifests = len(manifest_paths)

    async def load(path: str) -> None:
        async with limiter:
            try:
                manifest = decode_manifest(await store.read_bytes(path), path=path)
            except (NotFound, ManifestError):
                info.bad_manifests += 1
                return
        info.files += len(manifest.files)
        info.size += manifest.total_size

    async with anyio.create_task_group() as group:
        for path in manifest_paths:
            group.start_soon(load, path)
    info.started = job_started(job_id) or await _local_mtime(store, layout.job_dir)
    return info


async def scan_jobs(store: Store, dest: str) -> list[JobInfo]:
    """Every job directory under ``DEST/_temporary``, oldest first (unknown ages last)."""
    await _require_dir(store, dest)
    success = await read_dest_success(store, dest)
    committed_job = success.job_id if success is not None and success.success else None
    limiter = anyio.CapacityLimiter(32)
    jobs: list[JobInfo] = []
    for entry in await _children(store, join(dest, TEMPORARY)):
        if entry.is_dir:
            jobs.append(await scan_job(store, dest, entry.name, committed_job, limiter))
    jobs.sort(key=lambda job: (job.started is None, job.started or 0.0, job.job_id))
    return jobs


# -- options -----------------------------------------------------------------------------


def _kind(field: dataclasses.Field[Any]) -> str:
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    return kind.split("|")[0].strip()


def format_default(value: object) -> str:
    """A default as a user writes it: ``true``, ``256``, ``0.05``, ``unset``."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def option_fields(*, commit: bool) -> list[dataclasses.Field[Any]]:
    """The ``CommitOptions`` fields a command takes as flags."""
    return [
        f for f in dataclasses.fields(CommitOptions) if commit or f.name not in COMMIT_ONLY_OPTIONS
    ]


def option_flag(name: str) -> str:
    """The command line flag of an option: ``validate_output`` -> ``--validate-output``."""
    return "--" + name.replace("_", "-")


def commit_options(*, commit: bool) -> Callable[[F], F]:
    """Decorate a command with one flag per ``CommitOptions`` field, plus ``--option``."""

    def decorate(function: F) -> F:
        function = click.option(
            "--option",
            "-o",
            "option_pairs",
            multiple=True,
            metavar="KEY=VALUE",
            help="Set any option by our name (concurrency), a Hadoop name "
            "(mapreduce.manifest.committer.io.threads) or spark.hadoop.NAME. Repeatable; "
            "the flags above win.",
        )(function)
        for field in reversed(option_fields(commit=commit)):
            hadoop = field.metadata["hadoop"]
            doc = field.metadata["doc"]
            help_text = f"{doc} [default: {format_default(field.default)}]" + (
                f" (Hadoop: {hadoop})" if hadoop else ""
            )
            flag = option_flag(field.name)
            kind = _kind(field)
            if kind == "bool":
                decorator = click.option(
                    f"{flag}/--no-{flag[2:]}", field.name, default=None, help=help_text
                )
            else:
                types: dict[str, Any] = {
                    "int": click.INT,
                    "float": click.FLOAT,
                    "str": click.STRING,
                }
                decorator = click.option(
                    flag,
                    field.name,
                    type=types.get(kind, click.STRING),
                    default=None,
                    help=help_text,
                    metavar=kind.upper() if kind != "str" else "URL",
                )
            function = decorator(function)
        return function

    return decorate


def option_name(key: str) -> str | None:
    """The ``CommitOptions`` field a key names (ours, ``aiocommit.``-prefixed, with dashes,
    Hadoop's, ``spark.hadoop.``-prefixed), or None."""
    names = CommitOptions.names()
    stripped = key.strip().removeprefix("spark.hadoop.").removeprefix("aiocommit.")
    for candidate in (stripped, stripped.replace("-", "_"), stripped.replace(".", "_")):
        if candidate in names:
            return candidate
    for name, hadoop in names.items():
        if hadoop == stripped:
            return name
    return None


def build_options(values: Mapping[str, Any], pairs: Sequence[str]) -> CommitOptions:
    """``CommitOptions`` from ``--option KEY=VALUE`` pairs and flag values (flags win);
    ``click.UsageError`` for an unknown key or a bad value."""
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--option {pair!r}: expected KEY=VALUE")
        name = option_name(key)
        if name is None:
            raise click.UsageError(
                f"--option {key.strip()!r}: unknown option; known: "
                + ", ".join(CommitOptions.names())
            )
        settings[name] = value
    fields = CommitOptions.names()
    overrides = {k: v for k, v in values.items() if k in fields and v is not None}
    try:
        return CommitOptions.from_mapping({**DRIVER_DEFAULTS, **settings}, **overrides)
    except (ValueError, TypeError) as error:
        raise click.UsageError(f"bad option value: {error}") from None


# -- progress ----------------------------------------------------------------------------


class ProgressBar:
    """Draws the engine's ``Progress`` reports with rich, on stderr."""

    def __init__(self, console: Console, *, enabled: bool = True):
        self.enabled = enabled
        self.events = 0
        self._bar = rich_progress.Progress(
            rich_progress.TextColumn("{task.description}"),
            rich_progress.BarColumn(),
            rich_progress.MofNCompleteColumn(),
            rich_progress.TextColumn("files {task.fields[bytes]}"),
            rich_progress.TimeElapsedColumn(),
            rich_progress.TimeRemainingColumn(),
            console=console,
            disable=not enabled,
        )
        self._task: rich_progress.TaskID | None = None

    def __enter__(self) -> ProgressBar:
        self._bar.start()
        self._task = self._bar.add_task("starting", total=None, bytes="")
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def __call__(self, event: Progress) -> None:
        self.events += 1
        if self._task is None:
            return
        sizes = human_bytes(event.bytes_done)
        if event.bytes_total:
            sizes += f"/{human_bytes(event.bytes_total)}"
        self._bar.update(
            self._task,
            description=event.stage,
            total=event.files_total or None,
            completed=event.files_done,
            bytes=sizes,
        )


# -- the commands ------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="aiocommit")
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default=None,
    envvar="AIOCOMMIT_LOG_LEVEL",
    help="Log level (env AIOCOMMIT_LOG_LEVEL). [default: WARNING]",
)
@click.option("-v", "--verbose", count=True, help="-v logs at INFO, -vv at DEBUG.")
def main(log_level: str | None, verbose: int) -> None:
    """aiocommit: commit distributed jobs' output to object stores, safely and fast.

    PATH and DEST are store URLs (file:///…, memory://NAME/…,
    abfss://FS@ACCOUNT.dfs.core.windows.net/…, gs://BUCKET/…) or local paths.

    Exit codes: 0 ok, 1 failed, 2 usage error, 3 not found, 4 unavailable (packages
    not installed), 130 interrupted.
    """
    level = log_level or ("DEBUG" if verbose > 1 else "INFO" if verbose else "WARNING")
    configure_logging(level)


@main.command()
@click.argument("dest", required=False)
@click.option("--tasks", default=8, show_default=True, help="Tasks in the demo job.")
@click.option("--files-per-task", default=25, show_default=True)
def demo(dest: str | None, tasks: int, files_per_task: int) -> None:
    """Run a demo job on the local filesystem and print its commit summary."""
    from aiocommit.demo import run_demo

    dest_dir, summary, seconds = anyio.run(
        lambda: run_demo(dest, tasks=tasks, files_per_task=files_per_task)
    )
    counters = summary.iostatistics.counters
    click.echo(f"committed job {summary.job_id} into {dest_dir} in {seconds:.3f} s")
    click.echo(f"  success:          {summary.success}")
    click.echo(f"  tasks committed:  {counters.get(S.COMMITTER_TASKS_COMPLETED, 0)}")
    click.echo(f"  files committed:  {counters.get(S.COMMITTER_FILES_COMMITTED, 0)}")
    click.echo(f"  bytes committed:  {counters.get(S.COMMITTER_BYTES_COMMITTED, 0)}")
    click.echo(f"  renames:          {counters.get(S.OP_RENAME, 0)}")
    click.echo(f"  _SUCCESS:         {dest_dir}/_SUCCESS ({len(summary.filenames)} file names)")
    if not summary.success:
        sys.exit(1)


@main.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--files", "filenames", default=10, show_default=True, help="Committed file names to list."
)
def show(path: str, as_json: bool, filenames: int) -> None:
    """Summarise a _SUCCESS file, a summary report or a task manifest (ours or Hadoop's).

    PATH is the file, or a directory holding a _SUCCESS.
    """
    store, store_path = _open(path)

    async def load() -> dict[str, Any]:
        try:
            target = store_path
            try:
                status = await store.stat(target)
            except NotFound:
                raise Problem(EXIT_NOT_FOUND, f"{path}: no such file or directory") from None
            if status.is_dir:
                target = join(target, SUCCESS)
                if not await _exists(store, target):
                    raise Problem(EXIT_NOT_FOUND, f"{path}: a directory without a {SUCCESS}")
            return decode_document(await store.read_bytes(target), store.qualify(target))
        finally:
            await store.aclose()

    summary = _run(load, path)
    if as_json:
        _echo_json(summary)
    else:
        render_summary(_console(), summary, filenames=filenames)


@main.command()
@click.argument("dest")
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON.")
def jobs(dest: str, as_json: bool) -> None:
    """List jobs with work under DEST/_temporary: attempts, committed task manifests,
    their files' total size, age and state."""
    store, path = _open(dest)

    async def scan() -> list[JobInfo]:
        try:
            return await scan_jobs(store, path)
        finally:
            await store.aclose()

    found = _run(scan, dest)
    now = time.time()
    if as_json:
        _echo_json([job.as_json(now) for job in found])
        return
    if not found:
        click.echo(f"no jobs under {store.qualify(join(path, TEMPORARY))}")
        return
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("job", no_wrap=True)
    for name in ("attempts", "manifests", "files", "size", "age"):
        table.add_column(name, justify="right")
    table.add_column("state")
    for job in found:
        manifests = str(job.manifests)
        if job.pending_manifests:
            manifests += f" (+{job.pending_manifests} saving)"
        if job.bad_manifests:
            manifests += f" ({job.bad_manifests} unreadable)"
        table.add_row(
            Text(job.job_id),
            Text(",".join(f"{a:02d}" for a in job.attempts) or "-"),
            Text(manifests),
            Text(f"{job.files:,}"),
            Text(human_bytes(job.size)),
            Text(human_duration(job.age(now))),
            Text(job.state),
        )
    _console().print(table)


def _job_options(function: F) -> F:
    function = click.option(
        "--attempt", default=0, show_default=True, type=click.IntRange(min=0), help="Job attempt."
    )(function)
    return click.option("--job-id", required=True, help="The job's ID (its _temporary dir).")(
        function
    )


@main.command()
@click.argument("dest")
@_job_options
@click.option(
    "--manifest",
    "manifests",
    multiple=True,
    help="Commit exactly these manifests (names in the manifests dir). Repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--no-progress", is_flag=True, help="Do not draw a progress bar.")
@commit_options(commit=True)
def commit(
    dest: str,
    job_id: str,
    attempt: int,
    manifests: tuple[str, ...],
    as_json: bool,
    no_progress: bool,
    option_pairs: tuple[str, ...],
    **values: Any,
) -> None:
    """Commit job JOB_ID in DEST from the task manifests already saved there.

    For a driver that died before or during job commit: renames every committed task's
    files into place, writes _SUCCESS and cleans up. Safe to re-run; a job already
    committed is recognised and left as it is.
    """
    options = build_options(values, option_pairs)
    store, path = _open(dest)
    layout = _layout(path, job_id, attempt)
    started = time.perf_counter()
    console = _console(stderr=True)
    already = False

    async def run() -> SuccessData:
        nonlocal already
        try:
            success = await read_dest_success(store, path)
            already = success is not None and success.success and success.job_id == job_id
            if not already and not await _exists(store, layout.manifests_dir):
                await _require_dir(store, path)
                raise Problem(
                    EXIT_NOT_FOUND,
                    f"{store.qualify(layout.job_attempt_dir)}: no such job attempt "
                    "(nothing to commit; see `aiocommit jobs DEST`)",
                )
            with ProgressBar(console, enabled=not no_progress) as bar:
                return await commit_job(
                    path,
                    job_id,
                    manifests=list(manifests) or None,
                    attempt=attempt,
                    store=store,
                    options=options,
                    progress=bar,
                )
        finally:
            await store.aclose()

    try:
        summary = anyio.run(run)
    except (Exception, KeyboardInterrupt, BaseExceptionGroup) as error:
        if isinstance(_leaf(error), CommitError):
            click.echo(
                f"aiocommit: error: {_one_line(str(_leaf(error)))}",
                err=True,
            )
            click.echo(
                "aiocommit: hint: fix the cause and run the same command again to finish the "
                "commit, or `aiocommit abort` to undo it",
                err=True,
            )
            raise click.exceptions.Exit(EXIT_FAILED) from None
        _report(error, dest)
    seconds = time.perf_counter() - started
    data = success_summary(store.qualify(layout.success_path), summary)
    if as_json:
        _echo_json({**data, "already_committed": already, "seconds": round(seconds, 3)})
    else:
        out = _console()
        verb = "was already committed" if already else f"committed in {seconds:.3f} s"
        out.print(Text(f"job {job_id} {verb}: {store.qualify(path)}"))
        render_summary(out, data)
    if not summary.success:
        raise click.exceptions.Exit(EXIT_FAILED)


def _layout(path: str, job_id: str, attempt: int = 0) -> JobLayout:
    try:
        return JobLayout(path, job_id, attempt)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--job-id") from None


@main.command()
@click.argument("dest")
@_job_options
@click.option(
    "--keep-renames",
    is_flag=True,
    help="Do not move back files that an unfinished job commit already renamed.",
)
@commit_options(commit=False)
def abort(
    dest: str,
    job_id: str,
    attempt: int,
    keep_renames: bool,
    option_pairs: tuple[str, ...],
    **values: Any,
) -> None:
    """Abort job JOB_ID in DEST: undo an unfinished commit's renames, then delete the job's
    temporary files. A committed job is only cleaned up."""
    options = build_options(values, option_pairs)
    store, path = _open(dest)
    layout = _layout(path, job_id, attempt)

    async def run() -> bool:
        try:
            await _require_dir(store, path)
            if not await _exists(store, layout.job_dir):
                raise Problem(
                    EXIT_NOT_FOUND,
                    f"{store.qualify(layout.job_dir)}: no such job (nothing to abort)",
                )
            success = await read_dest_success(store, path)
            committed = success is not None and success.success and success.job_id == job_id
            await abort_job(
                path,
                job_id,
                attempt=attempt,
                store=store,
                options=options,
                undo_renames=not keep_renames,
            )
            return committed
        finally:
            await store.aclose()

    committed = _run(run, dest)
    what = "was committed; cleaned up" if committed else "aborted"
    click.echo(f"job {job_id} {what}: {store.qualify(layout.job_dir)} removed")


@main.command()
@click.argument("dest")
@click.option("--job-id", help="Clean up only this job.")
@click.option(
    "--older-than",
    metavar="DURATION",
    callback=_duration,
    help="Only jobs older than this (e.g. 2h, 3d, 1h30m); the age comes from the job ID's "
    "timestamp, or on a local store the job directory's modification time.",
)
@click.option("--all", "all_jobs", is_flag=True, help="Every job under DEST/_temporary.")
@click.option("--dry-run", is_flag=True, help="Print what would be removed; remove nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Also remove jobs whose commit started and did not finish (their output is then "
    "partly visible and can no longer be finished or undone).",
)
@commit_options(commit=False)
def cleanup(
    dest: str,
    job_id: str | None,
    older_than: float | None,
    all_jobs: bool,
    dry_run: bool,
    force: bool,
    option_pairs: tuple[str, ...],
    **values: Any,
) -> None:
    """Delete leftover job directories under DEST/_temporary; committed output is never
    touched. Give --job-id, --older-than or --all."""
    if job_id is None and older_than is None and not all_jobs:
        raise click.UsageError("give --job-id, --older-than DURATION or --all")
    if job_id is not None and all_jobs:
        raise click.UsageError("--job-id and --all exclude each other")
    options = build_options(values, option_pairs)
    store, path = _open(dest)
    if job_id is not None:
        _layout(path, job_id)
    console = _console()

    async def run() -> int:
        try:
            found = await scan_jobs(store, path)
            if job_id is not None:
                found = [job for job in found if job.job_id == job_id]
                if not found:
                    raise Problem(
                        EXIT_NOT_FOUND,
                        f"{store.qualify(JobLayout(path, job_id).job_dir)}: no such job",
                    )
            now = time.time()
            refused = 0
            for job in found:
                age = job.age(now)
                where = store.qualify(JobLayout(path, job.job_id).job_dir)
                if older_than is not None and (age is None or age < older_than):
                    reason = "age unknown" if age is None else f"age {human_duration(age)}"
                    console.print(Text(f"kept {where} ({reason})"))
                    continue
                if job.commit_started and not job.committed and not force:
                    refused += 1
                    click.echo(
                        f"aiocommit: error: {where}: its commit started and did not finish; "
                        "finish it with `aiocommit commit` or undo it with `aiocommit abort` "
                        "(or pass --force)",
                        err=True,
                    )
                    continue
                if dry_run:
                    console.print(Text(f"would remove {where} (age {human_duration(age)})"))
                    continue
                await cleanup_job(path, job.job_id, store=store, options=options)
                console.print(Text(f"removed {where} (age {human_duration(age)})"))
            if not found:
                console.print(Text(f"no jobs under {store.qualify(join(path, TEMPORARY))}"))
            return refused
        finally:
            await store.aclose()

    if _run(run, dest):
        raise click.exceptions.Exit(EXIT_FAILED)


def _load_stress() -> click.Command:
    """``aiocommit.stress.cli.main``, imported only when ``stress`` runs (needs ``[stress]``)."""
    module = importlib.import_module("aiocommit.stress.cli")
    command = getattr(module, "main", None)
    if not isinstance(command, click.Command):
        raise ImportError("aiocommit.stress.cli.main is not a click command")
    return command


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def stress(args: tuple[str, ...]) -> None:
    """Run the stress harness (python -m stress); arguments are passed on, try --help."""
    try:
        stress_main = _load_stress()
    except ImportError as error:
        _fail(
            EXIT_UNAVAILABLE,
            f"the stress harness needs its extra ({error}): pip install 'aiocommit[stress]'",
        )
    stress_main.main(args=list(args), prog_name="aiocommit stress", standalone_mode=True)


if __name__ == "__main__":
    main()
