"""The Spark write protocol on S3 (``s3://``, ``s3a://``): the zero-rename committers.

``committer.py`` hands a write here when its destination is on S3. Same four steps, same
commit messages (``manifest`` names the attempt's pending set):

* ``prepare``: ``setup_s3_job``;
* ``commit_task``: staging (default) uploads the task's closed local files as uncompleted
  multipart uploads and saves ``ATTEMPT.pendingset``; magic uploads each file to the
  job's ``__magic`` path (``.pending`` + marker) and collects them at task commit;
* ``commit``: ``commit_s3_job`` with exactly the pending sets the messages name (a losing
  speculative or failed attempt's uploads are aborted by the job's cleanup);
* ``abort``: ``abort_s3_job``.

Spark's save modes map to conflict modes: append is ``append``; overwrite is ``replace``
of the whole destination, or of the written partitions with
``partitionOverwriteMode=dynamic`` (the partitioned committer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import anyio

from aiocommit.engine.zero_rename import (
    S3CommitterOptions,
    abort_s3_job,
    commit_magic_task,
    commit_s3_job,
    commit_staging_task,
    s3_task_attempt,
    setup_magic_task,
    setup_s3_job,
    write_magic_file,
)
from aiocommit.integrations.spark.files import LocalFile
from aiocommit.integrations.spark.settings import WriteSettings
from aiocommit.protocol.pending import PENDINGSET_SUFFIX
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store
from aiocommit.stores.faulty import Faults, FaultyStore

SCHEMES = ("s3", "s3a")


class PendingResult(Protocol):
    @property
    def manifest(self) -> str: ...


def is_zero_rename(settings: WriteSettings) -> bool:
    """Does this write go to S3, and so through the zero-rename committers?"""
    return settings.url.split("://", 1)[0].lower() in SCHEMES and "://" in settings.url


def committer_options(settings: WriteSettings, overwriting: bool) -> S3CommitterOptions:
    if not overwriting:
        return S3CommitterOptions(
            committer=settings.committer,
            conflict_mode="append",
            partitioned=bool(settings.partition_by),
        )
    dynamic = settings.partition_overwrite_mode == "dynamic" and bool(settings.partition_by)
    return S3CommitterOptions(
        committer=settings.committer, conflict_mode="replace", partitioned=dynamic
    )


def _open(settings: WriteSettings, fault: tuple[str, str] | None = None) -> tuple[Store, str]:
    """The S3 store of the destination, configured by the write's ``fs.s3a.*`` options."""
    from aiocommit.stores.s3 import S3Store  # the s3 extra, needed only for S3 writes

    scheme, _, rest = settings.url.partition("://")
    bucket, slash, tail = rest.partition("/")
    store: Store = S3Store(bucket, scheme=scheme.lower(), options=settings.s3a)
    path = "/" + tail if slash else "/"
    if fault is not None:
        operation, fragment = fault
        store = FaultyStore(
            store, Faults(fail_paths=lambda op, target: op == operation and fragment in target)
        )
    return store, path.rstrip("/") or "/"


async def prepare(settings: WriteSettings, job_id: str) -> None:
    store, dest = _open(settings)
    try:
        await setup_s3_job(dest, job_id, store=store, options=settings.commit)
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def commit_task(
    settings: WriteSettings,
    job_id: str,
    *,
    partition: int,
    attempt_number: int,
    files: Sequence[LocalFile],
    fail_after_upload: bool,
) -> str:
    """Upload a task attempt's files, uncompleted, and save its pending set; returns the
    pending set's name. ``fail_after_upload`` (a test hook) makes the attempt die after
    its uploads, before its pending set is saved."""
    store, dest = _open(settings)
    s3_options = committer_options(settings, overwriting=False)
    try:
        if settings.committer == "magic":
            attempt = await setup_magic_task(
                dest, job_id, partition, attempt_number, store=store, options=settings.commit
            )
            for local in files:
                await write_magic_file(
                    attempt,
                    local.relative,
                    local_path=local.local_path,
                    store=store,
                    options=settings.commit,
                    s3_options=s3_options,
                )
            if fail_after_upload:
                raise RuntimeError(
                    f"aiocommit.test hook: partition {partition} attempt {attempt_number} "
                    "fails after uploading"
                )
            await commit_magic_task(attempt, store=store, options=settings.commit, per_attempt=True)
        else:
            attempt = s3_task_attempt(dest, job_id, partition, attempt_number, store=store)
            target: Store = store
            if fail_after_upload:  # the pending set's write fails: the uploads are done
                target = FaultyStore(
                    store,
                    Faults(
                        fail_paths=lambda op, path: op == "write_bytes" and "pendingset" in path
                    ),
                )
            await commit_staging_task(
                attempt,
                store=target,
                options=settings.commit,
                s3_options=s3_options,
                files=[(f.relative, f.local_path) for f in files],
                per_attempt=True,
            )
        return attempt.task_attempt_id + PENDINGSET_SUFFIX
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def commit_write(
    settings: WriteSettings, job_id: str, overwriting: bool, results: Sequence[PendingResult]
) -> SuccessData:
    store, dest = _open(settings, settings.hooks.commit_fault)
    try:
        return await commit_s3_job(
            dest,
            job_id,
            store=store,
            options=settings.commit_options(overwriting),
            s3_options=committer_options(settings, overwriting),
            pendingsets=[r.manifest for r in results],
        )
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()


async def abort_write(settings: WriteSettings, job_id: str, overwriting: bool) -> str:
    store, dest = _open(settings, settings.hooks.abort_fault)
    try:
        await abort_s3_job(
            dest,
            job_id,
            store=store,
            options=settings.commit,
            s3_options=committer_options(settings, overwriting),
        )
        return "aborted"
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()
