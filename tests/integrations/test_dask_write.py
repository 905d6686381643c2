"""``aiocommit.integrations.dask.write`` on a real ``distributed`` cluster: exactly once
when each partition's first attempt dies half-way (its worker process exits, or it
raises), nothing visible when a partition always fails, and overwrites that replace the
old output only at the job commit, where Dask's own ``to_parquet(overwrite=True)``
deletes it first."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import dask.dataframe as dd
import pandas as pd  # type: ignore[import-untyped]
import pyarrow.dataset as pads
import pytest
from distributed import Client, LocalCluster

from aiocommit.integrations import dask as aiocommit_dask
from aiocommit.integrations.attempts import InjectedTaskFailure
from aiocommit.stores.memory import MemoryStore
from aiocommit_testing.s3_emulator import create_bucket
from tests.helpers import walk
from tests.integrations.helpers import s3_files

pytestmark = pytest.mark.timeout(300)

ROWS = 400
PARTITIONS = 4


def frame(start: int = 0, rows: int = ROWS, keys: str = "abcd") -> dd.DataFrame:
    data = pd.DataFrame(
        {
            "id": range(start, start + rows),
            "k": [keys[i % len(keys)] for i in range(rows)],
            "v": [i * 0.5 for i in range(rows)],
        }
    )
    return dd.from_pandas(data, npartitions=PARTITIONS, sort=False)


@pytest.fixture
def process_cluster() -> Iterator[Client]:
    """A cluster per test: the killed workers' restarts of one test never overlap the
    next test's (on a loaded machine a restart can take long)."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def thread_cluster() -> Iterator[Client]:
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        yield client


@pytest.fixture
def processes(process_cluster: Client) -> Iterator[Client]:
    """Two worker processes (the test's scheduler): a task may kill its own."""
    with process_cluster.as_current():
        yield process_cluster


@pytest.fixture
def threads(thread_cluster: Client) -> Iterator[Client]:
    """Workers in this process (the test's scheduler): they share its memory store and
    see the test's functions."""
    with thread_cluster.as_current():
        yield thread_cluster


def local_rows(dest: Path) -> list[int]:
    """The ``id`` column of every committed Parquet file below ``dest``."""
    table = pads.dataset(dest, format="parquet", partitioning="hive").to_table()
    return sorted(table.column("id").to_pylist())


def visible(dest: Path) -> set[str]:
    """The files a reader sees (the job's own ``_temporary`` left out)."""
    found = set()
    for root, _, names in os.walk(dest):
        for name in names:
            relative = os.path.relpath(os.path.join(root, name), dest)
            if not relative.startswith("_temporary"):
                found.add(relative)
    return found


