"""The ``aiocommit`` command group and its subcommands."""

from __future__ import annotations

import sys
import time
from typing import Any

import click
from rich.text import Text

from aiocommit.cli.entry_points import EntryPointGroup
from aiocommit.cli.exits import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    Problem,
    as_flags,
    one_line,
    open_url,
    report,
    resume_hint,
    run_interruptible,
    run_reporting,
)
from aiocommit.cli.flags import (
    build_options,
    commit_options,
    duration_flag,
    job_layout,
    job_options,
)
from aiocommit.cli.jobs import (
    MIN_AGE,
    exists,
    missing_container,
    read_dest_success,
    require_dir,
    retried,
    scan_jobs,
    too_recent,
)
from aiocommit.cli.progress import ProgressBar
from aiocommit.cli.render import (
    console_for,
    echo_json,
    render_brief,
    render_jobs,
    render_summary,
    report_unrestorable,
    verbose,
)
from aiocommit.cli.summary import decode_document, success_summary
from aiocommit.cli.units import human_duration
from aiocommit.client.job import abort_job, cleanup_job, commit_job
from aiocommit.client.jobs import JobInfo, job_info, remove_empty_temporary
from aiocommit.committers.s3a import S3Uploads, abort_old_uploads, s3_uploads
from aiocommit.errors import (
    CommitError,
    JobNotFound,
    ManifestError,
    NotFound,
    OutputConflict,
    PlanMismatch,
    first_error,
)
from aiocommit.observability import configure_logging
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import SUCCESS, TEMPORARY, JobLayout
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import join
from aiocommit.stores.multipart import supports_multipart


@click.group(cls=EntryPointGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="aiocommit")
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default=None,
    envvar="AIOCOMMIT_LOG_LEVEL",
    help="Log level (env AIOCOMMIT_LOG_LEVEL). [default: WARNING]",
)
@click.option("-v", "--verbose", count=True, help="-v logs at INFO, -vv at DEBUG.")
def main(log_level: str | None, verbose: int) -> None:
    """aiocommit: commit distributed jobs' output to object stores, safely and fast.

    PATH and DEST are store URLs (file:///…, memory://NAME/…,
    abfss://FS@ACCOUNT.dfs.core.windows.net/…, gs://BUCKET/…, s3://BUCKET/… or
    s3a://BUCKET/…) or local paths.

    Exit codes: 0 ok (also: abort or cleanup of a job that is not there, output cut
    short by its reader), 1 failed (or refused), 2 usage error, 3 not found (the path,
    the destination, a job to commit), 4 unavailable (packages not installed),
    130 interrupted (Ctrl-C), 143 terminated (SIGTERM: kill, timeout, a scheduler).
    """
    _configure(log_level, verbose)


def _configure(log_level: str | None, verbose: int) -> None:
    level = log_level or ("DEBUG" if verbose > 1 else "INFO" if verbose else "WARNING")
    configure_logging(level)


def _more_verbose(ctx: click.Context, _param: click.Parameter, count: int) -> None:
    """``-v`` after the command name: adds to the count given before it."""
    if not count:
        return
    params = ctx.find_root().params
    params["verbose"] = (params.get("verbose") or 0) + count
    _configure(params.get("log_level"), params["verbose"])


def _add_verbose_flags() -> None:
    """Give each of the group's own commands the group's ``-v`` flag too."""
    for command in main.commands.values():
        command.params.append(
            click.Option(
                ["-v", "--verbose"],
                count=True,
                expose_value=False,
                callback=_more_verbose,
                help="-v logs at INFO, -vv at DEBUG (as before the command).",
            )
        )


