"""``aiocommit jobs`` reads with the options it is given (its retries), through the real
``aiocommit`` process against the ADLS emulator."""

from __future__ import annotations

import functools
import json

import anyio
import pytest

from aiocommit.stores.adls import AdlsStore
from aiocommit.stores.base import join
from aiocommit_testing.adls_emulator import DEFAULT_KEY, run_adls_emulator
from tests.cli.test_subprocess import aiocommit
from tests.helpers import run_tasks

pytestmark = [pytest.mark.emulator]


async def test_jobs_reads_with_the_given_retry_options(monkeypatch: pytest.MonkeyPatch) -> None:
    async with run_adls_emulator() as emulator:
        emulator.create_filesystem("listed")
        store = AdlsStore(
            emulator.account, "listed", endpoint=emulator.endpoint, account_key=emulator.key
        )
        try:
            dest = join("/root", "pending")
            job_id, _ = await run_tasks(store, dest, tasks=2, files_per_task=3)
        finally:
            await store.aclose()
        monkeypatch.setenv("AIOCOMMIT_ADLS_ENDPOINT", emulator.endpoint)
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", DEFAULT_KEY)
        monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
        url = store.qualify(dest)

        async def jobs(*args: str) -> tuple[int, str, str]:
            result = await anyio.to_thread.run_sync(functools.partial(aiocommit, "jobs", *args))
            return result.returncode, result.stdout, result.stderr

        # three listings in a row answered 503: two attempts give up, the default retries
        emulator.faults.inject(503, "ServerBusy", operation="list", times=3)
        code, _, err = await jobs(url, "--json", "--max-attempts", "2")
        assert code != 0, "two attempts cannot get past three 503s"
        assert "Traceback" not in err and "busy" in err.lower(), err
        emulator.faults.clear()
        emulator.faults.inject(503, "ServerBusy", operation="list", times=3)
        code, out, err = await jobs(url, "--json")
        assert code == 0, err
        assert [job["job_id"] for job in json.loads(out)] == [job_id]
