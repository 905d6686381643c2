"""Wall time of Dask's and Ray Data's own Parquet writers against the same engine writing
through aiocommit (``aiocommit.integrations.dask.write`` / ``.ray.write``).

    .venv/bin/python -m aiocommit_stress.engine_bench [--engines dask,ray] [--rows 1000000]
        [--files 100] [--rounds 3]

Writes the same rows (``id bigint, p bigint, x double, s string``; ``p = id % 10``) to the
local filesystem as ``--files`` Parquet files, flat (``--files`` input partitions, one
file each) and partitioned by ``p`` (``--files / 10`` input partitions, one file per
partition value each), alternating the engine's own writer and aiocommit round by round
(the order flips each round), in one process, after one warm-up write each (flat). The
input is materialized first (Dask ``persist``, Ray ``materialize``) on a two-worker
cluster (Dask ``LocalCluster`` of two processes, ``ray.init(num_cpus=2)``), so each
figure is the write alone. Prints each round's seconds, the median of each writer, the
ratio aiocommit/own per engine and variant (target <= 1.1) with the median of each
round's own ratio, and, last, the highest ratio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: aiocommit's wall time as a multiple of the engine's own writer's, the issue's goal
TARGET = 1.1
#: the values of the partition column
PARTITION_VALUES = 10
VARIANTS = ("flat", "partitioned")

#: writes (data, destination, partitioned) -> None
Writer = Callable[[Any, Path, bool], None]


def frame(rows: int) -> Any:
    """The rows, as a pandas DataFrame."""
    import numpy as np
    import pandas as pd  # type: ignore[import-untyped]

    ids = np.arange(rows, dtype="int64")
    return pd.DataFrame(
        {
            "id": ids,
            "p": ids % PARTITION_VALUES,
            "x": ids * 0.5,
            "s": pd.Series(ids).map(lambda i: f"row-{i:09d}").astype("string[pyarrow]"),
        }
    )


@contextmanager
def dask_engine(rows: int, files: int) -> Iterator[tuple[dict[str, Any], dict[str, Writer]]]:
    """The data of each variant on a two-process Dask cluster, and the two writers."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from aiocommit.integrations import dask as aiocommit_dask

    def own(data: Any, dest: Path, partitioned: bool) -> None:
        data.to_parquet(str(dest), write_index=False, partition_on=["p"] if partitioned else None)

    def ours(data: Any, dest: Path, partitioned: bool) -> None:
        aiocommit_dask.write(data, str(dest), partition_by=["p"] if partitioned else ())

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster),
    ):
        rows_frame = frame(rows)
        data = {
            "flat": dd.from_pandas(rows_frame, npartitions=files, sort=False).persist(),
            "partitioned": dd.from_pandas(
                rows_frame, npartitions=max(1, files // PARTITION_VALUES), sort=False
            ).persist(),
        }
        yield data, {"own": own, "aiocommit": ours}


@contextmanager
def ray_engine(rows: int, files: int) -> Iterator[tuple[dict[str, Any], dict[str, Writer]]]:
    """The data of each variant in Ray's object store, and the two writers."""
    import ray

    from aiocommit.integrations import ray as aiocommit_ray

    def own(data: Any, dest: Path, partitioned: bool) -> None:
        data.write_parquet(str(dest), partition_cols=["p"] if partitioned else None)

    def ours(data: Any, dest: Path, partitioned: bool) -> None:
        aiocommit_ray.write(data, str(dest), partition_by=["p"] if partitioned else ())

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        source = ray.data.from_pandas(frame(rows))
        data = {
            "flat": source.repartition(files).materialize(),
            "partitioned": source.repartition(max(1, files // PARTITION_VALUES)).materialize(),
        }
        yield data, {"own": own, "aiocommit": ours}
    finally:
        ray.shutdown()


ENGINES = {"dask": dask_engine, "ray": ray_engine}


def parquet_files(dest: Path) -> int:
    return sum(1 for path in dest.rglob("*.parquet"))


def run_engine(engine: str, work: Path, *, rows: int, files: int, rounds: int) -> dict[str, float]:
    """Alternate the two writers of ``engine``; the ratio aiocommit/own per variant."""
    ratios: dict[str, float] = {}
    with ENGINES[engine](rows, files) as (data, writers):
        for name, writer in writers.items():  # warm-up: the workers' imports and pools
            writer(data["flat"], work / f"warm-{name}", False)
            shutil.rmtree(work / f"warm-{name}", ignore_errors=True)
        for variant in VARIANTS:
            seconds: dict[str, list[float]] = {name: [] for name in writers}
            for round_number in range(rounds):
                order = list(writers) if round_number % 2 == 0 else list(reversed(writers))
                for name in order:
                    dest = work / f"{engine}-{variant}-{name}-{round_number}"
                    start = time.perf_counter()
                    writers[name](data[variant], dest, variant == "partitioned")
                    elapsed = time.perf_counter() - start
                    seconds[name].append(elapsed)
                    print(
                        f"{engine} round {round_number} {variant:<11} {name:<9} "
                        f"{elapsed:7.3f} s  {parquet_files(dest):4d} files",
                        flush=True,
                    )
                    shutil.rmtree(dest, ignore_errors=True)
            own = statistics.median(seconds["own"])
            ours = statistics.median(seconds["aiocommit"])
            ratios[variant] = ours / own
            # each round's two writes ran back to back: their ratio drifts less with the
            # machine's load than the two medians do
            paired = statistics.median(
                a / b for a, b in zip(seconds["aiocommit"], seconds["own"], strict=True)
            )
            print(
                f"{engine} {variant:<11} median own {own:.3f} s, aiocommit {ours:.3f} s: "
                f"ratio aiocommit/own {ours / own:.3f}, median of the rounds' ratios "
                f"{paired:.3f} (target <= {TARGET})",
                flush=True,
            )
    return ratios


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--engines",
        type=lambda text: [e.strip() for e in text.split(",") if e.strip()],
        default=list(ENGINES),
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(unknown)}: choose of {', '.join(ENGINES)}")
    work = Path(tempfile.mkdtemp(prefix="aiocommit-engine-bench-"))
    try:
        worst = 0.0
        for engine in args.engines:
            ratios = run_engine(engine, work, rows=args.rows, files=args.files, rounds=args.rounds)
            worst = max(worst, *ratios.values())
        print(f"ratio aiocommit/own (highest of the medians): {worst:.3f} (target <= {TARGET})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