@main.command()
@click.argument("dest", required=False)
@click.option(
    "--tasks", type=click.IntRange(min=1), default=8, show_default=True, help="Tasks in the job."
)
@click.option(
    "--files-per-task",
    type=click.IntRange(min=1),
    default=25,
    show_default=True,
    help="Files each task writes.",
)
def demo(dest: str | None, tasks: int, files_per_task: int) -> None:
    """Run a demo job into DEST and print its commit summary.

    DEST is a store URL or a local path (relative to the working directory); by
    default a new directory under the system's temporary directory.
    """
    from aiocommit.demo import run_demo

    dest_dir, summary, seconds = run_reporting(
        lambda: run_demo(dest, tasks=tasks, files_per_task=files_per_task), dest or "demo"
    )
    counters = summary.iostatistics.counters
    click.echo(f"committed job {summary.job_id} into {dest_dir} in {seconds:.3f} s")
    click.echo(f"  success:          {summary.success}")
    click.echo(f"  tasks committed:  {counters.get(S.COMMITTER_TASKS_COMPLETED, 0)}")
    click.echo(f"  files committed:  {counters.get(S.COMMITTER_FILES_COMMITTED, 0)}")
    click.echo(f"  bytes committed:  {counters.get(S.COMMITTER_BYTES_COMMITTED, 0)}")
    own = counters.get(S.OP_RENAME, 0) - counters.get(S.COMMITTER_FILES_COMMITTED, 0)
    click.echo(
        f"  files renamed:    {counters.get(S.COMMITTER_FILES_COMMITTED, 0)} "
        f"(and {own} of the committer's own files)"
    )
    click.echo(f"  _SUCCESS:         {dest_dir}/_SUCCESS ({len(summary.filenames)} file names)")
    if not summary.success:
        sys.exit(1)


@main.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--files",
    "filenames",
    type=click.IntRange(min=-1),
    default=10,
    show_default=True,
    help="Committed file names to list; -1 lists them all, 0 none.",
)
def show(path: str, as_json: bool, filenames: int) -> None:
    """Summarise a _SUCCESS file, a summary report or a task manifest (ours or Hadoop's).

    PATH is the file, or a directory holding a _SUCCESS.
    """
    store, store_path = open_url(path)

    async def load() -> dict[str, Any]:
        try:
            target = store_path
            try:
                status = await retried(lambda: store.stat(target))
            except NotFound:
                missing = await missing_container(store)
                raise Problem(
                    EXIT_NOT_FOUND, f"{path}: {missing or 'no such file or directory'}"
                ) from None
            if status.is_dir:
                target = join(target, SUCCESS)
                if not await exists(store, target):
                    raise Problem(EXIT_NOT_FOUND, f"{path}: a directory without a {SUCCESS}")
            data = await retried(lambda: store.read_bytes(target))
            return decode_document(data, store.qualify(target))
        finally:
            await store.aclose()

    summary = run_reporting(load, path)
    if as_json:
        echo_json(summary)
    else:
        render_summary(console_for(), summary, filenames=filenames)


@main.command()
@click.argument("dest")
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON.")
@commit_options(commit=False)
def jobs(dest: str, as_json: bool, option_pairs: tuple[str, ...], **values: Any) -> None:
    """List jobs with work under DEST/_temporary: attempts, committed task manifests,
    their files' total size, age and state."""
    options = build_options(values, option_pairs)  # refuse bad options
    store, path = open_url(dest, options.store)

    async def scan() -> tuple[list[JobInfo], S3Uploads | None]:
        try:
            found = await scan_jobs(store, path, options)
            if not supports_multipart(store):
                return found, None
            return found, await s3_uploads(path, store, [job.job_id for job in found])
        finally:
            await store.aclose()

    found, uploads = run_reporting(scan, dest)
    now = time.time()
    if as_json:
        echo_json([{**job.as_json(now), **_s3_facts(uploads, job.job_id)} for job in found])
        return
    if uploads is not None and uploads.stray:
        click.echo(f"{uploads.stray} outstanding multipart upload(s) named by no job")
    if not found:
        click.echo(f"no jobs under {store.qualify(join(path, TEMPORARY))}")
        return
    if uploads is None:
        render_jobs(console_for(), found, now)
    else:  # S3: the zero-rename committers' pending data in the table
        render_jobs(console_for(), found, now, uploads.by_job, uploads.outstanding)


def _later_success(success: SuccessData | None, job_id: str) -> str:
    """What a missing job attempt may mean when another job's ``_SUCCESS`` is there: the
    job committed and was cleaned up before that job's commit replaced its record."""
    if success is None or not success.success or not success.job_id:
        return ""
    return (
        f"; the destination's _SUCCESS is job {success.job_id}'s: if {job_id} committed "
        "before it, it is done and running it again would write its files twice"
    )


@main.command()
@click.argument("dest")
@job_options
@click.option(
    "--manifest",
    "manifests",
    multiple=True,
    help="Commit exactly these manifests (names in the manifests dir). Repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--no-progress", is_flag=True, help="Do not draw a progress bar.")
