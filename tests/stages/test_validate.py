"""``validate_output_stage``: every destination holds its manifest's file."""

from __future__ import annotations

import pytest

from aiocommit.committers.manifest.create_dirs import create_directories_stage
from aiocommit.committers.manifest.rename_files import rename_files_stage
from aiocommit.committers.manifest.validate import validate_output_stage
from aiocommit.errors import CommitError
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import join
from tests.stages.conftest import Job, load


@pytest.mark.parametrize("change", [None, "size", "missing"])
async def test_validation(job: Job, change: str | None) -> None:
    async with job.context() as context:
        loaded = await load(context)
        try:
            await create_directories_stage(context, loaded.directories)
            await rename_files_stage(context, loaded)
            victim = join(job.dest, sorted(job.expected)[5])
            if change == "size":
                await job.store.write_bytes(victim, b"a different length")
            elif change == "missing":
                await job.store.delete(victim)
            if change is None:
                await validate_output_stage(context, loaded)
                return
            with pytest.raises(CommitError) as caught:
                await validate_output_stage(context, loaded)
        finally:
            loaded.close()
    assert caught.value.stage == S.JOB_STAGE_VALIDATE_OUTPUT
    assert caught.value.path == job.store.qualify(victim)
    assert ("missing" in str(caught.value)) == (change == "missing")
