"""Fixtures for the command line tests: a destination on each store, a runner."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from aiocommit import CommitOptions, commit_job
from aiocommit.cli import main
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store, join
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from tests.helpers import output, run_tasks

DATA = Path(__file__).resolve().parent.parent / "data" / "hadoop"
HADOOP_SUCCESS = DATA / "_SUCCESS.json"
HADOOP_MANIFEST = DATA / "task_202611210000_0001_m_000000-manifest.json"


@dataclass
class Dest:
    """A destination directory: the store, its path there, and its URL for the CLI."""

    kind: str
    store: Store
    path: str
    url: str

    def at(self, relative: str) -> str:
        return join(self.path, relative)

    def url_at(self, relative: str) -> str:
        return self.url.rstrip("/") + "/" + relative

    def job(self, tasks: int = 3, files: int = 4, job_id: str | None = None) -> tuple[str, int]:
        """A job with ``tasks`` committed tasks; returns (job ID, total bytes)."""
        job_id, expected = anyio.run(
            lambda: run_tasks(self.store, self.path, tasks, files, job_id=job_id)
        )
        return job_id, sum(len(data) for data in expected.values())

    def commit(self, job_id: str, **options: Any) -> SuccessData:
        return anyio.run(
            lambda: commit_job(
                self.path, job_id, store=self.store, options=CommitOptions(**options)
            )
        )

    def output(self) -> dict[str, bytes]:
        return anyio.run(output, self.store, self.path)

    def exists(self, relative: str) -> bool:
        async def check() -> bool:
            try:
                await self.store.stat(self.at(relative))
            except FileNotFoundError:
                return False
            return True

        return anyio.run(check)

    def write(self, relative: str, data: bytes) -> None:
        anyio.run(lambda: self.store.write_bytes(self.at(relative), data))

    def read(self, relative: str) -> bytes:
        return anyio.run(self.store.read_bytes, self.at(relative))


def local_dest(tmp_path: Path) -> Dest:
    root = tmp_path / "out"
    root.mkdir()
    return Dest("local", LocalStore(), str(root), str(root))


def memory_dest() -> Dest:
    name = f"cli-{uuid.uuid4().hex}"
    return Dest("memory", MemoryStore.named(name), "/dest", f"memory://{name}/dest")


@pytest.fixture(params=["local", "memory"])
def dest(request: pytest.FixtureRequest, tmp_path: Path) -> Dest:
    """An empty destination directory on the local store and on the memory store."""
    if request.param == "local":
        return local_dest(tmp_path)
    made = memory_dest()
    anyio.run(made.store.mkdirs, made.path)
    return made


@pytest.fixture
def local(tmp_path: Path) -> Dest:
    return local_dest(tmp_path)


class Cli:
    """Runs ``aiocommit`` in this process, as a user would type it."""

    def __init__(self) -> None:
        self.runner = CliRunner(env={"COLUMNS": "200", "AIOCOMMIT_LOG_LEVEL": None})

    def __call__(self, *args: str) -> Result:
        return self.runner.invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def cli() -> Iterator[Cli]:
    """The CLI runner; the ``aiocommit`` logger is restored afterwards, as other tests
    expect to find it."""
    logger = logging.getLogger("aiocommit")
    level, handlers = logger.level, list(logger.handlers)
    yield Cli()
    logger.setLevel(level)
    for handler in list(logger.handlers):
        if handler not in handlers:
            logger.removeHandler(handler)


def one_error_line(result: Result) -> str:
    """The ``aiocommit: error:`` line of a failed command; there must be exactly one."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("aiocommit: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]
