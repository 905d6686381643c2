"""How long a reader listing the destination during a replace commit sees old and new
files together (a mix), on the local filesystem and on S3 (moto).

    .venv/bin/python -m aiocommit_stress.replace_window [--stores local,s3]
        [--partitions 10] [--files 50] [--rounds 3]

Per store and scope (``partitions``: a replace per partition, the engines'
``overwrite_partitions``; ``destination``: a replace of the whole destination), each
round commits old output (``--partitions`` x ``--files`` files, named ``old-N``), then
commits a new job over it (``new-N``) while a reader lists every partition directory
through the store again and again. Prints, per round: the commit's seconds, the
listings made, how many showed a partition mixed (old and new files) or empty, and the
mix window (first to last mixed listing's end, 0 when none), then the median window.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from aiocommit.client.job import commit_job, setup_job
from aiocommit.client.task import commit_task, setup_task
from aiocommit.errors import NotFound, Transient
from aiocommit.options import CommitOptions
from aiocommit.stores.base import Store, join
from aiocommit.stores.local import LocalStore

SCOPES = ("partitions", "destination")


@dataclass
class Window:
    commit_seconds: float
    listings: int
    mixed: int
    empty: int
    window: float


@asynccontextmanager
async def store_at(kind: str) -> AsyncIterator[tuple[Store, str]]:
    """A store of ``kind`` (``local``, ``s3``: a moto server) and a root path on it."""
    if kind == "local":
        root = tempfile.mkdtemp(prefix="aiocommit-window-")
        try:
            yield LocalStore(), root
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    from aiocommit.stores.s3 import S3Store
    from aiocommit_testing.s3_emulator import create_bucket, run_moto_server

    async with run_moto_server() as server:
        bucket = f"aiocommit-window-{os.getpid()}"
        await create_bucket(server.endpoint, bucket)
        store = S3Store(bucket, endpoint_url=server.endpoint)
        try:
            yield store, "/window"
        finally:
            await store.aclose()


async def _commit(
    store: Store, dest: str, tag: str, partitions: int, files: int, options: CommitOptions
) -> str:
    """A job writing ``tag`` files, its task committed; its ID (the caller commits it)."""
    job_id = await setup_job(dest, store=store, options=options)
    attempt = await setup_task(dest, job_id, 0, 0, store=store, options=options)
    for p in range(partitions):
        for n in range(files):
            await attempt.write_bytes(
                f"p={p}/{tag}-{n:04d}.dat", f"{tag} {p} {n}".encode(), store=store
            )
    await commit_task(attempt, store=store, options=options)
    return job_id


async def _names(store: Store, directory: str) -> list[str] | None:
    """The file names in ``directory``; None when the listing failed (a transient store
    error: the reader lists again)."""
    try:
        return [
            status.path.rsplit("/", 1)[-1]
            async for page in store.list_dir(directory)
            for status in page
        ]
    except NotFound:
        return []
    except Transient:
        return None


async def measure(store: Store, dest: str, scope: str, partitions: int, files: int) -> Window:
    """One round: old output, then a new job's commit watched by a listing reader."""
    options = CommitOptions(conflict_mode="replace", replace_partitions=scope == "partitions")
    old_job = await _commit(store, dest, "old", partitions, files, options)
    await commit_job(dest, old_job, store=store, options=options)
    new_job = await _commit(store, dest, "new", partitions, files, options)
    listings = mixed = empty = 0
    first = last = None
    done = anyio.Event()

    async def reader() -> None:
        nonlocal listings, mixed, empty, first, last
        while not done.is_set():
            for p in range(partitions):
                names = await _names(store, join(dest, f"p={p}"))
                if names is None:
                    continue
                ended = time.perf_counter()
                listings += 1
                tags = {name.split("-")[0] for name in names}
                if not names:
                    empty += 1
                if {"old", "new"} <= tags:
                    mixed += 1
                    first = ended if first is None else first
                    last = ended
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        start = time.perf_counter()
        await commit_job(dest, new_job, store=store, options=options)
        elapsed = time.perf_counter() - start
        done.set()
    window = 0.0 if first is None or last is None else last - first
    return Window(elapsed, listings, mixed, empty, window)


async def run(stores: list[str], partitions: int, files: int, rounds: int) -> None:
    for kind in stores:
        async with store_at(kind) as (store, root):
            for scope in SCOPES:
                windows = []
                for round_number in range(rounds):
                    dest = join(root, f"{scope}-{round_number}")
                    result = await measure(store, dest, scope, partitions, files)
                    windows.append(result.window)
                    print(
                        f"{kind:<5} {scope:<11} round {round_number}: commit "
                        f"{result.commit_seconds:.3f} s, {result.listings} listings, "
                        f"{result.mixed} mixed, {result.empty} empty, "
                        f"mix window {result.window * 1000:.1f} ms",
                        flush=True,
                    )
                print(
                    f"{kind:<5} {scope:<11} median mix window "
                    f"{statistics.median(windows) * 1000:.1f} ms",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--stores",
        type=lambda text: [s.strip() for s in text.split(",") if s.strip()],
        default=["local", "s3"],
    )
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.stores) - {"local", "s3"})
    if unknown:
        parser.error(f"unknown store(s) {', '.join(unknown)}: choose of local, s3")
    anyio.run(run, args.stores, args.partitions, args.files, args.rounds)


if __name__ == "__main__":
    main()
