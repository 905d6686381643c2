"""A small commit service: aiocommit embedded in an aiohttp app, on one event loop.

Workers (Spark tasks, batch jobs) write their output and commit their task attempts; the
service commits the jobs on request and reports their progress::

    python examples/commit_service.py [--host 127.0.0.1] [--port 8080]

    POST /jobs                {"dest": URL, "job_id": ID, "options": {KEY: VALUE}}
                              -> 202 {"job_id": ID, "state": "committing"}
                                 400 {"error": ...} for bad input (a bad URL, job ID or
                                 option: every error aiocommit raises is an AiocommitError)
                                 404 when DEST has no such job (``job_info`` raises
                                 ``JobNotFound``)
                                 409 when that job is already being committed here
    GET  /jobs/ID             -> 200 {"state": "committing" | "committed" | "failed",
                                      "stage" (the latest), "files_done", "files_total",
                                      "bytes_done", "bytes_total" (renaming), "stages"
                                      (each stage's done/total/unit), "seconds", "error",
                                      "success": {...}}
                                 404 for a job this service has not been asked to commit
    POST /jobs/ID/abort       -> 200 {"state": "aborted"}: undo and remove the job
                                 (a commit under way is cancelled first)
    GET  /health              -> 200 {"jobs": N, "committing": N}

Options are aiocommit's (``concurrency``, ``validate_output``...) or Hadoop's names, as
``CommitOptions.from_mapping`` takes them. Each finished job also writes the library's
one log line (``job commit ok: ... files=... bytes=...``) at INFO, with its figures as
fields of the record; with OpenTelemetry installed the metrics go to its meter provider.
A failed commit is finished by posting it again, or undone by ``/abort``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from aiocommit import (
    AiocommitError,
    CommitOptions,
    InvalidInput,
    JobNotFound,
    Progress,
    SuccessData,
    abort_job,
    commit_job,
    job_info,
)
from aiocommit.observability import configure_logging

log = logging.getLogger("commit_service")


@dataclass
class Job:
    """A job this service commits: where, its progress and its outcome."""

    dest: str
    job_id: str
    options: CommitOptions
    state: str = "committing"
    #: the latest report of each stage (loading manifests, renaming, cleaning up)
    progress: dict[str, Progress] = field(default_factory=dict)
    stage: str | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    error: str | None = None
    success: SuccessData | None = None
    task: asyncio.Task[None] | None = None

    def on_progress(self, event: Progress) -> None:
        self.progress[event.stage] = event
        self.stage = event.stage

    def as_json(self) -> dict[str, Any]:
        renaming = self.progress.get("job_stage_rename_files")
        end = self.finished if self.finished is not None else time.monotonic()
        data: dict[str, Any] = {
            "dest": self.dest,
            "job_id": self.job_id,
            "state": self.state,
            "stage": self.stage,
            "files_done": renaming.files_done if renaming else 0,
            "files_total": renaming.files_total if renaming else 0,
            "bytes_done": renaming.bytes_done if renaming else 0,
            "bytes_total": renaming.bytes_total if renaming else 0,
            "stages": {
                stage: {"done": e.done, "total": e.total, "unit": e.unit}
                for stage, e in self.progress.items()
            },
            "seconds": round(end - self.started, 3),
            "error": self.error,
        }
        if self.success is not None:
            counters = self.success.iostatistics.counters
            data["success"] = {
                "files": counters.get("committer_files_committed", 0),
                "bytes": counters.get("committer_bytes_committed", 0),
                "tasks": counters.get("committer_tasks_completed", 0),
                "filenames": len(self.success.filenames),
            }
        return data


JOBS = web.AppKey("jobs", dict[str, Job])


async def _commit(job: Job) -> None:
    try:
        job.success = await commit_job(
            job.dest, job.job_id, options=job.options, progress=job.on_progress
        )
        job.state = "committed"
    except AiocommitError as error:  # the one root: store, commit and input errors alike
        job.state = "failed"
        job.error = f"{type(error).__name__}: {error}"
    finally:
        job.finished = time.monotonic()


async def post_job(request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except ValueError:
        return web.json_response({"error": "the body must be a JSON object"}, status=400)
    if not isinstance(body, dict):
        return web.json_response({"error": "the body must be a JSON object"}, status=400)
    dest, job_id, settings = body.get("dest"), body.get("job_id"), body.get("options") or {}
    try:
        if not isinstance(dest, str) or not isinstance(job_id, str):
            raise InvalidInput("give dest (a store URL) and job_id (a string)")
        if not isinstance(settings, dict):
            raise InvalidInput("options must be an object of option names to values")
        options = CommitOptions.from_mapping(settings)
        await job_info(dest, job_id, options=options)  # checks the URL and ID too
    except JobNotFound:
        return web.json_response({"error": f"no job {job_id} under {dest}"}, status=404)
    except AiocommitError as error:
        return web.json_response({"error": f"{type(error).__name__}: {error}"}, status=400)
    jobs = request.app[JOBS]
    running = jobs.get(job_id)
    if running is not None and running.state == "committing":
        return web.json_response({"error": f"job {job_id} is being committed"}, status=409)
    job = Job(dest, job_id, options)
    jobs[job_id] = job
    job.task = asyncio.create_task(_commit(job))
    log.info("committing job %s into %s", job_id, dest)
    return web.json_response({"job_id": job_id, "state": job.state}, status=202)


async def get_job(request: web.Request) -> web.Response:
    job = request.app[JOBS].get(request.match_info["job_id"])
    if job is None:
        return web.json_response({"error": "no such job"}, status=404)
    return web.json_response(job.as_json())


async def post_abort(request: web.Request) -> web.Response:
    job = request.app[JOBS].get(request.match_info["job_id"])
    if job is None:
        return web.json_response({"error": "no such job"}, status=404)
    if job.task is not None and not job.task.done():
        job.task.cancel()  # a cancelled commit leaves a state abort undoes
        with contextlib.suppress(asyncio.CancelledError):
            await job.task
    try:
        await abort_job(job.dest, job.job_id, options=job.options)
    except JobNotFound:
        pass  # nothing of the job is left at DEST (cleaned up): nothing to undo
    except AiocommitError as error:
        return web.json_response({"error": f"{type(error).__name__}: {error}"}, status=500)
    job.state = "aborted"
    return web.json_response(job.as_json())


async def health(request: web.Request) -> web.Response:
    jobs = request.app[JOBS]
    committing = sum(1 for job in jobs.values() if job.state == "committing")
    return web.json_response({"jobs": len(jobs), "committing": committing})


async def _cancel_commits(app: web.Application) -> AsyncIterator[None]:
    yield
    tasks = [job.task for job in app[JOBS].values() if job.task and not job.task.done()]
    for task in tasks:
        task.cancel()  # a re-run of the same commit finishes it
    await asyncio.gather(*tasks, return_exceptions=True)


def make_app() -> web.Application:
    app = web.Application()
    app[JOBS] = {}
    app.router.add_post("/jobs", post_job)
    app.router.add_get("/jobs/{job_id}", get_job)
    app.router.add_post("/jobs/{job_id}/abort", post_abort)
    app.router.add_get("/health", health)
    app.cleanup_ctx.append(_cancel_commits)
    return app


async def serve(host: str, port: int) -> None:
    runner = web.AppRunner(make_app())
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]
    print(f"listening on http://{bound[0]}:{bound[1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    args = parser.parse_args()
    configure_logging(logging.INFO)
    configure_logging(logging.INFO, logger="commit_service")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
