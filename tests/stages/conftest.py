"""Fixtures of the stage tests: a job on the memory store, and a stage context for it.

Each stage has its own module here (as Hadoop has a test class per stage), so a failure
names the stage. A job's earlier stages are run through the public API or the stages
before the one under test."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from aiocommit.committers.common.context import StageContext
from aiocommit.committers.common.session import new_statistics, open_context
from aiocommit.committers.manifest.load_manifests import (
    LoadedJob,
    list_manifest_names,
    load_manifests_stage,
)
from aiocommit.options import CommitOptions
from aiocommit.stores.base import Store
from aiocommit.stores.memory import MemoryStore
from tests.helpers import run_tasks

_names = itertools.count(1)


@dataclass
class Job:
    """A set-up job with committed tasks: what its commit must produce."""

    store: Store
    dest: str
    job_id: str
    expected: dict[str, bytes]

    @asynccontextmanager
    async def context(self, options: CommitOptions | None = None) -> AsyncIterator[StageContext]:
        async with open_context(
            self.dest, self.job_id, store=self.store, options=options
        ) as context:
            yield context


def memory_store() -> MemoryStore:
    return MemoryStore(f"stages-{next(_names)}", page_size=7)


@pytest.fixture
async def job() -> Job:
    """Three committed tasks of four files each, in three partitions."""
    store = memory_store()
    job_id, expected = await run_tasks(store, "/out", tasks=3, files_per_task=4)
    return Job(store, "/out", job_id, expected)


async def load(context: StageContext) -> LoadedJob:
    """The job's manifests, loaded (the caller closes the result)."""
    names = await list_manifest_names(context)
    return await load_manifests_stage(context, names, new_statistics())
