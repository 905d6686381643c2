"""One error root: every public entry point, given bad input, raises an ``AiocommitError``
(a service writes one ``except``), and nothing is created or changed."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError

import aiocommit
from aiocommit import (
    AiocommitError,
    CommitOptions,
    LocalStore,
    MemoryStore,
    PermissionDenied,
    abort_job,
    abort_task,
    cleanup_job,
    commit_job,
    commit_task,
    committed_name,
    job_info,
    list_jobs,
    open_store,
    setup_job,
    setup_task,
    task_attempt,
)
from aiocommit.errors import InvalidInput, MissingExtra, UnknownOption
from aiocommit.stores.adls import AdlsStore

JOB = "job_202611240000_0001"
BAD_JOB_IDS = ("../../etc", "a/b", ".", "x\x00y")


def call(function: Any, *args: Any, **kwargs: Any) -> Callable[[], Any]:
    """A call with arguments the type checker would refuse: that is the point."""
    return functools.partial(function, *args, **kwargs)


def _bad_calls(dest: str) -> dict[str, list[Callable[[], Any]]]:
    """Per public callable: calls with bad arguments (ID, URL, options, numbers)."""
    attempt = task_attempt(dest, dest, JOB, f"task_{JOB[4:]}_m_000000", f"attempt_{JOB[4:]}_m_0_0")
    foreign = dataclasses.replace(attempt, dest="foo://bucket/out")
    calls: dict[str, list[Callable[[], Any]]] = {}
    for op in (setup_job, commit_job, abort_job, cleanup_job, job_info):
        calls[op.__name__] = [
            *(call(op, dest, bad) for bad in BAD_JOB_IDS),
            call(op, "foo://bucket/out", JOB),
            call(op, dest, 17),
        ]
    for op in (setup_job, commit_job, abort_job, cleanup_job):
        calls[op.__name__] += [
            call(op, dest, JOB, options={"concurrency": 8}),
            call(op, dest, JOB, attempt=-1),
        ]
    calls["list_jobs"] = [
        call(list_jobs, "foo://bucket/out"),
        call(list_jobs, dest, options="fast"),
        call(list_jobs, ""),
    ]
    calls["setup_task"] = [
        call(setup_task, dest, "../../etc", 0),
        call(setup_task, dest, JOB, -1),
        call(setup_task, dest, JOB, "../x"),
        call(setup_task, dest, JOB, 0, "../../y"),
        call(setup_task, "foo://bucket/out", JOB, 0),
    ]
    calls["task_attempt"] = [
        call(task_attempt, dest, dest, "../../etc", 0),
        call(task_attempt, dest, dest, JOB, -3),
        call(task_attempt, dest, dest, JOB, 0, True),
    ]
    calls["commit_task"] = [
        call(commit_task, foreign),
        call(commit_task, attempt, options={"concurrency": 8}),
    ]
    calls["abort_task"] = [call(abort_task, foreign)]
    calls["Client"] = [
        call(aiocommit.Client, 42),
        call(aiocommit.Client, dest, options={"concurrency": 8}),
        call(aiocommit.Client, "foo://bucket/out"),
        call(aiocommit.Client, dest, limits=8),
        call(aiocommit.Client, dest, settings={"fs.s3a.endpoint": 1}),
        call(lambda: aiocommit.Client(dest).job("")),
    ]
    calls["open_store"] = [
        call(open_store, "foo://bucket/x"),
        call(open_store, ""),
        call(open_store, "file://remote-host/x"),
    ]
    calls["CommitOptions"] = [
        call(CommitOptions, concurrency="64"),
        call(CommitOptions, concurrency=0),
        call(CommitOptions, validate_output="yes"),
        call(CommitOptions, retry_budget_seconds=-1),
        call(CommitOptions, retry_base_delay=-1),
        call(CommitOptions, min_concurrency=5000),
        call(CommitOptions, rate_limit=0),
        call(CommitOptions, concurency=64),
        call(CommitOptions.from_mapping, {"aiocommit.concurency": "64"}),
        call(CommitOptions.from_mapping, {"concurrency": "many"}),
        call(CommitOptions.from_mapping, {"validate-output": "maybe"}),
        call(CommitOptions.from_mapping, {}, processes=-1),
    ]
    calls["CommitOptions"] += [
        call(CommitOptions, committer="rename"),
        call(CommitOptions, conflict_mode="merge"),
        call(CommitOptions, part_size=1),
        call(CommitOptions, part_size="8M"),
        call(CommitOptions.from_mapping, {"fs.s3a.multipart.size": "lots"}),
        call(CommitOptions.from_mapping, {"fs.s3a.access.key": "AK"}),
    ]
    calls["committed_name"] = [call(committed_name, "attempt_1"), call(committed_name, None)]
    calls["LocalStore"] = [call(LocalStore, page_size=0), call(LocalStore, threads="8")]
    calls["MemoryStore"] = [call(MemoryStore, "a/b"), call(MemoryStore, page_size=-1)]
    return calls


async def _raised(function: Callable[[], Any]) -> BaseException | None:
    try:
        result = function()
        if isinstance(result, Awaitable):
            await result
    except BaseException as error:
        return error
    return None


def _names(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*"))


#: public callables that are data, not entry points: building one with bad fields is the
#: caller's own type error (they are what the library returns), so they are not walked
DATA_TYPES = {
    "AttemptFile",  # the protocol of what attempt.open yields
    "Committer",  # the interface a committer implements
    "FileStatus",
    "Job",  # what Client.job returns
    "JobInfo",
    "Limits",  # what a client holds, to share with another
    "PendingSet",
    "Progress",
    "Store",
    "SuccessData",
    "TaskAttempt",
    "TaskManifest",
    "new_job_id",  # takes no arguments
}


def _entry_points() -> list[str]:
    names = []
    for name in aiocommit.__all__:
        value = getattr(aiocommit, name)
        if not callable(value) or name in DATA_TYPES:
            continue
        if inspect.isclass(value) and issubclass(value, BaseException):
            continue
        names.append(name)
    return names


def test_every_entry_point_is_walked(tmp_path: Path) -> None:
    """A public callable added later without bad-input cases fails here."""
    assert sorted(_bad_calls(str(tmp_path))) == sorted(_entry_points())


@pytest.mark.parametrize("name", _entry_points())
async def test_bad_input_raises_an_aiocommit_error(name: str, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    dest.mkdir()
    before = _names(tmp_path)
    for index, bad in enumerate(_bad_calls(str(dest))[name]):
        error = await _raised(bad)
        assert isinstance(error, AiocommitError), (name, index, bad, error)
        assert not isinstance(error, MissingExtra), (name, index)
        assert str(error), (name, index)
    assert _names(tmp_path) == before  # nothing created


def test_input_errors_keep_value_error() -> None:
    """``except ValueError`` written before the root still catches bad input."""
    for error in (InvalidInput, UnknownOption):
        assert issubclass(error, ValueError) and issubclass(error, AiocommitError)
    with pytest.raises(ValueError, match="concurrency must be int, not '64'"):
        CommitOptions(concurrency="64")
    with pytest.raises(UnknownOption, match="did you mean 'concurrency'"):
        CommitOptions(concurency=64)


def test_option_relations_are_checked() -> None:
    with pytest.raises(InvalidInput, match=r"min_concurrency \(5000\) must not exceed"):
        CommitOptions(min_concurrency=5000)
    with pytest.raises(InvalidInput, match=r"retry.base_delay \(30.0\) must not exceed"):
        CommitOptions(retry_base_delay=30, retry_max_delay=10)
    # a default floor yields to a small limit, and an int is a float
    assert CommitOptions(concurrency=2).min_concurrency == 4
    assert CommitOptions(retry_max_delay=0.01).retry_base_delay == 0.05
    assert CommitOptions(retry_budget_seconds=5).retry_budget_seconds == 5.0
    assert isinstance(CommitOptions(retry_budget_seconds=5).retry_budget_seconds, float)


def test_missing_extra_names_the_pip_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiobotocore not installed: an AiocommitError (and ImportError) with the hint."""
    for name in [*sys.modules, "aiobotocore"]:  # as if never installed, submodules too
        if name == "aiobotocore" or name.startswith("aiobotocore."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "aiocommit.stores.s3", raising=False)
    with pytest.raises(MissingExtra) as raised:
        open_store("s3://bucket/out")
    assert isinstance(raised.value, AiocommitError) and isinstance(raised.value, ImportError)
    assert raised.value.extra == "s3"
    assert "pip install 'aiocommit[s3]'" in str(raised.value)
    assert "aiobotocore" in str(raised.value)


