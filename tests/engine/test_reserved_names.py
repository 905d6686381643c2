"""A task may not write what the commit protocol keeps for itself (``_SUCCESS``,
``_temporary/...``, ``__magic...``, the destination's lease): refused at the write, with
one ``InvalidInput`` line, whatever the committer and store; nothing of it reaches the
destination."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocommit import (
    CommitOptions,
    InvalidInput,
    ReservedName,
    commit_job,
    commit_task,
    setup_job,
    setup_task,
)
from aiocommit.stores.base import Store, join
from tests.engine.test_job_identity import committers
from tests.helpers import output

RESERVED = [
    "_SUCCESS",
    "_temporary/x.csv",
    "_temporary",
    "__magic/x.csv",
    "p=1/__magic/x.csv",
    "__magic_job-job_1_1/x.csv",
    "_aiocommit.lease",
    "_aiocommit.lease.claim-abc",
]


@pytest.mark.parametrize("name", RESERVED)
async def test_a_reserved_name_is_refused_at_the_write(
    any_store_root: tuple[Store, str], tmp_path: Path, name: str
) -> None:
    store, root = any_store_root
    local = tmp_path / "local.csv"
    local.write_bytes(b"local")
    for committer in committers(store):
        dest = join(root, f"out-{committer}")
        job_id = await setup_job(dest, store=store, options=CommitOptions(committer=committer))
        attempt = await setup_task(dest, job_id, 0, store=store)
        with pytest.raises(ReservedName) as refused:
            await attempt.write_bytes(name, b"sneaky", store=store)
        assert isinstance(refused.value, InvalidInput)
        assert name in str(refused.value) and "\n" not in str(refused.value)
        with pytest.raises(ReservedName):
            await attempt.write_file(name, str(local), store=store)
        with pytest.raises(ReservedName):
            async with attempt.open(name, store=store) as file:
                await file.write(b"sneaky")
        with pytest.raises(ReservedName):
            attempt.path(name)
        # names that only look alike are output like any other
        await attempt.write_bytes("p=1/_SUCCESS", b"nested", store=store)
        await attempt.write_bytes("_SUCCESS.csv", b"like", store=store)
        await commit_task(attempt, store=store)
        summary = await commit_job(dest, job_id, store=store)
        assert summary.success and summary.job_id == job_id  # _SUCCESS is the job's own
        assert await output(store, dest) == {"p=1/_SUCCESS": b"nested", "_SUCCESS.csv": b"like"}
