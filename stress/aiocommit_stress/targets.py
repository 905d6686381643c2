"""Where a stress run commits: ``memory``, ``local``, ``adls``, ``gcs`` or ``s3`` (started
on loopback emulators), or any store URL; each optionally behind a ``FaultyStore``.

A target gives the raw store client (used to prepare tasks and to verify output, never
slowed or faulted) and a root directory under which every run makes its destination.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore, Latency
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.registry import open_store
from aiocommit_testing.child_server import start_announcing, stop_process

KINDS = ("memory", "local", "adls", "gcs", "s3")


@dataclass
class FaultOptions:
    """What to inject while the job commits (tasks are prepared without faults)."""

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    spike_probability: float = 0.0
    spike_ms: float = 0.0
    throttle: float = 0.0
    throttle_burst: int = 0
    retry_after: float | None = None
    capacity: float | None = None
    transient: float = 0.0
    lost_responses: float = 0.0
    seed: int = 0
    #: wrap in FaultyStore even when nothing is injected (same code path, for comparisons)
    always_wrap: bool = False

    @property
    def any(self) -> bool:
        return bool(
            self.latency_ms
            or self.jitter_ms
            or (self.spike_probability and self.spike_ms)
            or self.throttle
            or self.capacity
            or self.transient
            or self.lost_responses
        )

    def faults(self) -> Faults:
        return Faults(
            seed=self.seed,
            latency=Latency(
                fixed=self.latency_ms / 1000,
                jitter=self.jitter_ms / 1000,
                spike_probability=self.spike_probability,
                spike=self.spike_ms / 1000,
            ),
            throttle_probability=self.throttle,
            throttle_burst=self.throttle_burst,
            retry_after=self.retry_after,
            capacity_per_second=self.capacity,
            transient_probability=self.transient,
            lost_response_probability=self.lost_responses,
        )

    def wrap(self, store: Store) -> Store:
        if not self.any and not self.always_wrap:
            return store
        return FaultyStore(store, self.faults())

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "always_wrap"}


@dataclass
class Target:
    """A store to commit into, and a root below which each run gets a destination."""

    kind: str
    store: Store
    root: str
    #: the local directory of ``root`` when the store is the local filesystem
    local_root: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    #: creates files (store path, size in zero bytes) straight in an emulator's state,
    #: without the store's requests (a bench's preparation); None where there is no way
    seed_files: Callable[[list[tuple[str, int]]], Awaitable[None]] | None = None
    _runs: int = 0

    def new_dest(self, name: str = "run") -> str:
        self._runs += 1
        return join(self.root, f"{name}-{self._runs:04d}")

    @property
    def is_local(self) -> bool:
        return self.local_root is not None


@asynccontextmanager
async def open_target(
    spec: str, *, workdir: str | None = None, keep: bool = False
) -> AsyncIterator[Target]:
    """Open ``spec`` (a kind from ``KINDS`` or a store URL) for the block; everything made
    for it (temporary dirs, emulators, clients) goes away at the end unless ``keep``."""
    async with AsyncExitStack() as stack:
        if spec == "memory":
            # sizes and etags only for output files; the committer's JSON files in full
            name = f"stress-{os.getpid()}-{time.monotonic_ns()}"
            store: Store = MemoryStore(name, keep_data=False)
            yield Target("memory", store, "/stress")
        elif spec == "local":
            root = tempfile.mkdtemp(prefix="aiocommit-stress-", dir=workdir)
            if not keep:
                stack.callback(shutil.rmtree, root, True)
            yield Target("local", LocalStore(), root, local_root=root)
        elif spec == "adls":
            target = await stack.enter_async_context(_adls_target())
            yield target
        elif spec == "gcs":
            target = await stack.enter_async_context(_gcs_target())
            yield target
        elif spec == "s3":
            target = await stack.enter_async_context(_s3_target())
            yield target
        elif "://" in spec or spec.startswith(("file:", "/")):
            store, path = open_store(spec)
            stack.push_async_callback(store.aclose)
            root = join(path, f"aiocommit-stress-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
            if not keep:
                stack.push_async_callback(_delete_quietly, store, root)
            local = root if isinstance(store, LocalStore) else None
            yield Target(_kind_of(spec), store, root, local_root=local, details={"url": spec})
        else:
            raise ValueError(f"unknown store {spec!r}: use one of {', '.join(KINDS)} or a URL")


def _kind_of(url: str) -> str:
    scheme = url.split("://", 1)[0] if "://" in url else "file"
    return {"abfs": "adls", "abfss": "adls", "gs": "gcs", "file": "local"}.get(scheme, scheme)


async def _delete_quietly(store: Store, path: str) -> None:
    try:
        await store.delete(path, recursive=True)
    except Exception as error:  # cleanup of a scratch dir must not mask the run's outcome
        print(f"warning: could not delete {path}: {error}", file=sys.stderr)


def _missing(what: str, error: ImportError) -> RuntimeError:
    return RuntimeError(
        f"the {what} target needs the {what} adapter and emulator "
        f"(pip install -e '.[dev]'): {error}"
    )


@asynccontextmanager
async def _adls_target() -> AsyncIterator[Target]:
    """ADLS Gen2 on the in-package DFS emulator, run in its own process so its CPU does
    not share the engine's event loop."""
    try:
        from aiocommit.stores.adls import AdlsStore
        from aiocommit_testing import adls_emulator
    except ImportError as error:
        raise _missing("adls", error) from error
    filesystem = "stress"
    names = ("AIOCOMMIT_ADLS_ENDPOINT", "AZURE_STORAGE_ACCOUNT_KEY")
    argv = [sys.executable, "-m", adls_emulator.__name__, "--port", "0"]
    process, settings = await anyio.to_thread.run_sync(
        lambda: start_announcing(
            [*argv, "--filesystem", filesystem], lambda found: all(n in found for n in names)
        )
    )
    try:
        endpoint = settings["AIOCOMMIT_ADLS_ENDPOINT"]
        account = endpoint.rstrip("/").rsplit("/", 1)[-1]
        store = AdlsStore(
            account,
            filesystem,
            endpoint=endpoint,
            account_key=settings["AZURE_STORAGE_ACCOUNT_KEY"],
        )
        try:
            await store.mkdirs("/stress")
            yield Target(
                "adls",
                store,
                "/stress",
                details={"endpoint": endpoint},
                seed_files=_adls_seeder(endpoint, filesystem),
            )
        finally:
            await store.aclose()
    finally:
        await anyio.to_thread.run_sync(stop_process, process)


