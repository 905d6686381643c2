"""Issue 37 item 4: the commands' first reads are retried on throttles, through the real
``aiocommit`` process against the ADLS emulator answering 30 % of requests
``503 ServerBusy``."""

from __future__ import annotations

import functools

import anyio
import pytest

from aiocommit import commit_job
from aiocommit.stores.adls import AdlsStore
from aiocommit.stores.base import join
from aiocommit_testing.adls_emulator import DEFAULT_KEY, run_adls_emulator
from tests.cli.test_subprocess import aiocommit
from tests.helpers import run_tasks

pytestmark = [pytest.mark.emulator, pytest.mark.slow]  # 16 CLI processes


async def test_jobs_and_show_are_retried_on_throttles(monkeypatch: pytest.MonkeyPatch) -> None:
    async with run_adls_emulator() as emulator:
        emulator.create_filesystem("reads")
        store = AdlsStore(
            emulator.account, "reads", endpoint=emulator.endpoint, account_key=emulator.key
        )
        try:
            done = join("/root", "done")
            job_id, _ = await run_tasks(store, done, tasks=2, files_per_task=3)
            await commit_job(done, job_id, store=store)
            pending = join("/root", "pending")
            await run_tasks(store, pending, tasks=2, files_per_task=3)
        finally:
            await store.aclose()
        monkeypatch.setenv("AIOCOMMIT_ADLS_ENDPOINT", emulator.endpoint)
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", DEFAULT_KEY)
        monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
        emulator.faults.retry_after_seconds = None
        emulator.faults.throttle_probability = 0.3
        runs = [("jobs", store.qualify(pending))] * 10 + [("show", store.qualify(done))] * 6
        failed = []
        for args in runs:
            result = await anyio.to_thread.run_sync(functools.partial(aiocommit, *args))
            if result.returncode != 0 or "Traceback" in result.stderr:
                failed.append(f"{args[0]}: rc {result.returncode}: {result.stderr.strip()}")
        stats = dict(emulator.stats)
    throttled = sum(count for key, count in stats.items() if "503" in key)
    assert not failed, failed
    assert throttled >= 5, stats
