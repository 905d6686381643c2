"""What jobs are under ``DEST/_temporary``: their attempts, manifests, size, age, state
(read by the library's ``list_jobs``), and small store helpers for the commands."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from aiocommit.cli.exits import EXIT_NOT_FOUND, Problem
from aiocommit.client.jobs import JobInfo, list_jobs
from aiocommit.errors import ManifestError, NotFound, StoreError
from aiocommit.io.retry import RetryPolicy
from aiocommit.options import CommitOptions
from aiocommit.protocol.layout import (
    SUCCESS,
)
from aiocommit.protocol.success import SuccessData, decode_success
from aiocommit.stores.base import Store, join
from aiocommit.stores.base import missing_container as probe_container

T = TypeVar("T")


async def retried(call: Callable[[], Awaitable[T]], policy: RetryPolicy | None = None) -> T:
    """``call()`` (a read of the command's own, outside the library's store-call door)
    retried as the door retries: on a throttle or a transient error, with backoff that
    honours Retry-After, within ``policy``'s attempts and budget; any other error (or
    the last) is raised at once."""
    policy = policy or RetryPolicy()
    started = policy.clock()
    attempt, delay = 0, 0.0
    while True:
        attempt += 1
        try:
            return await call()
        except StoreError as error:
            wait = policy.next_delay(error, attempt, delay, started)
            if wait is None:
                raise
            delay = min(wait, policy.growth_bound(delay))  # Retry-After: a floor only
            await anyio.sleep(wait)


async def children(store: Store, path: str) -> list[Any]:
    async def listing() -> list[Any]:
        found: list[Any] = []
        async for page in store.list_dir(path):
            found.extend(page)
        return found

    try:
        return await retried(listing)
    except NotFound:
        return []


async def exists(store: Store, path: str) -> bool:
    try:
        await retried(lambda: store.stat(path))
    except NotFound:
        return False
    return True


async def read_dest_success(store: Store, dest: str) -> SuccessData | None:
    """``DEST/_SUCCESS`` if it is there and readable."""
    try:
        data = await retried(lambda: store.read_bytes(join(dest, SUCCESS)))
        return decode_success(data, path=join(dest, SUCCESS))
    except (NotFound, ManifestError):
        return None


def read_policy(options: CommitOptions) -> RetryPolicy:
    """The retry policy of a command's own reads: the options' ``retry`` group, as the
    library's store-call door uses it."""
    retry = options.retry
    return RetryPolicy(
        max_attempts=retry.max_attempts,
        budget_seconds=retry.budget_seconds,
        base_delay=retry.base_delay,
        max_delay=retry.max_delay,
    )


async def require_dir(store: Store, path: str, policy: RetryPolicy | None = None) -> None:
    try:
        status = await retried(lambda: store.stat(path), policy)
    except NotFound:
        missing = await missing_container(store)
        raise Problem(
            EXIT_NOT_FOUND, f"{store.qualify(path)}: {missing or 'no such directory'}"
        ) from None
    if not status.is_dir:
        raise Problem(EXIT_NOT_FOUND, f"{store.qualify(path)}: not a directory")


#: ``cleanup --all`` keeps a job not known finished until it is this old (seconds)
MIN_AGE = 3600.0
#: states after which nothing writes into a job's directory any more
FINISHED = ("committed", "aborted")


def too_recent(
    job: JobInfo, age: float | None, *, all_jobs: bool, min_age: float | None, force: bool
) -> bool:
    """Whether ``cleanup --all`` keeps ``job``: not known finished, and younger than
    ``min_age`` (``MIN_AGE`` by default) or of unknown age, without ``--force``. A job
    named by ``--job-id`` or chosen by ``--older-than`` is the user's explicit choice."""
    if not all_jobs or force or job.state in FINISHED:
        return False
    limit = MIN_AGE if min_age is None else min_age
    if limit <= 0:
        return False
    return age is None or age < limit


async def scan_jobs(store: Store, dest: str, options: CommitOptions) -> list[JobInfo]:
    """Every job under ``DEST/_temporary`` with its state from its durable record
    (``aiocommit.list_jobs``), oldest first (unknown ages last); every read made with
    ``options`` (its retries and limits)."""
    await require_dir(store, dest, read_policy(options))
    return await list_jobs(dest, store=store, options=options)


async def missing_container(store: Store) -> str | None:
    """What is missing when a path of a cloud store is not found and its bucket or
    filesystem is not there either (``bucket 'x' does not exist``); None otherwise."""
    return await retried(lambda: probe_container(store))
