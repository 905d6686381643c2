"""``aiocommit commit --conflict-mode``: replace and fail from a shell, on every store;
``aiocommit abort`` of a failed replace restores the old output or names every old file
it cannot restore."""

from __future__ import annotations

import functools

import anyio.to_thread
import pytest

from aiocommit import CommitOptions, commit_job
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit_testing.adls_emulator import DEFAULT_KEY
from tests.cli.conftest import Cli, Dest, one_error_line
from tests.helpers import exists, output, run_tasks


def test_replace_and_fail(cli: Cli, dest: Dest) -> None:
    old_job, _ = dest.job(tasks=3, files=4)
    dest.commit(old_job)
    old = dest.output()
    job_id, _ = dest.job(tasks=1, files=2)
    refused = cli("commit", dest.url, "--job-id", job_id, "--conflict-mode", "fail")
    assert refused.exit_code == 1
    assert "conflict mode is 'fail'" in one_error_line(refused)
    assert dest.output() == old
    result = cli("commit", dest.url, "--job-id", job_id, "--conflict-mode", "REPLACE")
    assert result.exit_code == 0, result.output
    assert sorted(dest.output()) == ["part=0/part-00000-0000.dat", "part=1/part-00000-0001.dat"]
    assert not dest.exists("_temporary")
    bad = cli("commit", dest.url, "--job-id", job_id, "--conflict-mode", "merge")
    assert bad.exit_code == 2 and "'merge' is not one of" in bad.stderr


def test_hadoop_name_and_partitions(cli: Cli, dest: Dest) -> None:
    old_job, _ = dest.job(tasks=2, files=3)
    dest.commit(old_job)
    old = dest.output()
    job_id, _ = dest.job(tasks=1, files=1, job_id=None)  # writes part=0 only
    option = "spark.hadoop.fs.s3a.committer.staging.conflict-mode=replace"
    result = cli("commit", dest.url, "--job-id", job_id, "-o", option, "--replace-partitions")
    assert result.exit_code == 0, result.output
    kept = {k: v for k, v in old.items() if not k.startswith("part=0/")}
    assert dest.output() == {**kept, "part=0/part-00000-0000.dat": b"task 0 n0"}


def _cli_env(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the CLI's own store clients (opened from URLs) at the test's emulator."""
    endpoint = getattr(store, "endpoint_url", None)
    if endpoint:  # S3
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    api_root = getattr(store, "api_root", None)
    if api_root:  # GCS
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", api_root)
    adls = getattr(store, "_endpoint", None)
    if adls and hasattr(store, "credential_kind"):  # ADLS Gen2
        monkeypatch.setenv("AIOCOMMIT_ADLS_ENDPOINT", adls)
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", DEFAULT_KEY)
        monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)


async def _old_and_new(
    store: Store, root: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, dict[str, bytes], str, dict[str, bytes]]:
    """A committed job's output in ``ROOT/out`` and a set-up job to write over it, the
    CLI pointed at the store: (the destination, old output, the new job's ID, its
    output)."""
    dest = join(root, "out")
    _cli_env(store, monkeypatch)
    old_job, old = await run_tasks(store, dest, tasks=2, files_per_task=4)
    await commit_job(dest, old_job, store=store)
    job_id, new = await run_tasks(store, dest, tasks=1, files_per_task=2)
    return dest, old, job_id, new


async def test_replace_on_cloud_stores(
    cli: Cli, cloud_store_root: tuple[Store, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dest, _, job_id, new = await _old_and_new(*cloud_store_root, monkeypatch)
    store = cloud_store_root[0]
    url = store.qualify(dest)
    run = functools.partial(cli, "commit", url, "--job-id", job_id, "--no-progress")
    result = await anyio.to_thread.run_sync(run, "--conflict-mode", "replace")
    assert result.exit_code == 0, result.output
    assert await output(store, dest) == new
    assert not await exists(store, join(dest, "_temporary"))


async def test_abort_names_what_it_cannot_restore(
    cli: Cli, cloud_store_root: tuple[Store, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dest, old, job_id, new = await _old_and_new(*cloud_store_root, monkeypatch)
    store = cloud_store_root[0]
    victim = sorted(set(old) - set(new))[-1]  # an old file no new one lands on
    failing = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op in ("rename", "delete") and path.endswith(victim)),
    )
    with pytest.raises(Exception, match="injected"):
        await commit_job(
            dest,
            job_id,
            store=failing,
            options=CommitOptions(conflict_mode="replace", max_attempts=1, concurrency=2),
        )
    abort = functools.partial(cli, "abort", store.qualify(dest), "--job-id", job_id)
    result = await anyio.to_thread.run_sync(abort)
    assert result.exit_code == 0, result.output
    assert f"job {job_id} aborted" in result.stdout
    if store.capabilities.atomic_rename:
        assert await output(store, dest) == old
        assert "cannot be restored" not in result.stderr
    else:  # every old file that is gone is named, and only those
        left = await output(store, dest)
        assert victim in left and left == {f: old[f] for f in left}
        named = [line.strip() for line in result.stderr.splitlines() if line.startswith("  ")]
        # the old _SUCCESS was set aside, not replaced: abort puts it back
        assert await exists(store, join(dest, "_SUCCESS"))
        gone = [f for f in old if f not in left]
        assert sorted(named) == sorted(store.qualify(join(dest, f)) for f in gone)
        assert f"{len(gone)} old file(s) were deleted" in result.stderr
