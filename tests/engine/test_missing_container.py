"""Issue 37 item 9 in the library: a job call on a missing S3 bucket, ADLS filesystem or
GCS bucket raises one typed, one-line error naming it (the CLI's message), on the
emulators."""

from __future__ import annotations

import pytest

from aiocommit import ContainerNotFound, JobNotFound, abort_job, commit_job
from aiocommit.stores.base import Store
from tests.cli.test_cloud_errors import _missing_container_url
from tests.cli.test_conflict_mode import _cli_env


async def test_a_missing_bucket_or_filesystem_is_named(
    cloud_store_root: tuple[Store, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = cloud_store_root
    _cli_env(store, monkeypatch)  # stores opened from URLs reach the emulator
    url, named = _missing_container_url(store)
    for call in (commit_job, abort_job):
        with pytest.raises(ContainerNotFound) as caught:
            await call(url, "job_202611270000_0001")
        message = str(caught.value)
        assert f"{named} does not exist" in message, message
        assert "\n" not in message and url.rpartition("/")[0] in message, message
        assert isinstance(caught.value, FileNotFoundError)


async def test_an_unknown_job_in_an_existing_bucket_is_still_job_not_found(
    cloud_store_root: tuple[Store, str],
) -> None:
    store, root = cloud_store_root
    with pytest.raises(JobNotFound):
        await commit_job(f"{root}/out", "job_202611270000_0001", store=store)
