"""The job side, on every store: ``setup_job``, ``commit_job``, ``abort_job``,
``cleanup_job``: shortcuts over a ``Client`` made for one call (``Client.setup_job``,
``Job.commit``, ``Job.abort``, ``Job.cleanup``).

Each hands the job to its committer (``committers.factory``): the one chosen at
``setup_job`` from the store and the options, recorded with the job.
On S3 that is the staging committer unless the options name another; elsewhere the
manifest committer. See ``committers.manifest`` and ``committers.s3a`` for what each does.

A job is only what was set up: ``commit_job``, ``abort_job`` and ``cleanup_job`` first
find the job at the destination (``committers.common.job_state.require_job``, in
``Job.commit``, ``Job.abort`` and ``Job.cleanup``) and raise ``JobNotFound`` for any
other job ID, before anything changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiocommit.client.client import Client
from aiocommit.committers.common.context import ProgressCallback
from aiocommit.options import CommitOptions
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store


async def setup_job(
    dest: str,
    job_id: str | None = None,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
) -> str:
    """Set the job up: choose its committer (``options.committer.name``; else an earlier
    attempt's; else from the store: staging on S3, the manifest committer elsewhere),
    record it and create what the job's tasks need.

    The S3A committers' settings (``options.committer.s3a``, the conflict mode) are
    recorded with the job. An older ``_SUCCESS`` in the destination stays until this
    job's commit starts replacing output.
    Returns the job ID: ``job_id`` if given, else a new collision-free one.
    """
    async with Client(dest, store=store, options=options) as client:
        return (await client.setup_job(job_id, attempt=attempt)).job_id


async def commit_job(
    dest: str,
    job_id: str,
    *,
    task_records: Sequence[str] | None = None,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    progress: ProgressCallback | None = None,
    job_id_source: str = "JobID",
    manifests: Sequence[str] | None = None,
) -> SuccessData:
    """Commit the job: every committed task's output into place, then ``_SUCCESS``.

    Args:
        dest: the destination directory (a URL, or a path of ``store``).
        job_id: the job's ID, as given to ``setup_job``.
        task_records: commit exactly these task records (manifests, or the S3A committers'
            pending sets: file names in the job's directory, or for manifests their
            paths/URLs) instead of every one found there.
        store: a store client to use (and not close); by default one is opened from
            ``dest`` and closed at the end.
        options: how the commit runs; on S3 its conflict mode and the S3A settings
            over those the job was set up with (a commit that started earlier finishes
            with the settings its plan recorded).
        progress: called with ``Progress`` reports while files are renamed.
        manifests: the deprecated name of ``task_records``.

    Returns:
        The summary written to ``_SUCCESS`` (or found there, when the job had committed).

    Raises:
        JobNotFound: no such job at ``dest`` (never set up there); nothing changed.
        CommitError: naming the stage, operation and path; ``ManifestError`` and
            ``OutputConflict`` for bad task records, before any output changes.
    """
    async with Client(dest, store=store, options=options) as client:
        job = client.job(job_id, attempt=attempt)
        return await job.commit(
            task_records=task_records,
            progress=progress,
            job_id_source=job_id_source,
            manifests=manifests,
        )


async def abort_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    undo: bool = True,
    progress: ProgressCallback | None = None,
    undo_renames: bool | None = None,
) -> list[str]:
    """Abort the job: undo its unfinished commit (``undo``: move renamed files back, and
    the old output a ``replace`` moved aside; the S3A committers: delete output completed
    from the job's uploads, abort the rest), then remove ``_temporary/JOB``. A
    committed job is only cleaned up: its output is never deleted. Idempotent: a re-run
    after a kill at any point finishes it. ``progress`` gets the files moved back, then
    the directories deleted.

    Returns the store paths of old files a ``replace`` deleted (stores without atomic
    rename) that the abort cannot restore; empty when the destination is as it was (a
    job that committed and was cleaned up: nothing to do).

    Raises ``JobNotFound`` when no such job is at ``dest`` (never set up there, or its
    abort already finished), before anything changes. ``undo_renames``: the deprecated
    name of ``undo``.
    """
    async with Client(dest, store=store, options=options) as client:
        job = client.job(job_id, attempt=attempt)
        return await job.abort(undo=undo, progress=progress, undo_renames=undo_renames)


async def cleanup_job(
    dest: str,
    job_id: str,
    *,
    attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    progress: ProgressCallback | None = None,
) -> None:
    """Delete the job's temporary data (on S3 also the job's own outstanding uploads,
    unless ``committer.s3a.abort_pending_uploads``, in the options or the job's
    settings, is off); never touches committed output, nor
    another job's data. ``progress`` gets the directories deleted. Raises
    ``JobNotFound`` when no such job is at ``dest``, before anything changes."""
    async with Client(dest, store=store, options=options) as client:
        await client.job(job_id, attempt=attempt).cleanup(progress=progress)