class _NoCredential:
    """An async token credential that cannot get a token, as ``DefaultAzureCredential``
    is without any credential in the environment."""

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        raise ClientAuthenticationError("no credential in this environment")

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> _NoCredential:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


async def test_adls_without_credentials_is_permission_denied() -> None:
    """The token is asked for before any request: the SDK's error is translated at the
    edge, for the lean path (stat, list) as for the SDK's."""
    store = AdlsStore(
        "acct", "fs", endpoint="https://127.0.0.1:9/acct", token_credential=_NoCredential()
    )
    try:
        with pytest.raises(PermissionDenied, match="no credential in this environment"):
            await list_jobs("/out", store=store)
        with pytest.raises(AiocommitError):
            await store.stat("/out")
    finally:
        await store.aclose()


@pytest.mark.slow
def test_cli_adls_without_credentials_is_one_line(tmp_path: Path) -> None:
    """``aiocommit jobs|show|abort|cleanup abfss://…`` without a credential: one line,
    exit 1, no traceback (DefaultAzureCredential finds nothing in this environment)."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "IDENTITY_", "MSI_"))}
    env["AIOCOMMIT_ADLS_ENDPOINT"] = "https://127.0.0.1:9/acct"
    env["HOME"] = str(tmp_path)  # no Azure CLI / developer CLI login either
    url = "abfss://fs@acct.dfs.core.windows.net/out"
    for args in (
        ["jobs", url],
        ["show", url],
        ["abort", url, "--job-id", JOB],
        ["cleanup", url, "--all"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "aiocommit", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 1, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("aiocommit: error: "), (args, lines)
        assert "denied using DefaultAzureCredential" in lines[0]
