"""Run Hadoop's own ManifestCommitter (``HadoopJob.java``, Hadoop 3.5.0 from the pyspark
wheel) on a local directory, through Java's source launcher (needs a JDK 17+).

``python -m tests.interop.hadoop samples`` rewrites ``tests/data/hadoop/names/``: a task
manifest and a ``_SUCCESS`` that Hadoop wrote for files whose names Hadoop escapes, with the
scratch directory's path replaced by ``/path/to/dest`` (the only edit).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from aiocommit_testing.jvm import SHORT_LIVED_JVM_OPTIONS

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "HadoopJob.java"
SAMPLES = HERE.parent / "data" / "hadoop" / "names"
JOB_ID = "job_202611210000_0001"
#: the file names of the samples, relative to the destination: Hadoop escapes each of them
#: (space, ``%``, ``#``, ``?``, non-ASCII space) or keeps it (``+``, unicode); a colon is a
#: Spark-escaped ``%3A`` because Hadoop cannot list a name that holds a raw ``:``
SAMPLE_NAMES = (
    "part=a b/file 1.txt",
    "k=a%3Ab/part-0.csv",
    "ü/é#?+ x.txt",
    "p=%25/日本語 100%.txt",
    "x+y=1/a+b=c.txt",
    "nb\u00a0sp/f",
)
_JARS = (
    "hadoop-client-api-",
    "hadoop-client-runtime-",
    "slf4j-api-",
    "log4j-api-",
    "log4j-core-",
    "log4j-slf4j2-impl-",
    "jcl-over-slf4j-",
)
_LOG4J = "rootLogger.level = error\n"


def classpath() -> str:
    """Hadoop's client jars and the logging stack inside the installed pyspark wheel."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = []
    for prefix in _JARS:
        matches = sorted(p for p in jars.glob(prefix + "*.jar") if p.name[len(prefix)].isdigit())
        if len(matches) != 1:
            raise RuntimeError(f"expected one {prefix}*.jar in {jars}, found {matches}")
        found.append(str(matches[0]))
    return os.pathsep.join(found)


def java_ready() -> str | None:
    """Why Hadoop cannot run here (no JDK: the source launcher needs ``javac``'s
    compiler module), or None."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        return "a JDK 17+ (java and javac) is not installed; scripts/ensure_java.sh installs it"
    return None


def run_hadoop(mode: str, dest: Path, *args: str, job_id: str = JOB_ID) -> None:
    """``HadoopJob MODE DEST JOB_ID ARGS...``; ``RuntimeError`` with Hadoop's output on a
    failure."""
    with tempfile.TemporaryDirectory() as scratch:
        log4j = Path(scratch) / "log4j2.properties"
        log4j.write_text(_LOG4J)
        command = [
            "java",
            *SHORT_LIVED_JVM_OPTIONS.split(),  # a run lasts a few seconds
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath(),
            str(SOURCE),
            mode,
            str(dest),
            job_id,
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"Hadoop {mode} failed ({done.returncode}):\n{done.stderr[-4000:]}")


def write_samples(target: Path = SAMPLES) -> None:
    """Let Hadoop set up a job, commit one task with ``SAMPLE_NAMES`` and commit the job;
    keep its task manifest and ``_SUCCESS`` with the scratch path replaced."""
    with tempfile.TemporaryDirectory() as scratch:
        dest = Path(scratch) / "dest"
        run_hadoop("task", dest, "0", *SAMPLE_NAMES)
        manifests = dest / "_temporary" / JOB_ID / "00" / "manifests"
        manifest = (manifests / "task_202611210000_0001_m_000000-manifest.json").read_text()
        run_hadoop("commit", dest)
        success = (dest / "_SUCCESS").read_text()
        target.mkdir(parents=True, exist_ok=True)
        for name, text in (("task-manifest.json", manifest), ("_SUCCESS.json", success)):
            (target / name).write_text(text.replace(str(dest), "/path/to/dest"))


if __name__ == "__main__":
    if sys.argv[1:] != ["samples"]:
        sys.exit("usage: python -m tests.interop.hadoop samples")
    write_samples()
    print(f"wrote {SAMPLES}")
