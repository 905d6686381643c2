"""Polars writes to an attempt's file object: the files are byte for byte those Polars
writes to a plain file."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from aiocommit.integrations.attempts import EngineJob
from tests.integrations.helpers import committed_files, destination

FRAME = pl.DataFrame(
    {"id": list(range(20_000)), "k": ["a", "b", "c", "d"] * 5000, "v": [0.5] * 20_000}
)


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_polars_writes_through_an_attempt_byte_identical(kind: str, tmp_path: Path) -> None:
    FRAME.write_parquet(tmp_path / "plain.parquet", statistics=False)
    FRAME.write_csv(tmp_path / "plain.csv")
    dest = destination(kind, tmp_path)
    job = EngineJob.setup(dest, mode="error")
    with job.handle(0).open() as attempt:
        with attempt.open("x.parquet") as file:
            FRAME.write_parquet(file, statistics=False)
        with attempt.open("x.csv") as file:
            FRAME.write_csv(file)
        record = attempt.commit()
    job.commit([record])
    files = committed_files(dest)
    assert files["x.parquet"] == (tmp_path / "plain.parquet").read_bytes()
    assert files["x.csv"] == (tmp_path / "plain.csv").read_bytes()
