"""Store fixtures shared by the contract suite and the engine tests, and the markers of
the test tiers.

Markers (registered in pyproject.toml) are applied here, so none is forgotten:

* ``spark``: a test under ``tests/spark/`` or ``tests/interop/`` (a JVM: Spark, or
  Hadoop's own classes);
* ``emulator``: a test that uses an emulator server (moto, fake-gcs-server, the ADLS
  emulator): through an emulator fixture, or a store fixture parametrized with a cloud
  store. A test that starts an emulator without the marker fails, naming this rule; one
  that starts its own (no fixture) carries ``@pytest.mark.emulator``, as a test that
  starts a JVM outside those directories carries ``@pytest.mark.spark``.

``pytest -m "not spark and not emulator"`` is the fast tier.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from aiocommit.stores.base import Store
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit_testing.s3_emulator import use_dummy_credentials

# moto accepts any credentials and botocore needs some to sign; set before any Spark
# session starts, so its Python workers inherit them (credentials never go in options)
use_dummy_credentials()

StoreFactory = Callable[[Path], AbstractAsyncContextManager[tuple[Store, str]]]


@asynccontextmanager
async def memory_store(tmp_path: Path) -> AsyncIterator[tuple[Store, str]]:
    store = MemoryStore(f"test-{id(tmp_path)}", page_size=7)
    yield store, "/root"
    await store.aclose()


@asynccontextmanager
async def local_store(tmp_path: Path) -> AsyncIterator[tuple[Store, str]]:
    root = tmp_path / "store"
    root.mkdir()
    store = LocalStore(page_size=7)
    yield store, str(root)
    await store.aclose()


#: the in-process stores every engine test runs against
STORE_FACTORIES: dict[str, StoreFactory] = {
    "memory": memory_store,
    "local": local_store,
}
#: stores behind real HTTP emulators: the contract suite and the cloud engine tests
CLOUD_STORES = ("adls", "gcs", "s3")

#: the test directories that need a JVM
SPARK_DIRECTORIES = ("spark", "interop")
#: fixtures that are, or start, an emulator server
EMULATOR_FIXTURES = frozenset({"s3_endpoint", "gcs_endpoint", "emulator", "endpoint", "adls"})
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # the harness's own tests (stress/tests) carry their marks themselves
        inside = item.path.is_relative_to(TESTS)
        if inside and item.path.relative_to(TESTS).parts[0] in SPARK_DIRECTORIES:
            item.add_marker(pytest.mark.spark)
        if uses_emulator(item):
            item.add_marker(pytest.mark.emulator)


def uses_emulator(item: pytest.Item) -> bool:
    """An emulator fixture among the test's fixtures, or a cloud store as a parameter."""
    if EMULATOR_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(
        isinstance(value, str) and value in CLOUD_STORES for value in callspec.params.values()
    )


_running: list[pytest.Item] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.remove(item)


def _only_when_marked(start: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(start)
    def guarded(self: object, *args: Any, **kwargs: Any) -> Any:
        for item in _running:
            if item.get_closest_marker("emulator") is None:
                raise AssertionError(
                    f"{item.nodeid} starts an emulator ({type(self).__name__}) but is not "
                    "marked 'emulator': use an emulator fixture (tests/conftest.py "
                    "EMULATOR_FIXTURES) or a cloud store parameter, so the fast tier "
                    "leaves it out"
                )
        return start(self, *args, **kwargs)

    return guarded


def pytest_configure(config: pytest.Config) -> None:
    """Every emulator start checks that the running test is marked ``emulator``."""
    from aiocommit_testing.adls_emulator import AdlsEmulator
    from aiocommit_testing.child_server import ChildServer

    ChildServer.start = _only_when_marked(ChildServer.start)  # type: ignore[method-assign]
    AdlsEmulator.__init__ = _only_when_marked(AdlsEmulator.__init__)  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    """One fake-gcs-server (the real Go binary) on loopback for the whole run."""
    from aiocommit_testing.gcs_emulator import FakeGcsServer

    with FakeGcsServer() as server:
        yield server.endpoint


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """One moto server (server mode, real HTTP) on loopback for the whole run."""
    from aiocommit_testing.s3_emulator import MotoServer

    with MotoServer() as server:
        yield server.endpoint


@asynccontextmanager
async def cloud_store(
    kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Store, str]]:
    if kind == "gcs":
        from tests.stores.gcs_fixtures import gcs_store_factory

        async with gcs_store_factory(request.getfixturevalue("gcs_endpoint")) as (store, root):
            yield store, root
        return
    if kind == "s3":
        from tests.stores.s3_fixtures import s3_store_factory

        async with s3_store_factory(request.getfixturevalue("s3_endpoint")) as (store, root):
            yield store, root
        return
    if kind == "adls":
        from tests.stores.adls_fixtures import adls_store_factory

        async with adls_store_factory() as (store, root):
            yield store, root
        return
    raise ValueError(kind)


@pytest.fixture(params=sorted(STORE_FACTORIES))
async def store_root(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Store, str]]:
    """(store, root directory) for each in-process store; the root is empty."""
    async with STORE_FACTORIES[request.param](tmp_path) as (store, root):
        yield store, root


@pytest.fixture(params=[*sorted(STORE_FACTORIES), *CLOUD_STORES])
async def any_store_root(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Store, str]]:
    """(store, root directory) for every store, the emulated cloud ones included."""
    if request.param in STORE_FACTORIES:
        async with STORE_FACTORIES[request.param](tmp_path) as (store, root):
            yield store, root
    else:
        async with cloud_store(request.param, request) as (store, root):
            yield store, root


@pytest.fixture(params=CLOUD_STORES)
async def cloud_store_root(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Store, str]]:
    """(store, root directory) on each emulated cloud store."""
    async with cloud_store(request.param, request) as (store, root):
        yield store, root
