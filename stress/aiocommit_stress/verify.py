"""Checking a committed destination against what must be there.

After every run: exactly the expected files with the right sizes (and etags where the
store keeps them through a rename) at the right places; nothing from failed, aborted or
losing attempts; nothing left under ``_temporary``; ``_SUCCESS`` present, of this job,
successful, and its counters ``committer_files_committed`` / ``committer_bytes_committed``
equal to what landed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

from aiocommit.errors import NotFound
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import SUCCESS, TEMPORARY
from aiocommit.protocol.success import SuccessData, decode_success
from aiocommit.protocol.uris import manifest_path
from aiocommit.stores.base import FileStatus, Store, join

MAX_PROBLEMS = 40


class ExpectedFile(msgspec.Struct, frozen=True, gc=False):
    """One file a job must leave. Not tracked by the garbage collector (``gc=False``: it
    holds no container), so a harness holding a job's 100,000 of them stands for a host
    whose own data does not lengthen every full collection (as aiocommit's entries)."""

    size: int
    etag: str | None = None


@dataclass
class Expected:
    """What one job must leave in its destination (paths relative to ``dest``)."""

    job_id: str
    dest: str
    files: dict[str, ExpectedFile]
    #: paths only failed, aborted or losing attempts wrote
    losers: set[str] = field(default_factory=set)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files.values())


@dataclass
class Verification:
    ok: bool = True
    files_found: int = 0
    files_expected: int = 0
    etags_checked: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def fail(self, kind: str, message: str) -> None:
        self.ok = False
        self.counts[kind] += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{kind}: {message}")

    def merge(self, other: Verification) -> None:
        self.ok = self.ok and other.ok
        self.files_found += other.files_found
        self.files_expected += other.files_expected
        self.etags_checked += other.etags_checked
        self.counts.update(other.counts)
        self.problems.extend(other.problems[: max(0, MAX_PROBLEMS - len(self.problems))])

    def describe(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files_found": self.files_found,
            "files_expected": self.files_expected,
            "etags_checked": self.etags_checked,
            "problem_counts": dict(self.counts),
            "problems": self.problems,
        }


async def walk(store: Store, root: str, *, concurrency: int = 32) -> dict[str, FileStatus]:
    """Every file below ``root``, by path relative to it; directories listed concurrently."""
    found: dict[str, FileStatus] = {}
    limiter = anyio.CapacityLimiter(concurrency)
    prefix = len(root.rstrip("/")) + 1

    async def visit(directory: str, group: anyio.abc.TaskGroup) -> None:
        async with limiter:
            try:
                async for page in store.list_dir(directory):
                    for status in page:
                        if status.is_dir:
                            group.start_soon(visit, status.path, group)
                        else:
                            found[status.path[prefix:]] = status
            except NotFound:
                if directory == root:
                    raise

    async with anyio.create_task_group() as group:
        await visit(root, group)
    return found


async def verify_output(
    store: Store,
    dest: str,
    jobs: Sequence[Expected],
    *,
    summary: SuccessData | None = None,
) -> Verification:
    """Verify ``dest`` after one job (or several sharing it) committed and cleaned up.

    With several jobs, ``_SUCCESS`` must be the summary of one of them (the last to
    commit), consistent with that job's files.
    """
    result = Verification()
    try:
        landed = await walk(store, dest)
    except NotFound:
        result.fail("missing_destination", dest)
        return result
    etags_kept = store.capabilities.etags_preserved_in_rename
    wanted: dict[str, ExpectedFile] = {}
    losers: set[str] = set()
    for job in jobs:
        wanted.update(job.files)
        losers.update(job.losers)
    result.files_expected = len(wanted)
    temporary = [p for p in landed if p == TEMPORARY or p.startswith(TEMPORARY + "/")]
    if temporary:
        result.fail("temporary_leftovers", f"{len(temporary)} files, e.g. {temporary[0]}")
    try:
        leftover = await store.stat(join(dest, TEMPORARY))
        if not temporary:
            result.fail("temporary_leftovers", f"{leftover.path} still exists")
    except NotFound:
        pass
    for relative, status in landed.items():
        if relative == SUCCESS or relative in temporary:
            continue
        want = wanted.get(relative)
        if want is None:
            kind = "from_losing_attempt" if relative in losers else "unexpected_file"
            result.fail(kind, relative)
            continue
        result.files_found += 1
        if status.size != want.size:
            result.fail("wrong_size", f"{relative}: {status.size} bytes, expected {want.size}")
        elif etags_kept and want.etag is not None and status.etag is not None:
            result.etags_checked += 1
            if status.etag != want.etag:
                result.fail("wrong_etag", f"{relative}: {status.etag}, expected {want.etag}")
    for relative in wanted.keys() - landed.keys():
        result.fail("missing_file", relative)
    await _check_success(store, dest, jobs, summary, result)
    return result


async def _check_success(
    store: Store,
    dest: str,
    jobs: Sequence[Expected],
    summary: SuccessData | None,
    result: Verification,
) -> None:
    path = join(dest, SUCCESS)
    try:
        success = decode_success(await store.read_bytes(path), path=path)
    except NotFound:
        result.fail("success_missing", path)
        return
    except Exception as error:
        result.fail("success_unreadable", f"{path}: {error}")
        return
    owners = [job for job in jobs if job.job_id == success.job_id]
    if not owners:
        result.fail("success_wrong_job", f"_SUCCESS names job {success.job_id!r}")
        return
    job = owners[0]
    if not success.success:
        result.fail("success_not_successful", f"state {success.state!r}")
    counters = success.iostatistics.counters
    files = counters.get(S.COMMITTER_FILES_COMMITTED)
    size = counters.get(S.COMMITTER_BYTES_COMMITTED)
    if files != len(job.files):
        result.fail("success_files_counter", f"{files}, expected {len(job.files)}")
    if size != job.total_bytes:
        result.fail("success_bytes_counter", f"{size}, expected {job.total_bytes}")
    want_names = min(100, len(job.files))
    if len(success.filenames) != want_names:
        result.fail("success_filenames", f"{len(success.filenames)} names, expected {want_names}")
    for uri in success.filenames:
        try:
            relative = store.unqualify(manifest_path(uri))[len(dest.rstrip("/")) + 1 :]
        except ValueError:
            relative = uri
        if relative not in job.files:
            result.fail("success_filenames", f"names {uri!r}, not a file of the job")
    if (
        summary is not None
        and len(jobs) == 1
        and (summary.job_id != success.job_id or summary.timestamp != success.timestamp)
    ):
        result.fail("success_mismatch", "commit_job returned another summary than _SUCCESS")
