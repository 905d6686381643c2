"""Whole jobs through the chaos proxy, per store, seeded; the destination checked directly.

Each seed runs, through ``aiocommit_testing.chaos_proxy`` in front of the store's emulator
(ADLS emulator, fake-gcs-server, moto): a job set up, ``tasks`` tasks of ``files`` files
written and committed (the manifest committer on ADLS and GCS, the magic committer on S3),
the job committed; and a second job set up, its tasks written, then aborted. Every public
call is counted; one that raises is recorded and run again (at most ``RERUNS`` times), so a
run says both whether anything raised and whether the job could still be finished. The
destination is then read through a client that bypasses the proxy: exactly the committed
files with their bytes and ``_SUCCESS`` naming the job, nothing of the aborted job, no
``_temporary``, and on S3 no outstanding upload.

``tests/resilience/test_chaos.py`` runs a few small seeds; ``aiocommit stress chaos``
the long form.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar

import anyio

from aiocommit.client.job import abort_job, commit_job, setup_job
from aiocommit.client.task import commit_task, setup_task
from aiocommit.io.operations import StoreOperations
from aiocommit.options import CommitOptions
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import Store, join
from aiocommit_stress.verify import walk
from aiocommit_testing.chaos_proxy import (
    Chaos,
    ChaosProxy,
    ChaosProxyServer,
    StoreKind,
    run_chaos_proxy,
)
from aiocommit_testing.child_server import run_child_server

T = TypeVar("T")

#: times a public call that raised is run again before the seed is given up
RERUNS = 3
BUCKET = "aiocommit-chaos"


@dataclasses.dataclass
class ChaosTarget:
    """A store through the proxy, the same store without it, and the proxy."""

    kind: StoreKind
    proxy: ChaosProxy
    store: Store
    direct: Store


async def _emulator(
    kind: StoreKind, stack: AsyncExitStack, *, in_process: bool
) -> tuple[str, Callable[[str], Store], Store]:
    """Start ``kind``'s emulator for ``stack``: its endpoint, the store at an endpoint
    in front of it (``proxy.url(endpoint)``), and the store on the emulator itself. The
    ADLS emulator runs in this event loop when ``in_process``, else in a child process;
    fake-gcs-server and moto are always child processes."""
    if kind == "adls":
        from aiocommit.stores.adls import AdlsStore

        if in_process:
            from aiocommit_testing.adls_emulator import run_adls_emulator

            handle = await stack.enter_async_context(run_adls_emulator())
            handle.create_filesystem(BUCKET)
            upstream, account, key = handle.endpoint, handle.account, handle.key
        else:
            from aiocommit_testing.adls_emulator import AdlsEmulatorServer

            server = AdlsEmulatorServer(BUCKET)
            await stack.enter_async_context(run_child_server(server))
            upstream, account, key = server.account_endpoint, server.account, server.key

        def adls(endpoint: str) -> Store:
            return AdlsStore(account, BUCKET, endpoint=endpoint, account_key=key)

        return upstream, adls, adls(upstream)
    if kind == "gcs":
        from aiocommit.stores.gcs import GcsStore
        from aiocommit_testing.gcs_emulator import create_bucket, run_fake_gcs_server

        fake_gcs = await stack.enter_async_context(run_fake_gcs_server())
        await create_bucket(fake_gcs.endpoint, BUCKET)

        def gcs(endpoint: str) -> Store:
            return GcsStore(BUCKET, api_root=endpoint)

        # direct: reads only, fake-gcs-server's own answers are right for them
        return fake_gcs.endpoint, gcs, gcs(fake_gcs.endpoint)
    from aiocommit.stores.s3 import S3Store
    from aiocommit_testing.s3_emulator import create_bucket as create_s3_bucket
    from aiocommit_testing.s3_emulator import run_moto_server

    moto = await stack.enter_async_context(run_moto_server())
    await create_s3_bucket(moto.endpoint, BUCKET)

    def s3(endpoint: str) -> Store:
        return S3Store(BUCKET, endpoint_url=endpoint)

    return moto.endpoint, s3, s3(moto.endpoint)


@asynccontextmanager
async def chaos_target(kind: StoreKind, chaos: Chaos) -> AsyncIterator[ChaosTarget]:
    """Start ``kind``'s emulator and a chaos proxy in front of it for the block."""
    async with AsyncExitStack() as stack:
        upstream, store_at, direct = await _emulator(kind, stack, in_process=True)
        proxy = await stack.enter_async_context(run_chaos_proxy(upstream, kind, chaos))
        store = store_at(proxy.url(upstream))
        stack.push_async_callback(store.aclose)
        stack.push_async_callback(direct.aclose)
        yield ChaosTarget(kind, proxy, store, direct)


