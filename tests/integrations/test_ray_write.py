"""``aiocommit.integrations.ray`` on a real Ray (``ray.init(num_cpus=2)``): exactly once
when each write task's first attempt dies half-way (its worker process exits), nothing
visible when a task always fails, and overwrites that replace the old output only at the
job commit, where Ray's own ``write_parquet(mode="overwrite")`` deletes it first."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pyarrow.dataset as pads
import pytest
import ray

from aiocommit.integrations import ray as aiocommit_ray
from aiocommit_testing.s3_emulator import create_bucket
from tests.integrations.helpers import s3_files
from tests.tiers import ROOT

pytestmark = [
    pytest.mark.timeout(300),
    # Ray Data's own deprecations, raised inside Ray (its DataContext's defaults)
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
]

ROWS = 400
BLOCKS = 4


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """Ray with two CPUs; its workers import this repository's ``tests`` and ``src``."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "src"), *([before] if before else [])]
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        yield
    finally:
        ray.shutdown()
        if before is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = before


def dataset(start: int = 0, rows: int = ROWS, keys: str = "abcd") -> ray.data.Dataset:
    return ray.data.from_items(
        [{"id": i, "k": keys[i % len(keys)], "v": i * 0.5} for i in range(start, start + rows)],
        override_num_blocks=BLOCKS,
    )


def ids(dest: Path) -> list[int]:
    table = pads.dataset(dest, format="parquet", partitioning="hive").to_table()
    return sorted(table.column("id").to_pylist())


def visible(dest: Path) -> set[str]:
    found = set()
    for root, _, names in os.walk(dest):
        for name in names:
            relative = os.path.relpath(os.path.join(root, name), dest)
            if not relative.startswith("_temporary"):
                found.add(relative)
    return found


def test_killed_first_attempts_write_exactly_once(ray_cluster: None, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    dest = tmp_path / "out"
    summary = aiocommit_ray.write(
        dataset(), str(dest), partition_by="k", options={"aiocommit.test.exitOnceDir": marks}
    )
    assert len(os.listdir(marks)) == BLOCKS  # every task's first attempt was killed
    assert ids(dest) == list(range(ROWS))
    assert summary.success
    assert not (dest / "_temporary").exists()


def test_a_task_that_always_fails_leaves_old_output_untouched(
    ray_cluster: None, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    aiocommit_ray.write(dataset(0, 100), str(dest))
    before = {name: (dest / name).read_bytes() for name in visible(dest)}
    with pytest.raises(Exception, match="fails on purpose"):
        aiocommit_ray.write(
            dataset(1000), str(dest), mode="overwrite", options={"aiocommit.test.failTask": "1"}
        )
    assert {name: (dest / name).read_bytes() for name in visible(dest)} == before


def _slow(batch: dict[str, Any]) -> dict[str, Any]:
    time.sleep(0.5)
    return batch


class Poller:
    """A reader listing the destination's Parquet files while a write runs."""

    def __init__(self, dest: Path):
        self.dest = dest
        self.seen: list[frozenset[str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                names = visible(self.dest)
            except FileNotFoundError:
                names = set()
            self.seen.append(frozenset(n for n in names if n.endswith(".parquet")))
            time.sleep(0.005)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def test_overwrite_replaces_at_commit_where_rays_own_deletes_first(
    ray_cluster: None, tmp_path: Path
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    dataset(0, 100).write_parquet(str(theirs))
    aiocommit_ray.write(dataset(0, 100), str(ours))
    old = frozenset(n for n in visible(ours) if n.endswith(".parquet"))
    assert old

    with Poller(theirs) as ray_reader:
        dataset(5000, 100).map_batches(_slow).write_parquet(
            str(theirs), mode=ray.data.SaveMode.OVERWRITE
        )
    with Poller(ours) as our_reader:
        aiocommit_ray.write(dataset(5000, 100).map_batches(_slow), str(ours), mode="overwrite")

    assert any(not state for state in ray_reader.seen)  # Ray's own: emptied first
    assert all(state for state in our_reader.seen)  # aiocommit: never nothing
    new = frozenset(n for n in visible(ours) if n.endswith(".parquet"))
    first_new = next(i for i, state in enumerate(our_reader.seen) if state & new)
    assert first_new > 0 and all(state == old for state in our_reader.seen[:first_new])
    assert ids(ours) == list(range(5000, 5100))


def test_dynamic_partition_overwrite_replaces_only_the_partitions_written(
    ray_cluster: None, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    aiocommit_ray.write(dataset(0, 100, keys="ab"), str(dest), partition_by="k")
    aiocommit_ray.write(
        dataset(1000, 100, keys="bc"), str(dest), partition_by="k", mode="overwrite_partitions"
    )
    by_key: dict[str, list[int]] = {}
    table = pads.dataset(dest, format="parquet", partitioning="hive").to_table()
    for row in table.to_pylist():
        by_key.setdefault(row["k"], []).append(row["id"])
    assert sorted(by_key["a"]) == list(range(0, 100, 2))
    assert sorted(by_key["b"]) == list(range(1000, 1100, 2))
    assert sorted(by_key["c"]) == list(range(1001, 1100, 2))


def test_killed_first_attempts_write_exactly_once_on_s3(
    ray_cluster: None, s3_endpoint: str, tmp_path: Path
) -> None:
    bucket = f"ray-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    anyio.run(create_bucket, s3_endpoint, bucket)
    marks = tmp_path / "marks"
    marks.mkdir()
    aiocommit_ray.write(
        dataset(),
        f"s3a://{bucket}/out",
        partition_by="k",
        options={
            "fs.s3a.endpoint": s3_endpoint,
            "fs.s3a.path.style.access": "true",
            "aiocommit.test.exitOnceDir": str(marks),
        },
    )

    files = s3_files(s3_endpoint, bucket)
    assert len(os.listdir(marks)) == BLOCKS
    local = tmp_path / "copy"
    for name, data in files.items():
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(data)
    assert ids(local) == list(range(ROWS))
