"""Polars writes to an attempt's file object: the files are byte for byte those Polars
writes to a plain file."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import polars as pl
import pytest

from aiocommit.integrations.attempts import EngineJob
from aiocommit.stores.memory import MemoryStore
from tests.helpers import walk

FRAME = pl.DataFrame(
    {"id": list(range(20_000)), "k": ["a", "b", "c", "d"] * 5000, "v": [0.5] * 20_000}
)


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_polars_writes_through_an_attempt_byte_identical(kind: str, tmp_path: Path) -> None:
    FRAME.write_parquet(tmp_path / "plain.parquet", statistics=False)
    FRAME.write_csv(tmp_path / "plain.csv")
    dest = str(tmp_path / "out") if kind == "local" else f"memory://polars-{uuid.uuid4().hex}/out"
    job = EngineJob.setup(dest, mode="error")
    with job.handle(0).open() as attempt:
        with attempt.open("x.parquet") as file:
            FRAME.write_parquet(file, statistics=False)
        with attempt.open("x.csv") as file:
            FRAME.write_csv(file)
        record = attempt.commit()
    job.commit([record])
    if kind == "local":
        parquet = Path(dest, "x.parquet").read_bytes()
        csv = Path(dest, "x.csv").read_bytes()
    else:
        files = anyio.run(walk, MemoryStore.named(dest.split("/")[2]), "/out")
        parquet, csv = files["x.parquet"], files["x.csv"]
    assert parquet == (tmp_path / "plain.parquet").read_bytes()
    assert csv == (tmp_path / "plain.csv").read_bytes()
