"""A ``progress=`` callback can never break a commit: its exceptions are logged once,
with its name, and ignored; the commit completes."""

from __future__ import annotations

import logging

import pytest

from aiocommit import CommitOptions, Progress, abort_job, commit_job
from aiocommit.stores.base import Store, join
from tests.engine.test_job_identity import committers
from tests.helpers import output, run_tasks


class BrokenBar:
    """A progress display that fails on every report."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, event: Progress) -> None:
        self.calls += 1
        raise RuntimeError("the terminal went away")


async def test_a_raising_callback_does_not_stop_the_commit(
    any_store_root: tuple[Store, str], caplog: pytest.LogCaptureFixture
) -> None:
    store, root = any_store_root
    for committer in committers(store):
        dest = join(root, f"out-{committer}")
        options = CommitOptions(committer=committer)
        job_id, expected = await run_tasks(store, dest, 3, 4, setup=options)
        bar = BrokenBar()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="aiocommit"):
            summary = await commit_job(dest, job_id, store=store, progress=bar)
        assert summary.success, committer
        assert await output(store, dest) == expected
        assert bar.calls >= 2, "the callback is still called after it raised"
        logged = [r for r in caplog.records if "progress callback" in r.getMessage()]
        assert len(logged) == 1, committer
        assert "BrokenBar" in logged[0].getMessage()


async def test_a_raising_callback_does_not_stop_an_abort(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, 2, 3)
    assert await abort_job(dest, job_id, store=store, progress=BrokenBar()) == []
    assert await output(store, dest) == {}
