"""The ``scale`` scenario: a job commit of millions of files whose RSS is the engine's.

``SyntheticStore`` holds no per-file state. It serves the job's task manifests from
``list_dir``/``read_bytes`` of the manifests directory, generating each one from the job's
formula when it is read, and accepts each rename by recomputing what that source must be
(its destination, etag and size) from the formula. The only thing it keeps per file is
one bit, so it can check that every file is renamed exactly once: 1.25 MB for 10 million.
Anything the protocol would not do (an unknown path, a wrong destination or etag, a second
rename of a file) is recorded as a violation and fails the call.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

from aiocommit import CommitOptions, commit_job
from aiocommit.errors import AlreadyExists, NotFound, StoreError
from aiocommit.protocol import statistics as S
from aiocommit.protocol.ids import task_attempt_id_for, task_id_for
from aiocommit.protocol.layout import LEASE, MANIFEST_SUFFIX, JobLayout
from aiocommit.protocol.manifest import DirEntry, DirState, FileEntry, TaskManifest
from aiocommit.protocol.success import SuccessData, decode_success
from aiocommit.stores.base import FileStatus, StoreCapabilities
from aiocommit_stress.metering import CpuClock, MeteredStore, RssSampler, max_rss_bytes
from aiocommit_stress.report import Reporter, mb, run_table
from aiocommit_stress.runner import options_dict

SCHEME = "synthetic://"
DEST = "/synthetic/dest"
JOB_ID = "job_202601010000_0001"
PAGE = 1000
_NAME_TASK = slice(5, 13)  # "part-TTTTTTTT-JJJJJ.dat"
_NAME_FILE = slice(14, 19)
_encoder = msgspec.json.Encoder()


class Violation(StoreError):
    """The engine did something the protocol does not allow; never retried."""


@dataclass
class SyntheticJob:
    """The formula: task t has files j < files_in(t); file (t, j) lives in partition
    (t + j) % dirs, is ``part-{t:08d}-{j:05d}.dat``, of size ``size(t, j)``."""

    files: int
    files_per_task: int
    dirs: int = 100
    job_id: str = JOB_ID

    def __post_init__(self) -> None:
        if self.files < 1 or self.files_per_task < 1 or self.dirs < 1:
            raise ValueError("files, files per task and dirs must be positive")
        if self.files_per_task > 99_999:
            raise ValueError("at most 99,999 files per task")
        self.tasks = math.ceil(self.files / self.files_per_task)
        self.layout = JobLayout(DEST, self.job_id)
        self.leaves = [
            f"date=2026-{1 + d // 28 % 12:02d}-{1 + d % 28:02d}/bucket={d:05d}"
            for d in range(self.dirs)
        ]
        self.manifests_prefix = self.layout.manifests_dir + "/"
        self.tasks_prefix = self.layout.tasks_dir + "/"

    def files_in(self, task: int) -> int:
        return min(self.files_per_task, self.files - task * self.files_per_task)

    def task_id(self, task: int) -> str:
        return task_id_for(self.job_id, task)

    def attempt_id(self, task: int) -> str:
        return task_attempt_id_for(self.task_id(task), 0)

    @staticmethod
    def size(task: int, index: int) -> int:
        return (task * 7919 + index * 104_729) % 8192 + 1

    @staticmethod
    def etag(task: int, index: int) -> str:
        return f"0x{task:x}-{index:x}"

    @staticmethod
    def name(task: int, index: int) -> str:
        return f"part-{task:08d}-{index:05d}.dat"

    def leaf(self, task: int, index: int) -> str:
        return self.leaves[(task + index) % self.dirs]

    def source(self, task: int, index: int) -> str:
        return (
            f"{self.tasks_prefix}{self.attempt_id(task)}/{self.leaf(task, index)}/"
            f"{self.name(task, index)}"
        )

    def dest(self, task: int, index: int) -> str:
        return f"{DEST}/{self.leaf(task, index)}/{self.name(task, index)}"

    def manifest_name(self, task: int) -> str:
        return self.task_id(task) + MANIFEST_SUFFIX

    def manifest(self, task: int) -> bytes:
        count = self.files_in(task)
        files = [
            FileEntry(
                SCHEME + self.source(task, j),
                SCHEME + self.dest(task, j),
                self.size(task, j),
                self.etag(task, j),
            )
            for j in range(count)
        ]
        used = sorted({(task + j) % self.dirs for j in range(count)})
        directories = [
            DirEntry(SCHEME + f"{DEST}/{self.leaves[d]}", int(DirState.NOT_FOUND), 2) for d in used
        ]
        return _encoder.encode(
            TaskManifest(
                job_id=self.job_id,
                task_id=self.task_id(task),
                task_attempt_id=self.attempt_id(task),
                task_attempt_dir=SCHEME + self.tasks_prefix + self.attempt_id(task),
                files=files,
                directories=directories,
            )
        )

    def total_bytes(self) -> int:
        total = 0
        for task in range(self.tasks):
            base = task * 7919
            total += sum((base + j * 104_729) % 8192 + 1 for j in range(self.files_in(task)))
        return total


@dataclass
class SyntheticStore:
    job: SyntheticJob
    violations: list[str] = field(default_factory=list)
    violation_count: int = 0
    renamed: int = 0
    renamed_bytes: int = 0
    manifests_read: int = 0
    attempt_dirs_deleted: int = 0
    deleted_attempt_dirs: set[str] = field(default_factory=set)
    created_dirs: set[str] = field(default_factory=set)
    job_dir_deleted: bool = False
    success: bytes | None = None
    success_tmp: bytes | None = None
    plan_size: int | None = None
    plan_tmp: bytes | None = None
    plan_copies: int = 0
    #: the destination's publish lease and its claims (path -> bytes), held while publishing
    lease_files: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._done = bytearray((self.job.files + 7) // 8)
        self._leaf_dirs = {f"{DEST}/{leaf}" for leaf in self.job.leaves}
        self._ancestors = {DEST + "/" + leaf.split("/")[0] for leaf in self.job.leaves}

    # -- helpers ---------------------------------------------------------------------------

    def _violate(self, operation: str, path: str, message: str) -> Violation:
        self.violation_count += 1
        if len(self.violations) < 20:
            self.violations.append(f"{operation} {path}: {message}")
        return Violation(message, path=path, operation=operation)

    def _task_of_manifest(self, path: str) -> int | None:
        if not path.startswith(self.job.manifests_prefix) or not path.endswith(MANIFEST_SUFFIX):
            return None
        task_id = path[len(self.job.manifests_prefix) : -len(MANIFEST_SUFFIX)]
        try:
            task = int(task_id.rsplit("_", 1)[1])
        except (IndexError, ValueError):
            return None
        if not 0 <= task < self.job.tasks or self.job.task_id(task) != task_id:
            return None
        return task

    def _is_dir(self, path: str) -> bool:
        layout = self.job.layout
        if path in (DEST, "/synthetic", "/"):
            return True
        if path in self._leaf_dirs or path in self._ancestors:
            return path in self.created_dirs or any(
                d.startswith(path + "/") for d in self.created_dirs
            )
        alive = (
            layout.temporary_dir,
            layout.job_dir,
            layout.job_attempt_dir,
            layout.manifests_dir,
            layout.tasks_dir,
        )
        return path in alive and not self.job_dir_deleted

    # -- the store contract ----------------------------------------------------------------

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities()

    def qualify(self, path: str) -> str:
        return SCHEME + path

    def unqualify(self, uri: str) -> str:
        if not uri.startswith(SCHEME):
            raise ValueError(f"{uri!r} is not a synthetic URI")
        return uri[len(SCHEME) :]

    async def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        layout = self.job.layout
        if path == layout.manifests_dir and not self.job_dir_deleted:
            for start in range(0, self.job.tasks, PAGE):
                yield [
                    FileStatus(self.job.manifests_prefix + self.job.manifest_name(t), False, 1)
                    for t in range(start, min(start + PAGE, self.job.tasks))
                ]
        elif path == layout.job_dir and not self.job_dir_deleted:
            yield [FileStatus(layout.job_attempt_dir, True)]  # the job is set up
        elif path == layout.tasks_dir and not self.job_dir_deleted:
            for start in range(0, self.job.tasks, PAGE):
                page = [
                    FileStatus(self.job.tasks_prefix + self.job.attempt_id(t), True)
                    for t in range(start, min(start + PAGE, self.job.tasks))
                ]
                yield [s for s in page if s.path not in self.deleted_attempt_dirs]
        else:
            raise NotFound("no such directory", path=path, operation="list_dir")

    def _is_lease(self, path: str) -> bool:
        return path.startswith(f"{DEST}/{LEASE}")

    async def stat(self, path: str) -> FileStatus:
        if path in self.lease_files:
            return FileStatus(path, False, len(self.lease_files[path]), "lease")
        if path == self.job.layout.success_path and self.success is not None:
            return FileStatus(path, False, len(self.success), "success")
        if self._is_dir(path):
            return FileStatus(path, True)
        raise NotFound("no such file or directory", path=path, operation="stat")

    async def mkdirs(self, path: str) -> None:
        if path in self._leaf_dirs or path in self._ancestors:
            self.created_dirs.add(path)
            return
        raise self._violate("mkdirs", path, "not a directory of the job")

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        layout = self.job.layout
        if self._is_lease(path):
            return self.lease_files.pop(path, None) is not None
        if path.startswith(self.job.tasks_prefix) and recursive:
            if path in self.deleted_attempt_dirs or self.job_dir_deleted:
                return False
            self.deleted_attempt_dirs.add(path)
            self.attempt_dirs_deleted += 1
            return True
        if path == layout.job_dir and recursive:
            existed = not self.job_dir_deleted
            self.job_dir_deleted = True
            return existed
        if path == layout.temporary_dir:
            return False
        if path == layout.success_temp_path:
            existed = self.success_tmp is not None
            self.success_tmp = None
            return existed
        if path == layout.success_path and not recursive:
            existed = self.success is not None
            self.success = None
            return existed
        raise self._violate("delete", path, "unexpected delete")

    async def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> None:
        layout = self.job.layout
        if source == layout.commit_plan_path + ".tmp":
            if dest != layout.commit_plan_path or self.plan_tmp is None:
                raise self._violate("rename", source, f"plan .tmp to {dest}")
            self.plan_size, self.plan_tmp = len(self.plan_tmp), None
            return
        if source == layout.success_temp_path:
            if dest != layout.success_path or self.success_tmp is None:
                raise self._violate("rename", source, f"_SUCCESS.tmp to {dest}")
            self.success, self.success_tmp = self.success_tmp, None
            return
        name = source[source.rfind("/") + 1 :]
        try:
            task = int(name[_NAME_TASK])
            index = int(name[_NAME_FILE])
        except ValueError:
            raise self._violate("rename", source, "not a file of the job") from None
        job = self.job
        if not (0 <= task < job.tasks and 0 <= index < job.files_in(task)):
            raise self._violate("rename", source, "no such file in the job")
        if source != job.source(task, index):
            raise self._violate("rename", source, "wrong source path")
        if dest != job.dest(task, index):
            raise self._violate("rename", source, f"wrong destination {dest}")
        if source_etag is not None and source_etag != job.etag(task, index):
            raise self._violate("rename", source, f"wrong etag {source_etag}")
        bit = task * job.files_per_task + index
        if self._done[bit >> 3] & (1 << (bit & 7)):
            if overwrite:
                raise self._violate("rename", source, "renamed twice")
            raise NotFound("rename source not found", path=source, operation="rename")
        parent = dest[: dest.rfind("/")]
        if parent not in self.created_dirs:
            raise NotFound("rename destination parent not found", path=parent, operation="rename")
        self._done[bit >> 3] |= 1 << (bit & 7)
        self.renamed += 1
        self.renamed_bytes += job.size(task, index)

    async def read_bytes(self, path: str) -> bytes:
        if self._is_lease(path):
            if path not in self.lease_files:
                raise NotFound("no lease", path=path, operation="read_bytes")
            return self.lease_files[path]
        task = self._task_of_manifest(path)
        if task is not None and not self.job_dir_deleted:
            self.manifests_read += 1
            return self.job.manifest(task)
        layout = self.job.layout
        if path == layout.success_path:
            if self.success is None:
                raise NotFound("no _SUCCESS", path=path, operation="read_bytes")
            return self.success
        if path == layout.commit_plan_path:
            if self.plan_size is None:
                raise NotFound("no commit plan", path=path, operation="read_bytes")
            raise self._violate("read_bytes", path, "commit plan read back in one run")
        raise NotFound("no such file", path=path, operation="read_bytes")

    async def write_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> FileStatus:
        layout = self.job.layout
        if path == layout.commit_plan_path:
            self.plan_size = len(data)
        elif path == layout.commit_plan_path + ".tmp":
            self.plan_tmp = bytes(data)
        elif path.startswith(layout.plan_manifests_dir + "/"):
            self.plan_copies += 1
        elif path == layout.success_temp_path:
            self.success_tmp = bytes(data)
        elif self._is_lease(path):
            if not overwrite and path in self.lease_files:
                raise AlreadyExists("lease exists", path=path, operation="write_bytes")
            self.lease_files[path] = bytes(data)
        else:
            raise self._violate("write_bytes", path, "unexpected write")
        return FileStatus(path, False, len(data), f"w{len(data)}")

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus:
        raise self._violate("upload_file", path, "unexpected upload")

    async def aclose(self) -> None:
        return None

    def all_renamed(self) -> int:
        return int.from_bytes(self._done, "little").bit_count()


def check(store: SyntheticStore, summary: SuccessData | None) -> list[str]:
    """What went wrong (empty when the commit did exactly what the protocol says)."""
    job = store.job
    problems = list(store.violations)
    if store.violation_count > len(store.violations):
        problems.append(f"... {store.violation_count} violations in all")
    if store.renamed != job.files or store.all_renamed() != job.files:
        problems.append(
            f"renamed {store.renamed:,} files ({store.all_renamed():,} distinct), "
            f"expected {job.files:,}"
        )
    total = job.total_bytes()
    if store.renamed_bytes != total:
        problems.append(f"renamed {store.renamed_bytes:,} bytes, expected {total:,}")
    if store.manifests_read != job.tasks:
        problems.append(f"read {store.manifests_read:,} manifests, expected {job.tasks:,}")
    used = {f"{DEST}/{job.leaves[d]}" for d in range(min(job.dirs, job.files))}
    if not used <= store.created_dirs:
        problems.append(f"{len(used - store.created_dirs)} partition dirs never created")
    if store.attempt_dirs_deleted != job.tasks or not store.job_dir_deleted:
        problems.append(
            f"cleanup deleted {store.attempt_dirs_deleted:,} attempt dirs of "
            f"{job.tasks:,}; job dir deleted: {store.job_dir_deleted}"
        )
    if store.success is None:
        problems.append("no _SUCCESS")
        return problems
    success = decode_success(store.success)
    counters = success.iostatistics.counters
    if not success.success or success.job_id != job.job_id:
        problems.append(f"_SUCCESS: success={success.success} job={success.job_id}")
    if counters.get(S.COMMITTER_FILES_COMMITTED) != job.files:
        problems.append(f"_SUCCESS files counter {counters.get(S.COMMITTER_FILES_COMMITTED)}")
    if counters.get(S.COMMITTER_BYTES_COMMITTED) != total:
        problems.append(f"_SUCCESS bytes counter {counters.get(S.COMMITTER_BYTES_COMMITTED)}")
    if summary is None or summary.timestamp != success.timestamp:
        problems.append("commit_job returned another summary than _SUCCESS")
    return problems


async def scale(
    files: int,
    files_per_task: int,
    dirs: int,
    options: CommitOptions,
    reporter: Reporter,
) -> dict[str, Any]:
    """Commit a synthetic job of ``files`` files in this process and report peak RSS."""
    job = SyntheticJob(files, files_per_task, dirs)
    store = SyntheticStore(job)
    metered = MeteredStore(store)
    summary: SuccessData | None = None
    error: str | None = None
    before = max_rss_bytes()
    with (
        reporter.live(),
        reporter.commit_bar(f"{files:,} files") as on_progress,
        RssSampler(0.05) as rss,
        CpuClock() as cpu,
    ):
        begin = time.perf_counter()
        try:
            summary = await commit_job(
                DEST, job.job_id, store=metered, options=options, progress=on_progress
            )
        except Exception as raised:
            error = f"{type(raised).__name__}: {raised}"
        seconds = time.perf_counter() - begin
    await anyio.lowlevel.checkpoint()
    problems = ([error] if error else []) + check(store, summary)
    ok = not problems
    stages: dict[str, int] = {}
    if summary is not None:
        for name in S.JOB_STAGES:
            mean = summary.iostatistics.meanstatistics.get(name + ".mean")
            if mean is not None and mean.samples:
                stages[name] = mean.sum
    figures = {
        "files": files,
        "tasks": job.tasks,
        "files_per_task": files_per_task,
        "dirs": dirs,
        "commit_seconds": round(seconds, 2),
        "files_per_second": round(files / seconds, 1),
        "cpu_seconds": round(cpu.total, 2),
        "cpu_us_per_file": round(cpu.total / files * 1e6, 2),
        "rss_before_commit_mb": round(rss.baseline / 2**20, 1),
        "rss_peak_mb": round(rss.peak / 2**20, 1),
        "ru_maxrss_mb": round(max_rss_bytes() / 2**20, 1),
        "ru_maxrss_before_mb": round(before / 2**20, 1),
        "rss_growth_bytes_per_file": round((rss.peak - rss.baseline) / files, 2),
        "store": metered.figures(seconds),
        "stages_ms": stages,
        "options": options_dict(options),
    }
    reporter.table(
        run_table(
            f"scale: {files:,} files (synthetic store)",
            [
                ("job commit time", f"{seconds:,.1f} s"),
                ("tasks x files", f"{job.tasks:,} x {files_per_task:,} over {dirs} dirs"),
                ("files/s", f"{files / seconds:,.0f}"),
                ("CPU", f"{cpu.total:,.1f} s ({cpu.total / files * 1e6:.1f} µs/file)"),
                ("RSS before commit", mb(rss.baseline)),
                ("peak RSS", mb(rss.peak)),
                *[(f"  {k}", f"{v / 1000:,.1f} s") for k, v in stages.items()],
                ("verification", "PASS" if ok else "FAIL"),
            ],
        )
    )
    for problem in problems:
        reporter.out.print(f"[red]  {problem}")
    reporter.figure(
        f"scale: {files:,} files committed in {seconds:,.1f} s, peak RSS {mb(rss.peak)} "
        f"(before commit {mb(rss.baseline)}); verification {'PASS' if ok else 'FAIL'}"
    )
    return {"scenario": "scale", "ok": ok, "problems": problems, "figures": figures}