@commit_options(commit=True)
def commit(
    dest: str,
    job_id: str,
    attempt: int,
    manifests: tuple[str, ...],
    as_json: bool,
    no_progress: bool,
    option_pairs: tuple[str, ...],
    **values: Any,
) -> None:
    """Commit job JOB_ID in DEST from the task manifests already saved there.

    For a driver that died before or during job commit: renames every committed task's
    files into place, writes _SUCCESS and cleans up. Safe to re-run; a job already
    committed is recognised and left as it is. On S3 the job's pending sets are
    committed (uploads completed, nothing renamed) with the settings its commit started
    with, or those given as --option fs.s3a.committer.*=VALUE.
    """
    options = build_options(values, option_pairs)
    store, path = open_url(dest, options.store)
    layout = job_layout(path, job_id, attempt)
    started = time.perf_counter()
    bar = ProgressBar(
        console_for(stderr=True), enabled=not no_progress, follow_only={S.JOB_STAGE_CLEANUP}
    )
    already = False

    async def run() -> SuccessData:
        nonlocal already
        try:
            success = await read_dest_success(store, path)
            already = success is not None and success.success and success.job_id == job_id
            if not already and not await exists(store, layout.job_attempt_dir):
                await require_dir(store, path)
                raise Problem(
                    EXIT_NOT_FOUND,
                    f"{store.qualify(layout.job_attempt_dir)}: no such job attempt "
                    f"(nothing to commit{_later_success(success, job_id)}; "
                    "see `aiocommit jobs DEST`)",
                )
            with bar:
                return await commit_job(
                    path,
                    job_id,
                    task_records=list(manifests) or None,
                    attempt=attempt,
                    store=store,
                    options=options,
                    progress=bar,
                )
        finally:
            await store.aclose()

    try:
        summary = run_interruptible(run)
    except (Exception, KeyboardInterrupt, BaseExceptionGroup) as error:
        failure = first_error(error)
        if isinstance(failure, CommitError):
            click.echo(f"aiocommit: error: {one_line(as_flags(str(failure)))}", err=True)
            click.echo(f"aiocommit: hint: {commit_hint(failure, dest, job_id)}", err=True)
            raise click.exceptions.Exit(EXIT_FAILED) from None
        report(error, dest, resume=resume_hint("commit", dest, job_id), so_far=bar.so_far)
    seconds = time.perf_counter() - started
    data = success_summary(store.qualify(layout.success_path), summary)
    if as_json:
        echo_json({**data, "already_committed": already, "seconds": round(seconds, 3)})
    else:
        out = console_for()
        verb = "was already committed" if already else f"committed in {seconds:.3f} s"
        headline = f"job {job_id} {verb}: {store.qualify(path)}"
        if verbose():
            out.print(Text(headline))
            render_summary(out, data)
        else:
            render_brief(out, {**data, "seconds": seconds}, headline)
    if not summary.success:
        raise click.exceptions.Exit(EXIT_FAILED)


@main.command()
@click.argument("dest")
@job_options
@click.option(
    "--keep-renames",
    is_flag=True,
    help="Keep what an unfinished job commit already put in place (renamed files; on S3 "
    "completed uploads) instead of undoing it.",
)
@click.option("--no-progress", is_flag=True, help="Do not draw a progress bar.")
@commit_options(commit=False)
def abort(
    dest: str,
    job_id: str,
    attempt: int,
    keep_renames: bool,
    no_progress: bool,
    option_pairs: tuple[str, ...],
    **values: Any,
) -> None:
    """Abort job JOB_ID in DEST: undo an unfinished commit's renames, then delete the job's
    temporary files. A committed job is only cleaned up."""
    options = build_options(values, option_pairs)
    store, path = open_url(dest, options.store)
    layout = job_layout(path, job_id, attempt)
    lost: list[str] = []
    bar = ProgressBar(console_for(stderr=True), enabled=not no_progress)

    async def run() -> str | None:
        try:
            await require_dir(store, path)
            try:
                found: JobInfo | None = await job_info(path, job_id, store=store)
            except JobNotFound:
                found = None
            if found is None:  # never set up, or already aborted or cleaned up: idempotent
                # a cleanup killed after removing the job's directory left _temporary
                await remove_empty_temporary(path, store=store, options=options)
                return None
            with bar:
                lost[:] = await abort_job(
                    path,
                    job_id,
                    attempt=attempt,
                    store=store,
                    options=options,
                    undo=not keep_renames,
                    progress=bar,
                )
            return found.state
        finally:
            await store.aclose()

    state = run_reporting(run, dest, resume=resume_hint("abort", dest, job_id), so_far=bar.so_far)
    if state is None:
        where = store.qualify(layout.job_dir)
        click.echo(f"job {job_id}: nothing to abort ({where} does not exist)")
        return
    what = "was committed; cleaned up" if state == "committed" else "aborted"
    click.echo(f"job {job_id} {what}: {store.qualify(layout.job_dir)} removed")
    report_unrestorable(lost, store.qualify)


