"""Apache Hadoop's ManifestCommitter on the same job shape, in the same run.

Drives the reference harness (``shared/bench/hadoop``: ``foreign_job.py`` writes an
uncommitted job directory the way another implementation would, ``run.sh commit-only``
runs Hadoop's ``commitJob`` on it through a filesystem that sleeps L ms per call). Needs
``javac`` and a pyspark with the Hadoop jars; ``available()`` says why not otherwise.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

#: where the harness is looked for: this variable, else ``shared/bench/hadoop`` in the
#: nearest ancestor of the working directory that has one
ENV_DIR = "AIOCOMMIT_HADOOP_BENCH"
JOB_ID = "job_202611210000_0001"


def harness_dir() -> Path | None:
    configured = os.environ.get(ENV_DIR)
    if configured:
        return Path(configured)
    for parent in (Path.cwd(), *Path.cwd().parents):
        candidate = parent / "shared" / "bench" / "hadoop"
        if (candidate / "run.sh").exists():
            return candidate
    return None


def available() -> str | None:
    """None when the Hadoop side can run here, else why not."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "no JDK (javac) on PATH"
    directory = harness_dir()
    if directory is None:
        return f"no Hadoop harness found (set {ENV_DIR})"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark (the Hadoop jars) is not installed"
    return None


@dataclass
class HadoopRun:
    threads: int
    job_commit_seconds: float
    job_commit_cpu_seconds: float
    ok: bool
    ops: dict[str, int]
    raw: dict[str, Any]

    @property
    def store_ops(self) -> int:
        return sum(self.ops.values())


def _run(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:3])} ... failed ({done.returncode}): {done.stderr[-2000:]}"
        )
    return done.stdout


async def commit_like_hadoop(
    *,
    tasks: int,
    files_per_task: int,
    dirs: int,
    latency_ms: float,
    threads: int,
    workdir: str | None = None,
) -> HadoopRun:
    """Write a fresh job directory and time Hadoop's ``commitJob`` on it."""
    directory = harness_dir()
    assert directory is not None
    env = dict(os.environ)
    env["PYTHON"] = sys.executable
    env.setdefault("HB_BUILD", str(Path.home() / ".cache" / "aiocommit" / "hadoop-bench" / "build"))
    scratch = tempfile.mkdtemp(prefix="aiocommit-hadoop-", dir=workdir)
    dest = os.path.join(scratch, "out")
    try:
        await anyio.to_thread.run_sync(
            functools.partial(
                _run,
                [
                    sys.executable,
                    str(directory / "foreign_job.py"),
                    "--dest",
                    dest,
                    "--tasks",
                    str(tasks),
                    "--files-per-task",
                    str(files_per_task),
                    "--dirs",
                    str(dirs),
                    "--job-id",
                    JOB_ID,
                    "--scheme",
                    "slowfile",
                ],
                env,
            )
        )
        # the prepared files reach the disk now, not while the commit is timed (as
        # the aiocommit side)
        await anyio.to_thread.run_sync(os.sync)
        out = await anyio.to_thread.run_sync(
            functools.partial(
                _run,
                [
                    "bash",
                    str(directory / "run.sh"),
                    "commit-only",
                    "--dest",
                    dest,
                    "--job-id",
                    JOB_ID,
                    "--latency-ms",
                    f"{latency_ms:g}",
                    "--threads",
                    str(threads),
                ],
                env,
            )
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    line = [raw for raw in out.splitlines() if raw.startswith("{")][-1]
    data = json.loads(line)
    verify = data.get("verify", {})
    return HadoopRun(
        threads=threads,
        job_commit_seconds=float(data["job_commit_s"]),
        job_commit_cpu_seconds=float(data.get("job_commit_cpu_s", 0.0)),
        ok=bool(data.get("committer_success", False)) and bool(verify.get("ok", True)),
        ops=dict(data.get("ops_job_commit", {})),
        raw=data,
    )
