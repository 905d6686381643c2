"""Realistic jobs: T tasks x F files over D hive-style partition directories, sizes from a
distribution, odd characters in names on request, and a share of task attempts that fail,
are aborted, or commit twice (the last commit wins).

Everything is derived from the spec and its seed, so a job can be rebuilt (and its expected
output recomputed) anywhere. ``prepare_job`` really runs the task side: ``setup_job``,
``setup_task``, the writes, ``commit_task`` / ``abort_task``.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from aiocommit import CommitError, abort_task, commit_task, setup_job, setup_task
from aiocommit.client.task import TaskAttempt
from aiocommit.options import CommitOptions
from aiocommit.protocol.layout import TEMP_MANIFEST_SUFFIX
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.uris import manifest_path
from aiocommit.stores.base import Store, relative_to
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit_stress.targets import Target
from aiocommit_stress.verify import Expected, ExpectedFile

PARTITION_KEYS = ("date", "hour", "region", "bucket", "shard", "tenant", "kind", "level")
#: characters that trip URL-escaping and quoting bugs; never "/", NUL, or a trailing dot
ODD = (
    "São Paulo",
    "a b",
    "x%2Fy",
    "50%",
    "c#d",
    "q?r=1",
    "日本語",
    "a+b",
    "k=v",
    "it's",
    "[x]",
    "{y}",
    "~t",
    "a&b",
    "ü",
    "@h",
    ";s",
    ",c",
    "!b",
    "$d",
    "e\u0301",
)

#: task attempt kinds
OK = "ok"
FAILED_BEFORE_COMMIT = "failed_before_commit"
FAILED_IN_COMMIT = "failed_in_commit"
ABORTED = "aborted"
DUPLICATE = "duplicate"


@dataclass(frozen=True)
class SizeDist:
    """File sizes: ``fixed:N``, ``uniform:LOW:HIGH`` or ``lognormal:MEDIAN:SIGMA[:CAP]``."""

    kind: str = "lognormal"
    a: float = 1024
    b: float = 1.0
    cap: int = 64 * 1024

    @classmethod
    def parse(cls, text: str) -> SizeDist:
        parts = text.split(":")
        try:
            if parts[0] == "fixed" and len(parts) == 2:
                return cls("fixed", float(parts[1]), 0, int(parts[1]))
            if parts[0] == "uniform" and len(parts) == 3:
                return cls("uniform", float(parts[1]), float(parts[2]), int(parts[2]))
            if parts[0] == "lognormal" and len(parts) in (3, 4):
                cap = int(parts[3]) if len(parts) == 4 else 64 * 1024
                return cls("lognormal", float(parts[1]), float(parts[2]), cap)
        except ValueError:
            pass
        raise ValueError(
            f"bad size distribution {text!r}: fixed:N, uniform:LOW:HIGH or "
            "lognormal:MEDIAN:SIGMA[:CAP]"
        )

    def draw(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        return min(self.cap, int(rng.lognormvariate(math.log(self.a), self.b)))

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{int(self.a)}"
        if self.kind == "uniform":
            return f"uniform:{int(self.a)}:{int(self.b)}"
        return f"lognormal:{int(self.a)}:{self.b:g}:{self.cap}"


@dataclass(frozen=True)
class JobSpec:
    tasks: int = 10
    files_per_task: int = 10
    dirs: int = 4
    depth: int = 1
    sizes: SizeDist = field(default_factory=SizeDist)
    odd_names: bool = False
    failed: float = 0.0
    aborted: float = 0.0
    duplicates: float = 0.0
    seed: int = 0
    #: a directory (relative to the destination) that holds all of this job's output
    prefix: str = ""

    def __post_init__(self) -> None:
        if self.tasks < 1 or self.files_per_task < 0 or self.dirs < 0 or self.depth < 1:
            raise ValueError("need tasks >= 1, files >= 0, dirs >= 0, depth >= 1")
        if self.failed + self.aborted + self.duplicates > 1:
            raise ValueError("failed + aborted + duplicate fractions exceed 1")

    @property
    def files(self) -> int:
        return self.tasks * self.files_per_task

    def describe(self) -> dict[str, object]:
        return {
            "tasks": self.tasks,
            "files_per_task": self.files_per_task,
            "files": self.files,
            "dirs": self.dirs,
            "depth": self.depth,
            "sizes": str(self.sizes),
            "odd_names": self.odd_names,
            "failed": self.failed,
            "aborted": self.aborted,
            "duplicates": self.duplicates,
            "seed": self.seed,
            "prefix": self.prefix,
        }

    def partition_dirs(self) -> list[str]:
        """The D leaf directories, ``key=value`` nested ``depth`` deep."""
        if self.dirs == 0:
            return [self.prefix] if self.prefix else [""]
        radix = max(2, math.ceil(self.dirs ** (1 / self.depth) - 1e-9))
        leaves = []
        for leaf in range(self.dirs):
            digits = []
            rest = leaf
            for _ in range(self.depth):
                digits.append(rest % radix)
                rest //= radix
            parts = []
            for level, digit in enumerate(reversed(digits)):
                key = PARTITION_KEYS[level % len(PARTITION_KEYS)]
                value = f"{digit:03d}"
                if self.odd_names:
                    value += " " + ODD[(leaf + level) % len(ODD)]
                parts.append(f"{key}={value}")
            leaves.append("/".join(([self.prefix] if self.prefix else []) + parts))
        return leaves

    def kind_of(self, task: int) -> str:
        draw = random.Random(f"{self.seed}:kind:{task}").random()
        if draw < self.failed:
            return FAILED_BEFORE_COMMIT if task % 2 == 0 else FAILED_IN_COMMIT
        if draw < self.failed + self.aborted:
            return ABORTED
        if draw < self.failed + self.aborted + self.duplicates:
            return DUPLICATE
        return OK

    def task_files(self, task: int, leaves: list[str]) -> list[tuple[str, int]]:
        """(path relative to the destination, size) of the task's winning output."""
        rng = random.Random(f"{self.seed}:sizes:{task}")
        files = []
        for index in range(self.files_per_task):
            name = f"part-{task:05d}-{index:05d}"
            if self.odd_names:
                name += " " + ODD[(task * self.files_per_task + index) % len(ODD)]
            leaf = leaves[(task + index) % len(leaves)]
            files.append((f"{leaf}/{name}.dat" if leaf else f"{name}.dat", self.sizes.draw(rng)))
        return files


