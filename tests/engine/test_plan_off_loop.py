"""Issue 37 item 11: a large commit plan is encoded off the caller's event loop."""

from __future__ import annotations

import threading

import pytest

from aiocommit import commit_job
from aiocommit.committers.common import commit_plan
from aiocommit.stores.local import LocalStore
from tests.helpers import run_tasks


async def test_a_large_plan_is_encoded_in_a_worker_thread(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded_on: list[str] = []
    encode = commit_plan.encode_plan

    def recording(plan: commit_plan.CommitPlan) -> bytes:
        encoded_on.append(threading.current_thread().name)
        return encode(plan)

    # every plan counts as large: 3 manifests and their copies are 6 entries
    monkeypatch.setattr(commit_plan, "PLAN_ENCODE_THREAD_FROM", 1)
    monkeypatch.setattr(commit_plan, "encode_plan", recording)
    dest = f"{tmp_path}/out"
    store = LocalStore()
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=2)
    summary = await commit_job(dest, job_id, store=store)
    assert summary.success
    loop_thread = threading.current_thread().name
    assert encoded_on and loop_thread not in encoded_on, encoded_on


async def test_a_small_plan_is_encoded_in_place() -> None:
    plan = commit_plan.CommitPlan(job_id="job_1_0001", manifests={"a": "b"})
    assert await commit_plan.encode_plan_off_loop(plan) == commit_plan.encode_plan(plan)