@dataclasses.dataclass
class ChildChaosTarget:
    """A store through a chaos proxy in a child process, the same store without it, and
    the proxy (set and read through its control API)."""

    kind: StoreKind
    proxy: ChaosProxyServer
    store: Store
    direct: Store


@asynccontextmanager
async def child_chaos_target(kind: StoreKind, chaos: Chaos) -> AsyncIterator[ChildChaosTarget]:
    """``chaos_target`` with the proxy, and the ADLS emulator, each in a child process (as
    fake-gcs-server and moto are): the caller's event loop runs only the store's client."""
    async with AsyncExitStack() as stack:
        upstream, store_at, direct = await _emulator(kind, stack, in_process=False)
        server = ChaosProxyServer(upstream, kind, chaos)
        proxy = await stack.enter_async_context(run_child_server(server))
        store = store_at(proxy.url(upstream))
        stack.push_async_callback(store.aclose)
        stack.push_async_callback(direct.aclose)
        yield ChildChaosTarget(kind, proxy, store, direct)


@dataclasses.dataclass
class SeedResult:
    """One seed: what raised, what the destination held, what the proxy injected."""

    seed: int
    seconds: float
    files: int
    raised: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    calls: int = 0
    injected: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return not self.problems

    @property
    def ok(self) -> bool:
        return self.exact and not self.raised