def test_killed_first_attempts_write_exactly_once(processes: Client, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    dest = tmp_path / "out"
    summary = aiocommit_dask.write(
        frame(),
        str(dest),
        partition_by="k",
        options={"aiocommit.test.exitOnceDir": str(marks)},
    )
    assert sorted(os.listdir(marks)) == [str(p) for p in range(PARTITIONS)]  # all killed once
    assert local_rows(dest) == list(range(ROWS))
    assert summary.success
    assert not (dest / "_temporary").exists()


def test_first_attempt_failures_write_exactly_once_in_memory(
    threads: Client, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    name = f"dask-{uuid.uuid4().hex}"
    aiocommit_dask.write(
        frame(),
        f"memory://{name}/out",
        format="csv",
        options={"aiocommit.test.failOnceDir": str(marks)},
    )
    files = anyio.run(walk, MemoryStore.named(name), "/out")
    assert len(os.listdir(marks)) == PARTITIONS
    csv = [n for n in files if n.endswith(".csv")]
    assert set(files) - set(csv) == {"_SUCCESS"}
    assert len(csv) == PARTITIONS
    ids = sorted(
        int(line.split(b",")[0])
        for n, data in files.items()
        if n.endswith(".csv")
        for line in data.splitlines()[1:]
    )
    assert ids == list(range(ROWS))


def test_a_partition_that_always_fails_leaves_old_output_untouched(
    threads: Client, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    aiocommit_dask.write(frame(0, 100), str(dest), mode="error")
    before = {name: (dest / name).read_bytes() for name in visible(dest)}
    with pytest.raises(InjectedTaskFailure):
        aiocommit_dask.write(
            frame(1000),
            str(dest),
            mode="overwrite",
            options={"aiocommit.test.failTask": "2"},
            retries=1,
        )
    assert {name: (dest / name).read_bytes() for name in visible(dest)} == before


def _slow(partition: pd.DataFrame) -> pd.DataFrame:
    time.sleep(0.3)
    return partition


class Poller:
    """A reader listing the destination while a write runs: the states it saw."""

    def __init__(self, dest: Path):
        self.dest = dest
        self.seen: list[frozenset[str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.seen.append(
                    frozenset(name for name in visible(self.dest) if name.endswith(".parquet"))
                )
            except FileNotFoundError:
                self.seen.append(frozenset())
            time.sleep(0.005)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def test_overwrite_replaces_at_commit_where_dasks_own_deletes_first(
    threads: Client, tmp_path: Path
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    frame(0, 100).to_parquet(str(theirs))
    aiocommit_dask.write(frame(0, 100), str(ours))
    old_ours = frozenset(n for n in visible(ours) if n.endswith(".parquet"))
    old_theirs = frozenset(n for n in visible(theirs) if n.endswith(".parquet"))
    new = frame(5000, 100).map_partitions(_slow, meta=frame(0, 4)._meta)

    with Poller(theirs) as dask_reader:
        new.to_parquet(str(theirs), overwrite=True)
    with Poller(ours) as our_reader:
        aiocommit_dask.write(new, str(ours), mode="overwrite")

    # Dask's own writer: the old files are gone before the new ones are there
    assert any(not state for state in dask_reader.seen)
    # aiocommit: the old output until the commit, then the new; never nothing
    assert our_reader.seen[0] == old_ours and old_theirs
    assert all(state for state in our_reader.seen)
    new_ours = frozenset(n for n in visible(ours) if n.endswith(".parquet"))
    assert not new_ours & old_ours
    first_new = next(i for i, state in enumerate(our_reader.seen) if state & new_ours)
    assert all(state == old_ours for state in our_reader.seen[:first_new])
    assert local_rows(ours) == list(range(5000, 5100))


def test_dynamic_partition_overwrite_replaces_only_the_partitions_written(
    threads: Client, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    aiocommit_dask.write(frame(0, 100, keys="ab"), str(dest), partition_by="k")
    aiocommit_dask.write(
        frame(1000, 100, keys="bc"), str(dest), partition_by="k", mode="overwrite_partitions"
    )
    table = pads.dataset(dest, format="parquet", partitioning="hive").to_table()
    by_key: dict[str, list[int]] = {}
    for row in table.to_pylist():
        by_key.setdefault(row["k"], []).append(row["id"])
    assert sorted(by_key["a"]) == list(range(0, 100, 2))  # untouched
    assert sorted(by_key["b"]) == list(range(1000, 1100, 2))  # replaced
    assert sorted(by_key["c"]) == list(range(1001, 1100, 2))  # new


def test_killed_first_attempts_write_exactly_once_on_s3(
    processes: Client, s3_endpoint: str, tmp_path: Path
) -> None:
    bucket = f"dask-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    anyio.run(create_bucket, s3_endpoint, bucket)
    marks = tmp_path / "marks"
    marks.mkdir()
    aiocommit_dask.write(
        frame(),
        f"s3a://{bucket}/out",
        partition_by="k",
        options={
            "fs.s3a.endpoint": s3_endpoint,
            "fs.s3a.path.style.access": "true",
            "aiocommit.test.exitOnceDir": str(marks),
        },
    )

    files = s3_files(s3_endpoint, bucket)
    assert len(os.listdir(marks)) == PARTITIONS
    local = tmp_path / "copy"
    for name, data in files.items():
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(data)
    assert local_rows(local) == list(range(ROWS))