@main.command()
@click.argument("dest")
@click.option("--job-id", help="Clean up only this job.")
@click.option(
    "--older-than",
    metavar="DURATION",
    callback=duration_flag,
    help="Only jobs older than this (e.g. 2h, 3d, 1h30m); the age comes from the job ID's "
    "timestamp, or on a local store the job directory's modification time.",
)
@click.option(
    "--all",
    "all_jobs",
    is_flag=True,
    help="Every job under DEST/_temporary; a job not known finished (set up, its tasks "
    "may still be writing) only once older than --min-age.",
)
@click.option(
    "--min-age",
    metavar="DURATION",
    callback=duration_flag,
    help=f"With --all: keep jobs not known finished that are younger than this "
    f"[default: {human_duration(MIN_AGE)}]; 0 removes them whatever their age.",
)
@click.option(
    "--uploads",
    "uploads",
    is_flag=True,
    help="Instead of job directories: abort every outstanding multipart upload under DEST "
    "(S3) older than --older-than, whatever job started it. A job's own abort and cleanup "
    "only abort its own uploads; this sweeps what dead tasks and drivers left. Give an age "
    "longer than any job runs: a live job's uploads are outstanding until it commits.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be removed; remove nothing.")
@click.option("--no-progress", is_flag=True, help="Do not draw a progress bar.")
@click.option(
    "--force",
    is_flag=True,
    help="Also remove jobs whose commit started and did not finish (their output is then "
    "partly visible and can no longer be finished or undone; old output a replacing "
    "commit had moved aside into the job's directory is deleted with it), and with --all "
    "recent jobs not known finished.",
)
@commit_options(commit=False)
def cleanup(
    dest: str,
    job_id: str | None,
    older_than: float | None,
    all_jobs: bool,
    min_age: float | None,
    uploads: bool,
    dry_run: bool,
    no_progress: bool,
    force: bool,
    option_pairs: tuple[str, ...],
    **values: Any,
) -> None:
    """Delete leftover job directories under DEST/_temporary; committed output is never
    touched. Give --job-id, --older-than or --all; or --uploads --older-than DURATION to
    abort old outstanding multipart uploads (S3) instead."""
    if uploads:
        if older_than is None:
            raise click.UsageError("--uploads needs --older-than DURATION (e.g. 7d)")
        if job_id is not None or all_jobs:
            raise click.UsageError("--uploads excludes --job-id and --all")
        _cleanup_uploads(dest, older_than, dry_run, option_pairs, values)
        return
    if job_id is None and older_than is None and not all_jobs:
        raise click.UsageError("give --job-id, --older-than DURATION or --all")
    if job_id is not None and all_jobs:
        raise click.UsageError("--job-id and --all exclude each other")
    options = build_options(values, option_pairs)
    store, path = open_url(dest, options.store)
    if job_id is not None:
        job_layout(path, job_id)
    console = console_for()

    async def run() -> int:
        try:
            found = await scan_jobs(store, path, options)
            if job_id is not None:
                found = [job for job in found if job.job_id == job_id]
                if not found:  # as abort: nothing left is what cleanup wants
                    where = store.qualify(JobLayout(path, job_id).job_dir)
                    console.print(
                        Text(f"job {job_id}: nothing to clean up ({where} does not exist)")
                    )
                    return 0
            now = time.time()
            refused = 0
            for job in found:
                age = job.age(now)
                where = store.qualify(JobLayout(path, job.job_id).job_dir)
                if older_than is not None and (age is None or age < older_than):
                    reason = "age unknown" if age is None else f"age {human_duration(age)}"
                    console.print(Text(f"kept {where} ({reason})"))
                    continue
                if job.state == "committing" and not force:
                    refused += 1
                    click.echo(
                        f"aiocommit: error: {where}: its commit started and did not finish; "
                        "finish it with `aiocommit commit` or undo it with `aiocommit abort` "
                        "(or pass --force)",
                        err=True,
                    )
                    continue
                if too_recent(job, age, all_jobs=all_jobs, min_age=min_age, force=force):
                    reason = "age unknown" if age is None else f"age {human_duration(age)}"
                    console.print(
                        Text(
                            f"kept {where} ({job.state}, {reason}: its tasks may still be "
                            f"writing; --min-age 0 or --force removes it)"
                        )
                    )
                    continue
                if dry_run:
                    console.print(Text(f"would remove {where} (age {human_duration(age)})"))
                    continue
                with ProgressBar(console_for(stderr=True), enabled=not no_progress) as bar:
                    await cleanup_job(
                        path,
                        job.job_id,
                        store=store,
                        options=options,
                        progress=bar,
                    )
                console.print(Text(f"removed {where} (age {human_duration(age)})"))
            if not found:
                console.print(Text(f"no jobs under {store.qualify(join(path, TEMPORARY))}"))
            # a cleanup killed after removing the last job's directory left _temporary
            tidy = job_id is None and not dry_run
            if tidy and await remove_empty_temporary(path, store=store, options=options):
                console.print(Text(f"removed {store.qualify(join(path, TEMPORARY))} (empty)"))
            return refused
        finally:
            await store.aclose()

    if run_reporting(run, dest, resume=resume_hint("cleanup", dest, job_id)):
        raise click.exceptions.Exit(EXIT_FAILED)


