"""A mixed Hadoop/aiocommit fleet with file names Hadoop escapes in its manifests (space,
``%``, ``#``, ``?``, ``+``, unicode, Spark-escaped ``%3A``, and ``:`` where Hadoop can
handle it): each side commits what the other's tasks wrote, into exactly those names, and a
commit that fails on a name leaves no directory behind.

The first tests use the files Hadoop wrote (``tests/data/hadoop/names``); the last two run
Hadoop's ManifestCommitter itself (``HadoopJob.java``; a JDK 17, as scripts/ensure_java.sh
installs, and the pyspark wheel's jars)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from aiocommit import CommitError, ManifestError, commit_job, commit_task, setup_job
from aiocommit.protocol.manifest import decode_manifest, encode_manifest
from aiocommit.protocol.success import decode_success
from aiocommit.stores.local import LocalStore
from tests.cli.conftest import Cli
from tests.helpers import write_task
from tests.interop.hadoop import JOB_ID, SAMPLE_NAMES, SAMPLES, java_ready, run_hadoop

pytestmark = (
    pytest.mark.spark
)  # Hadoop's classes on a JVM (java, started by tests/interop/hadoop.py)

MANIFESTS = Path("_temporary") / JOB_ID / "00" / "manifests"
MANIFEST_NAME = "task_202611210000_0001_m_000000-manifest.json"


def tree(root: Path) -> set[str]:
    """Every file and directory below ``root`` but ``_temporary``, ``_SUCCESS`` (and the
    checksum Hadoop's local filesystem writes beside it) and the destination's lease
    (which readers skip, as every ``_``-prefixed name)."""
    found = set()
    for directory, dirs, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        if relative.split(os.sep)[0] == "_temporary":
            continue
        for name in dirs + files:
            path = os.path.normpath(os.path.join(relative, name))
            if path not in ("_temporary", "_SUCCESS", "._SUCCESS.crc") and not path.startswith(
                "_aiocommit.lease"
            ):
                found.add(path)
    return found


def expected_tree(names: tuple[str, ...] | list[str]) -> set[str]:
    out: set[str] = set()
    for name in names:
        parts = name.split("/")
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return out


def place_hadoop_job(dest: Path) -> str:
    """Hadoop's sample manifest in ``dest``'s job, and the task files it names."""
    text = (SAMPLES / "task-manifest.json").read_text(encoding="utf-8")
    text = text.replace("/path/to/dest", str(dest))
    manifests = dest / MANIFESTS
    manifests.mkdir(parents=True)
    (manifests / MANIFEST_NAME).write_text(text, encoding="utf-8")
    attempt_dir = decode_manifest(text.encode()).task_attempt_dir.removeprefix("file:")
    for name in SAMPLE_NAMES:
        path = Path(attempt_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name, encoding="utf-8")
    return attempt_dir


def test_we_commit_hadoops_escaped_names(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    place_hadoop_job(dest)
    summary = anyio.run(lambda: commit_job(str(dest), JOB_ID, store=LocalStore()))
    assert summary.success
    assert tree(dest) == expected_tree(SAMPLE_NAMES)
    for name in SAMPLE_NAMES:
        assert (dest / name).read_text(encoding="utf-8") == name
    hadoop = decode_success((SAMPLES / "_SUCCESS.json").read_bytes())
    # our _SUCCESS names the files as Hadoop's does
    assert sorted(summary.filenames) == sorted(
        f.replace("/path/to/dest", str(dest)) for f in hadoop.filenames
    )


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ("part=a%20b/file%201.txt", "part=a b/file 1.txt"),  # unescaped: old aiocommit
        ("k=a%253Ab/part-0.csv", "k=a%3Ab/part-0.csv"),  # half-escaped
    ],
)
def test_a_name_that_fails_leaves_no_directories(
    tmp_path: Path, written: str, problem: str
) -> None:
    dest = tmp_path / "dest"
    place_hadoop_job(dest)
    manifest_file = dest / MANIFESTS / MANIFEST_NAME
    text = manifest_file.read_text(encoding="utf-8").replace(written, problem)
    manifest_file.write_text(text, encoding="utf-8")
    with pytest.raises((ManifestError, CommitError)) as caught:
        anyio.run(lambda: commit_job(str(dest), JOB_ID, store=LocalStore()))
    assert "not a URI as Hadoop writes it" in str(caught.value) or "is gone" in str(caught.value)
    # the other files may have been renamed (the commit can be finished or undone), but
    # no directory that is not one of the names is left behind
    assert tree(dest) <= expected_tree(SAMPLE_NAMES)


def test_hadoop_commits_names_we_wrote(tmp_path: Path) -> None:
    """aiocommit's tasks, Hadoop's commitJob: Hadoop reads our manifests' names."""
    if (why := java_ready()) is not None:
        pytest.fail(why)
    dest = tmp_path / "dest"
    # a raw ":" in a directory name too: Hadoop commits it (its local filesystem cannot
    # list or rename a file whose own name holds one: Path(parent, ".a:b.crc") fails)
    names = [*SAMPLE_NAMES, "t=12:00/a b.txt", "k=%/%41.txt"]
    store = LocalStore()

    async def tasks() -> None:
        await setup_job(str(dest), JOB_ID, store=store)
        for task, chunk in enumerate((names[:4], names[4:])):
            files = {name: name.encode() for name in chunk}
            attempt = await write_task(store, str(dest), JOB_ID, task, 0, files)
            await commit_task(attempt, store=store)

    anyio.run(tasks)
    ours = decode_manifest((dest / MANIFESTS / MANIFEST_NAME).read_bytes())
    assert any("%20" in entry.dest for entry in ours.files)
    run_hadoop("commit", dest)
    assert tree(dest) == expected_tree(names)
    for name in names:
        assert (dest / name).read_text(encoding="utf-8") == name
    success = decode_success((dest / "_SUCCESS").read_bytes())
    assert success.success and len(success.filenames) == len(names)


def test_we_commit_names_hadoop_wrote(tmp_path: Path) -> None:
    """Hadoop's tasks, aiocommit's commit: we read Hadoop's manifests' names."""
    if (why := java_ready()) is not None:
        pytest.fail(why)
    dest = tmp_path / "dest"
    run_hadoop("task", dest, "0", *SAMPLE_NAMES)
    written = (dest / MANIFESTS / MANIFEST_NAME).read_bytes()
    assert encode_manifest(decode_manifest(written))  # we can load what Hadoop saved
    summary = anyio.run(lambda: commit_job(str(dest), JOB_ID, store=LocalStore()))
    assert summary.success
    assert tree(dest) == expected_tree(SAMPLE_NAMES)
    for name in SAMPLE_NAMES:
        assert (dest / name).read_text(encoding="utf-8") == name


def test_aiocommit_commit_command_on_hadoops_job(cli: Cli, tmp_path: Path) -> None:
    """The issue's report, through the command: `aiocommit commit` of a job whose task
    Hadoop committed with such names."""
    dest = tmp_path / "dest"
    place_hadoop_job(dest)
    result = cli("commit", str(dest), "--job-id", JOB_ID, "--json")
    assert result.exit_code == 0, result.output
    assert tree(dest) == expected_tree(SAMPLE_NAMES)
    assert json.loads(result.stdout)["files"] == len(SAMPLE_NAMES)
