"""``bench ops``: client CPU per rename, stat and delete through one store adapter.

The server runs in another process (the ADLS emulator; for GCS a fast stub answering with
fake-gcs-server's bodies, see ``ops_servers``; for S3 the moto server), so
``time.process_time`` of this process is
the adapter's cost plus the few µs of the driving loop. The same loop drives bare aiohttp
PUTs against a trivial server: the floor no HTTP adapter can beat. Targets (issue #11):
ADLS <= 400 µs per rename, GCS <= 650 µs per rename in 2 requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from aiocommit.errors import NotFound
from aiocommit.stores.base import Store
from aiocommit_stress.report import Reporter, grid_table
from aiocommit_stress.runner import profiling
from aiocommit_stress.scenarios import verdict
from aiocommit_testing.child_server import server_process

#: µs of client CPU per rename that issue #11 sets as targets
TARGETS_US = {"adls": 400.0, "gcs": 650.0}
STORES = ("adls", "gcs", "local", "memory", "s3")


async def drive(
    items: list[Any], call: Callable[[Any], Awaitable[object]], concurrency: int
) -> tuple[float, float]:
    """Run ``call(item)`` for every item, ``concurrency`` at a time: (CPU s, wall s)."""
    gc.collect()
    iterator = iter(items)

    async def worker() -> None:
        for item in iterator:
            await call(item)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.process_time() - cpu, time.perf_counter() - wall


@contextlib.asynccontextmanager
async def open_bench_store(kind: str, files: int) -> AsyncIterator[tuple[Any, list[str | None]]]:
    """``(store, etags)`` with ``/bench/src/f{n}`` written and ``/bench/dst`` made."""
    with contextlib.ExitStack() as stack:
        store: Store
        if kind == "adls":
            from aiocommit.stores.adls import AdlsStore

            env = stack.enter_context(
                server_process("aiocommit_testing.adls_emulator", "--filesystem", "bench")
            )
            endpoint = env["AIOCOMMIT_ADLS_ENDPOINT"]
            account = endpoint.rstrip("/").rsplit("/", 1)[1]
            store = AdlsStore(
                account, "bench", endpoint=endpoint, account_key=env["AZURE_STORAGE_ACCOUNT_KEY"]
            )
        elif kind == "gcs":
            from aiocommit.stores.gcs import GcsStore

            port = stack.enter_context(server_process("aiocommit_stress.ops_servers", "gcs"))[
                "PORT"
            ]
            store = GcsStore("bench", api_root=f"http://127.0.0.1:{port}")
        elif kind == "local":
            from aiocommit.stores.local import LocalStore

            root = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ops-"))
            store = LocalStore()
        elif kind == "memory":
            from aiocommit.stores.memory import MemoryStore

            store = MemoryStore(f"bench-ops-{os.getpid()}")
        elif kind == "s3":
            from aiocommit.stores.s3 import S3Store
            from aiocommit_testing.s3_emulator import MotoServer, create_bucket

            endpoint = stack.enter_context(MotoServer()).endpoint
            await create_bucket(endpoint, "bench-ops")
            store = S3Store("bench-ops", endpoint_url=endpoint)
        else:
            raise ValueError(f"--store must be one of {STORES}, not {kind!r}")
        base = root if kind == "local" else ""
        try:
            etags = await _prepare(store, kind, base, files)
            yield (_Rooted(store, base) if base else store), etags
        finally:
            await store.aclose()


async def _prepare(store: Store, kind: str, base: str, files: int) -> list[str | None]:
    if kind == "gcs":
        from aiocommit.stores.gcs import GcsStore

        assert isinstance(store, GcsStore) and store.api_root is not None
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{store.api_root}/_stub/seed", params={"prefix": "bench/src/f", "count": files}
            ) as response,
        ):
            generations: dict[str, str] = await response.json()
        return [generations[f"bench/src/f{n}"] for n in range(files)]
    await store.mkdirs(f"{base}/bench/dst")
    etags: list[str | None] = [None] * files

    async def write(n: int) -> None:
        etags[n] = (await store.write_bytes(f"{base}/bench/src/f{n}", b"x")).etag

    await drive(list(range(files)), write, 32)
    return etags


class _Rooted:
    """A local store seen from a temporary directory (paths ``/bench/...`` inside it)."""

    def __init__(self, store: Store, base: str) -> None:
        self._store, self._base = store, base

    async def rename(self, source: str, dest: str, *, source_etag: str | None = None) -> None:
        await self._store.rename(self._base + source, self._base + dest, source_etag=source_etag)

    async def stat(self, path: str) -> Any:
        return await self._store.stat(self._base + path)

    async def delete(self, path: str) -> bool:
        return await self._store.delete(self._base + path)

    def list_dir(self, path: str) -> AsyncIterator[list[Any]]:
        return self._store.list_dir(self._base + path)


async def measure_store(
    store: Any, etags: list[str | None], concurrency: int, profile: Path | None = None
) -> dict[str, Any]:
    """Rename every ``/bench/src/f{n}`` to ``/bench/dst/f{n}``, stat, delete: µs CPU each."""
    files = list(range(len(etags)))

    async def rename(n: int) -> None:
        await store.rename(f"/bench/src/f{n}", f"/bench/dst/f{n}", source_etag=etags[n])

    async def stat(n: int) -> None:
        await store.stat(f"/bench/dst/f{n}")

    async def delete(n: int) -> None:
        if not await store.delete(f"/bench/dst/f{n}"):
            raise AssertionError(f"/bench/dst/f{n} was not there to delete")

    figures: dict[str, Any] = {}
    for name, call in (("rename", rename), ("stat", stat), ("delete", delete)):
        with profiling(profile is not None and name == "rename") as profiler:
            cpu, wall = await drive(files, call, concurrency)
        if profiler is not None and profile is not None:
            profiler.dump_stats(profile)
        figures[name] = {
            "cpu_us_per_op": round(cpu / len(files) * 1e6, 1),
            "ops_per_second": round(len(files) / wall, 1),
        }
    left = [status for d in ("/bench/dst", "/bench/src") for status in await _listing(store, d)]
    figures["verified"] = not left
    return figures


async def _listing(store: Any, path: str) -> list[Any]:
    try:
        return [status async for page in store.list_dir(path) for status in page]
    except NotFound:  # GCS: a prefix with nothing under it is no directory
        return []


async def floor(requests: int, concurrency: int) -> dict[str, Any]:
    """Bare aiohttp PUTs (one shared session) against a trivial server in another process."""
    with server_process("aiocommit_stress.ops_servers", "floor") as env:
        url = f"http://127.0.0.1:{env['PORT']}/floor"
        connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def put(_: int) -> None:
                async with session.put(url) as response:
                    if response.status != 201:
                        raise AssertionError(response.status)

            await drive(list(range(min(requests, 200))), put, concurrency)  # warm the pool
            cpu, wall = await drive(list(range(requests)), put, concurrency)
    return {
        "cpu_us_per_op": round(cpu / requests * 1e6, 1),
        "ops_per_second": round(requests / wall, 1),
    }


async def ops_bench(
    stores: list[str],
    files: int,
    concurrency: int,
    reporter: Reporter,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Client CPU per operation through each adapter, and the bare aiohttp floor."""
    results: dict[str, Any] = {}
    for kind in stores:
        reporter.log(f"{kind}: preparing {files} files")
        async with open_bench_store(kind, files) as (store, etags):
            target = None if profile is None else profile.with_suffix(f".{kind}.prof")
            results[kind] = await measure_store(store, etags, concurrency, target)
    results["aiohttp floor"] = await floor(files, concurrency)
    ok = all(r.get("verified", True) for r in results.values())
    reporter.table(
        grid_table(
            f"client CPU per operation ({files} files, concurrency {concurrency})",
            ["store", "µs CPU/rename", "µs CPU/stat", "µs CPU/delete", "renames/s", "target"],
            [
                [
                    kind,
                    r["rename"]["cpu_us_per_op"] if "rename" in r else r["cpu_us_per_op"],
                    r["stat"]["cpu_us_per_op"] if "stat" in r else "",
                    r["delete"]["cpu_us_per_op"] if "delete" in r else "",
                    f"{r.get('rename', r)['ops_per_second']:,.0f}",
                    f"≤ {TARGETS_US[kind]:g}" if kind in TARGETS_US else "",
                ]
                for kind, r in results.items()
            ],
        )
    )
    targets = {
        kind: results[kind]["rename"]["cpu_us_per_op"] <= TARGETS_US[kind]
        for kind in stores
        if kind in TARGETS_US
    }
    floor_us = results["aiohttp floor"]["cpu_us_per_op"]
    reporter.figure(
        "ops: "
        + ", ".join(
            f"{kind} {results[kind]['rename']['cpu_us_per_op']:,.0f} µs CPU per rename"
            + (
                f" (target ≤ {TARGETS_US[kind]:g}: {'met' if targets[kind] else 'NOT met'})"
                if kind in targets
                else ""
            )
            for kind in stores
        )
        + f"; bare aiohttp request {floor_us:,.0f} µs; verification {verdict(ok)}"
    )
    return {
        "benchmark": "ops",
        "files": files,
        "concurrency": concurrency,
        "ok": ok,
        "targets_met": targets,
        "results": results,
    }