def _cleanup_uploads(
    dest: str,
    older_than: float,
    dry_run: bool,
    option_pairs: tuple[str, ...],
    values: dict[str, Any],
) -> None:
    """``cleanup --uploads``: abort outstanding uploads under DEST older than the age."""
    options = build_options(values, option_pairs)
    store, path = open_url(dest, options.store)
    console = console_for()

    async def run() -> None:
        try:
            await require_dir(store, path)
            if not supports_multipart(store):
                raise Problem(
                    EXIT_USAGE,
                    f"{store.qualify(path)}: this store has no multipart uploads "
                    "(--uploads is for S3)",
                )
            found = await abort_old_uploads(
                path, older_than=older_than, dry_run=dry_run, store=store, options=options
            )
        finally:
            await store.aclose()
        now = time.time()
        verb = "would abort" if dry_run else "aborted"
        for upload in found:
            age = human_duration(max(0.0, now - upload.initiated / 1000))
            console.print(Text(f"{verb} upload of {store.qualify(upload.path)} (age {age})"))
        older = human_duration(older_than)
        console.print(
            Text(f"{len(found)} upload(s) older than {older} {verb} under {store.qualify(path)}")
        )

    run_reporting(run, dest)


def commit_hint(error: CommitError, dest: str, job_id: str) -> str:
    """What to do after a job commit failed with ``error``: true for that error."""
    abort = f"`aiocommit abort {dest} --job-id {job_id}`"
    causes: list[BaseException] = [error]
    while causes[-1].__cause__ is not None and len(causes) < 10:
        causes.append(causes[-1].__cause__)
    if any(isinstance(cause, PlanMismatch) for cause in causes):
        return (
            f"this commit cannot be finished (re-running it fails the same way): {abort} "
            "undoes what it did, then commit the job's tasks again"
        )
    if isinstance(error, OutputConflict) and error.stage == S.JOB_STAGE_RESOLVE_CONFLICTS:
        return (
            "nothing in the destination changed; run the same command again with the option "
            f"the error names, or {abort} to give the job up"
        )
    if any(isinstance(cause, ManifestError) for cause in causes):
        return (
            "re-run the task that wrote that manifest (its commit replaces it), then run the "
            f"same command again; or {abort} to undo the job"
        )
    return (
        f"fix the cause and run the same command again to finish the commit, or {abort} to undo it"
    )


def _s3_facts(uploads: S3Uploads | None, job_id: str) -> dict[str, Any]:
    facts = None if uploads is None else uploads.by_job.get(job_id)
    if uploads is None or facts is None:
        return {}
    return {
        "pendingsets": facts.pendingsets,
        "pending_files": facts.files,
        "outstanding_uploads": len(facts.upload_ids & uploads.outstanding),
    }


_add_verbose_flags()