def _adls_seeder(
    endpoint: str, filesystem: str
) -> Callable[[list[tuple[str, int]]], Awaitable[None]]:
    """Files made in the ADLS emulator's state through its ``/_emulator/seed`` call."""
    import aiohttp

    control = endpoint.rstrip("/").rsplit("/", 1)[0] + "/_emulator/seed"

    async def seed(files: list[tuple[str, int]]) -> None:
        body = {"filesystem": filesystem, "files": [[p.strip("/"), s] for p, s in files]}
        async with aiohttp.ClientSession() as session, session.post(control, json=body) as r:
            r.raise_for_status()

    return seed


@asynccontextmanager
async def _gcs_target() -> AsyncIterator[Target]:
    """GCS on fake-gcs-server (a separate process). Generation preconditions are not
    enforced by it; the engine's correctness does not depend on them in these runs."""
    try:
        from aiocommit.stores.gcs import GcsStore
        from aiocommit_testing.gcs_emulator import create_bucket, run_fake_gcs_server
    except ImportError as error:
        raise _missing("gcs", error) from error
    async with run_fake_gcs_server() as server:
        bucket = f"aiocommit-stress-{os.getpid()}"
        await create_bucket(server.endpoint, bucket)
        store = GcsStore(bucket, api_root=server.endpoint)
        try:
            yield Target("gcs", store, "/stress", details={"endpoint": server.endpoint})
        finally:
            await store.aclose()


@asynccontextmanager
async def _s3_target() -> AsyncIterator[Target]:
    """S3 on a moto server (a separate process); a job prepared here is the manifest
    committer's (each rename a copy and a delete)."""
    try:
        from aiocommit.stores.s3 import S3Store
        from aiocommit_testing.s3_emulator import create_bucket, run_moto_server
    except ImportError as error:
        raise _missing("s3", error) from error
    async with run_moto_server() as server:
        bucket = f"aiocommit-stress-{os.getpid()}"
        await create_bucket(server.endpoint, bucket)
        store = S3Store(bucket, endpoint_url=server.endpoint)
        try:
            yield Target("s3", store, "/stress", details={"endpoint": server.endpoint})
        finally:
            await store.aclose()
