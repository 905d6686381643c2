"""Issue 37 item 9: a cloud error names what is missing (the bucket, the ADLS
filesystem, the credential variable), through the real ``aiocommit`` process."""

from __future__ import annotations

import os
import time

import anyio
import anyio.to_thread
import pytest

from aiocommit.stores.base import Store
from tests.cli.test_conflict_mode import _cli_env
from tests.cli.test_subprocess import aiocommit


def _missing_container_url(store: Store) -> tuple[str, str]:
    """A URL on the store's emulator whose bucket / filesystem does not exist, and the
    word the error must use for it."""
    qualified = store.qualify("/out")
    scheme, _, rest = qualified.partition("://")
    container, _, tail = rest.partition("/")
    if scheme.startswith("abfs"):
        account = container.partition("@")[2]
        return f"{scheme}://no-such-fs@{account}/{tail}", "filesystem 'no-such-fs'"
    return f"{scheme}://no-such-bucket/{tail}", "bucket 'no-such-bucket'"


@pytest.mark.parametrize("command", ["jobs", "show"])
async def test_a_missing_bucket_or_filesystem_is_named(
    cloud_store_root: tuple[Store, str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    store, _ = cloud_store_root
    _cli_env(store, monkeypatch)
    url, named = _missing_container_url(store)
    # the ADLS emulator answers on this event loop: the process runs from a thread
    result = await anyio.to_thread.run_sync(lambda: aiocommit(command, url))
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aiocommit: error: "), result.stderr
    assert f"{named} does not exist" in lines[0], lines[0]


def test_gcs_without_credentials_fails_fast_naming_the_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    for name in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud ADC file there
    started = time.monotonic()
    result = aiocommit("jobs", "gs://some-bucket/out")
    assert time.monotonic() - started < 5
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "GOOGLE_APPLICATION_CREDENTIALS" in line and "STORAGE_EMULATOR_HOST" in line
    assert "metadata.google.internal" not in line
    assert os.environ.get("STORAGE_EMULATOR_HOST") is None