def losing_files(
    task: int, winning: list[tuple[str, int]], *, partial: bool
) -> list[tuple[str, int]]:
    """A losing attempt's output: the same names with other sizes (so a wrong winner is
    visible even without etags), plus one name only it writes."""
    files = [(path, size + 1 + index % 7) for index, (path, size) in enumerate(winning)]
    if partial:
        files = files[: max(1, len(files) // 2)] if files else []
    if winning:
        first = winning[0][0]
        directory = first.rsplit("/", 1)[0] + "/" if "/" in first else ""
        files.append((f"{directory}part-{task:05d}-lost-attempt.dat", 3))
    return files


@dataclass
class PreparedJob:
    job_id: str
    dest: str
    spec: JobSpec
    expected: Expected
    kinds: Counter[str]
    seconds: float
    attempts: int

    def describe(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "dest": self.dest,
            "files": len(self.expected.files),
            "bytes": self.expected.total_bytes,
            "attempts": self.attempts,
            "attempt_kinds": dict(sorted(self.kinds.items())),
            "prepare_seconds": round(self.seconds, 3),
        }


class Writer:
    """Writes task output: straight to disk on one thread hop per batch for the local
    store (100k files in seconds); with ``direct`` where the target can seed its
    emulator's state (ADLS), one request per attempt; else through ``write_bytes``,
    concurrently."""

    def __init__(self, target: Target, concurrency: int = 16, *, direct: bool = False) -> None:
        self.target = target
        self.concurrency = concurrency
        self.direct = direct
        self._zeros = b""

    def _payload(self, size: int) -> bytes:
        if size > len(self._zeros):
            self._zeros = bytes(max(size, 2 * len(self._zeros), 1 << 16))
        return self._zeros[:size]

    async def write(self, attempt: TaskAttempt, files: list[tuple[str, int]]) -> dict[str, str]:
        """Write files (relative to the destination) into the attempt; returns the etags
        the store reported, by relative path (none for the local fast path)."""
        paths = [(attempt.path(relative), relative, size) for relative, size in files]
        if self.target.is_local:
            await anyio.to_thread.run_sync(self._write_local, paths)
            return {}
        if self.direct and self.target.seed_files is not None:
            await self.target.seed_files([(path, size) for path, _, size in paths])
            return {}
        etags: dict[str, str] = {}
        limiter = anyio.CapacityLimiter(self.concurrency)
        store = self.target.store

        async def one(path: str, relative: str, size: int) -> None:
            async with limiter:
                status = await store.write_bytes(path, self._payload(size))
            if status.etag is not None:
                etags[relative] = status.etag

        async with anyio.create_task_group() as group:
            for path, relative, size in paths:
                group.start_soon(one, path, relative, size)
        return etags

    def _write_local(self, paths: list[tuple[str, str, int]]) -> None:
        made: set[str] = set()
        for path, _, size in paths:
            parent = os.path.dirname(path)
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            with open(path, "wb") as handle:
                handle.write(self._payload(size))


def _manifest_etags(store: Store, dest: str, manifest: TaskManifest) -> dict[str, str]:
    etags = {}
    for entry in manifest.files:
        if entry.etag is not None:
            etags[relative_to(store.unqualify(manifest_path(entry.dest)), dest)] = entry.etag
    return etags


def _fail_manifest_rename(operation: str, path: str) -> bool:
    return operation == "rename" and path.endswith(TEMP_MANIFEST_SUFFIX)


async def prepare_job(
    target: Target,
    dest: str,
    spec: JobSpec,
    *,
    concurrency: int = 16,
    on_task: Callable[[int], None] | None = None,
    job_id: str | None = None,
    direct: bool = False,
) -> PreparedJob:
    """Set up a job at ``dest`` and run every task's attempts; returns what must land.
    ``direct``: task output is seeded into the target's emulator where it can be (see
    ``Writer``); the task commits still run through the store."""
    store = target.store
    started = time.perf_counter()
    options = CommitOptions(concurrency=64, committer="manifest")
    job_id = await setup_job(dest, job_id, store=store, options=options)
    leaves = spec.partition_dirs()
    writer = Writer(target, direct=direct)
    expected: dict[str, ExpectedFile] = {}
    losers: set[str] = set()
    kinds: Counter[str] = Counter()
    attempts = 0
    keeps_etags = store.capabilities.etags_preserved_in_rename

    async def attempt(task: int, number: int, files: list[tuple[str, int]]) -> TaskAttempt:
        nonlocal attempts
        attempts += 1
        made = await setup_task(dest, job_id, task, number, store=store, options=options)
        await writer.write(made, files)
        return made

    async def commit(made: TaskAttempt, files: list[tuple[str, int]]) -> None:
        manifest = await commit_task(made, store=store, options=options)
        if not isinstance(manifest, TaskManifest):
            raise AssertionError("synthetic jobs need the manifest committer")
        etags = _manifest_etags(store, dest, manifest) if keeps_etags else {}
        for relative, size in files:
            expected[relative] = ExpectedFile(size, etags.get(relative))

    async def run_task(task: int) -> None:
        kind = spec.kind_of(task)
        kinds[kind] += 1
        winning = spec.task_files(task, leaves)
        if kind == OK:
            await commit(await attempt(task, 0, winning), winning)
        elif kind in (FAILED_BEFORE_COMMIT, FAILED_IN_COMMIT, ABORTED):
            losing = losing_files(task, winning, partial=kind == FAILED_BEFORE_COMMIT)
            losers.update(relative for relative, _ in losing)
            first = await attempt(task, 0, losing)
            if kind == FAILED_IN_COMMIT:
                failing = FaultyStore(store, Faults(fail_paths=_fail_manifest_rename))
                try:
                    await commit_task(first, store=failing, options=options)
                except CommitError:
                    pass
                else:
                    raise AssertionError("the injected manifest-rename failure did not fire")
            elif kind == ABORTED:
                await abort_task(first, store=store, options=options)
            await commit(await attempt(task, 1, winning), winning)
        else:  # DUPLICATE: both attempts commit; the later commit wins
            losing = losing_files(task, winning, partial=False)
            losers.update(relative for relative, _ in losing)
            loser_number = random.Random(f"{spec.seed}:dup:{task}").randrange(2)
            loser = await attempt(task, loser_number, losing)
            winner = await attempt(task, 1 - loser_number, winning)
            await commit_task(loser, store=store, options=options)
            await commit(winner, winning)
        if on_task is not None:
            on_task(task)

    await _pool(range(spec.tasks), run_task, concurrency)
    losers.difference_update(expected)
    return PreparedJob(
        job_id=job_id,
        dest=dest,
        spec=spec,
        expected=Expected(job_id=job_id, dest=dest, files=expected, losers=losers),
        kinds=kinds,
        seconds=time.perf_counter() - started,
        attempts=attempts,
    )


async def _pool(items: range, worker: Callable[[int], Awaitable[None]], concurrency: int) -> None:
    iterator: Iterator[int] = iter(items)

    async def drain() -> None:
        for item in iterator:
            await worker(item)

    async with anyio.create_task_group() as group:
        for _ in range(max(1, min(concurrency, len(items)))):
            group.start_soon(drain)