class _Calls:
    """Runs public calls, recording each that raised and running it again."""

    def __init__(self) -> None:
        self.count = 0
        self.raised: list[str] = []

    async def run(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        for attempt in range(RERUNS + 1):
            self.count += 1
            try:
                return await call()
            except Exception as error:
                self.raised.append(f"{name}: {type(error).__name__}: {error}"[:300])
                if attempt == RERUNS:
                    raise
        raise AssertionError("unreachable")


def _task_files(seed: int, job: str, task: int, count: int) -> dict[str, bytes]:
    rng = random.Random(f"{seed}/{job}/{task}")
    return {
        f"part={n % 3}/part-{task:05d}-{n:04d}.dat": rng.randbytes(rng.randint(1, 512))
        for n in range(count)
    }


async def _manifest_job(
    target: ChaosTarget,
    dest: str,
    seed: int,
    tasks: int,
    files: int,
    options: CommitOptions,
    calls: _Calls,
    *,
    abort: bool,
) -> dict[str, bytes]:
    store = target.store
    ops = StoreOperations(store, options, IOStatistics())
    job_id = await calls.run("setup_job", lambda: setup_job(dest, store=store, options=options))
    expected: dict[str, bytes] = {}

    async def task(number: int) -> None:
        content = _task_files(seed, dest, number, files)
        attempt = await calls.run(
            "setup_task",
            lambda: setup_task(dest, job_id, number, 0, store=store, options=options),
        )
        async with anyio.create_task_group() as group:
            for relative, data in content.items():
                group.start_soon(ops.write_bytes, attempt.path(relative), data)
        await calls.run("commit_task", lambda: commit_task(attempt, store=store, options=options))
        expected.update(content)

    async with anyio.create_task_group() as group:
        for number in range(tasks):
            group.start_soon(task, number)
    if abort:
        await calls.run("abort_job", lambda: abort_job(dest, job_id, store=store, options=options))
        return {}
    await calls.run("commit_job", lambda: commit_job(dest, job_id, store=store, options=options))
    return expected


async def _magic_job(
    target: ChaosTarget,
    dest: str,
    seed: int,
    tasks: int,
    files: int,
    options: CommitOptions,
    calls: _Calls,
    *,
    abort: bool,
) -> dict[str, bytes]:
    store = target.store
    magic = options.with_values(committer="magic")
    job_id = await calls.run("setup_job", lambda: setup_job(dest, store=store, options=magic))
    expected: dict[str, bytes] = {}

    async def task(number: int) -> None:
        content = _task_files(seed, dest, number, files)
        attempt = await calls.run(
            "setup_task",
            lambda: setup_task(dest, job_id, number, 0, store=store, options=options),
        )

        async def write(relative: str, data: bytes) -> None:
            await calls.run(
                "write_bytes",
                lambda: attempt.write_bytes(relative, data, store=store, options=options),
            )

        async with anyio.create_task_group() as group:
            for relative, data in content.items():
                group.start_soon(write, relative, data)
        await calls.run("commit_task", lambda: commit_task(attempt, store=store, options=options))
        expected.update(content)

    async with anyio.create_task_group() as group:
        for number in range(tasks):
            group.start_soon(task, number)
    if abort:
        await calls.run("abort_job", lambda: abort_job(dest, job_id, store=store, options=options))
        return {}
    await calls.run("commit_job", lambda: commit_job(dest, job_id, store=store, options=options))
    return expected


async def check_destination(
    target: ChaosTarget | ChildChaosTarget, dest: str, expected: dict[str, bytes]
) -> list[str]:
    """What is wrong with ``dest`` read directly: missing, extra or wrong files, a missing
    ``_SUCCESS`` (when something was committed), leftovers, open uploads."""
    direct = target.direct
    found = await walk(direct, dest)
    problems: list[str] = []
    data = {p for p in found if p != "_SUCCESS" and not p.startswith("_temporary/")}
    if missing := sorted(set(expected) - data):
        problems.append(f"{dest}: {len(missing)} missing, e.g. {missing[0]}")
    if extra := sorted(data - set(expected)):
        problems.append(f"{dest}: {len(extra)} unexpected, e.g. {extra[0]}")
    for relative in sorted(set(expected) & data):
        if await direct.read_bytes(join(dest, relative)) != expected[relative]:
            problems.append(f"{dest}: wrong bytes in {relative}")
            break
    if expected and "_SUCCESS" not in found:
        problems.append(f"{dest}: no _SUCCESS")
    if not expected and "_SUCCESS" in found:
        problems.append(f"{dest}: _SUCCESS of an aborted job")
    if leftovers := [p for p in found if p.startswith("_temporary/")]:
        problems.append(f"{dest}: {len(leftovers)} files left in _temporary")
    list_uploads = getattr(direct, "list_uploads", None)
    if list_uploads is not None:
        uploads = [u async for page in list_uploads(dest.rstrip("/") + "/") for u in page]
        if uploads:
            problems.append(f"{dest}: {len(uploads)} outstanding multipart upload(s)")
    return problems


async def run_seed(
    target: ChaosTarget,
    seed: int,
    *,
    tasks: int,
    files: int,
    options: CommitOptions,
    root: str = "/chaos",
) -> SeedResult:
    """One seed: a committed job and an aborted one through the proxy, then checked."""
    target.proxy.reseed(seed)
    before = Counter(target.proxy.counts)
    job = _magic_job if target.kind == "s3" else _manifest_job
    calls = _Calls()
    committed_dest = join(root, f"seed-{seed}", "committed")
    aborted_dest = join(root, f"seed-{seed}", "aborted")
    begin = time.perf_counter()
    result = SeedResult(seed, 0.0, tasks * files)
    try:
        async with anyio.create_task_group() as group:

            async def committed() -> None:
                expected = await job(
                    target, committed_dest, seed, tasks, files, options, calls, abort=False
                )
                result.problems.extend(await check_destination(target, committed_dest, expected))

            async def aborted() -> None:
                await job(
                    target,
                    aborted_dest,
                    seed,
                    max(1, tasks // 2),
                    files,
                    options,
                    calls,
                    abort=True,
                )
                result.problems.extend(await check_destination(target, aborted_dest, {}))

            group.start_soon(committed)
            group.start_soon(aborted)
    except Exception as error:  # a call that kept raising: the seed could not finish
        result.problems.append(f"gave up: {type(error).__name__}: {error}"[:300])
    result.seconds = time.perf_counter() - begin
    result.raised = calls.raised
    result.calls = calls.count
    result.injected = dict(Counter(target.proxy.counts) - before)
    return result


def chaos_settings(
    *,
    throttle: float = 0.2,
    lost: float = 0.05,
    reset: float = 0.03,
    latency: float = 0.002,
    retry_after: float = 1.0,
    retry_after_share: float = 0.5,
) -> Chaos:
    return Chaos(
        throttle=throttle,
        lost=lost,
        reset=reset,
        latency=latency,
        retry_after=retry_after,
        retry_after_share=retry_after_share,
    )


def summary(kind: str, results: list[SeedResult]) -> dict[str, Any]:
    injected: Counter[str] = Counter()
    for result in results:
        injected.update(result.injected)
    return {
        "store": kind,
        "seeds": len(results),
        "exact": sum(r.exact for r in results),
        "raised": sum(len(r.raised) for r in results),
        "calls": sum(r.calls for r in results),
        "seconds": round(sum(r.seconds for r in results), 1),
        "injected": dict(injected),
        "ok": all(r.ok for r in results),
    }


async def chaos_scenario(
    kind: StoreKind,
    *,
    seeds: int,
    first_seed: int,
    tasks: int,
    files: int,
    chaos: Chaos,
    options: CommitOptions,
    reporter: Any,
) -> dict[str, Any]:
    """``seeds`` seeds on ``kind`` through one emulator and proxy; a line per seed."""
    results: list[SeedResult] = []
    async with chaos_target(kind, chaos) as target:
        reporter.log(
            f"{kind}: {seeds} seeds x ({tasks} tasks x {files} files committed + "
            f"{max(1, tasks // 2)} aborted); throttle {chaos.throttle:.0%}, lost "
            f"{chaos.lost:.0%}, reset {chaos.reset:.0%}, latency {chaos.latency * 1000:g} ms"
        )
        for seed in range(first_seed, first_seed + seeds):
            result = await run_seed(target, seed, tasks=tasks, files=files, options=options)
            results.append(result)
            injected = result.injected
            reporter.log(
                f"seed {seed}: {'exact' if result.exact else 'NOT EXACT'}, "
                f"{len(result.raised)} raised, {result.seconds:.1f} s, "
                f"{injected.get('requests', 0)} requests: {injected.get('throttled', 0)} "
                f"throttled, {injected.get('lost', 0)} lost, {injected.get('reset', 0)} reset, "
                f"{injected.get('enforced', 0)} enforced"
            )
            for line in [*result.problems, *result.raised][:5]:
                reporter.log(f"  {line}")
    figures = summary(kind, results)
    figures["per_seed"] = [dataclasses.asdict(r) for r in results]
    reporter.figure(
        f"chaos {kind}: {figures['exact']}/{seeds} seeds exact, {figures['raised']} public "
        f"calls raised of {figures['calls']}; {figures['injected'].get('throttled', 0)} "
        f"throttled, {figures['injected'].get('lost', 0)} lost, "
        f"{figures['injected'].get('reset', 0)} reset of "
        f"{figures['injected'].get('requests', 0)} requests; {'PASS' if figures['ok'] else 'FAIL'}"
    )
    return {"scenario": "chaos", "store": kind, "ok": figures["ok"], "figures": figures}
