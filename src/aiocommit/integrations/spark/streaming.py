"""Micro-batches of ``writeStream.format("aiocommit")`` as aiocommit jobs, free of pyspark.

Each micro-batch is one job whose ID is derived from the query's ID (kept in the
checkpoint: it survives restarts) and the batch ID, plus a generation:
``job_<query>b<batch>g<generation>_0000``. Spark calls the data source's
``streamWriter()`` before each batch's tasks, on the driver (``prepare_stream_batch``):

* the destination's ``_SUCCESS`` names a job of this batch: the batch committed before a
  restart (Spark had not recorded it): its replay writes nothing and commits nothing; what
  the job left under ``_temporary`` (the query stopped before its cleanup) is removed;
* a job of this batch is under ``_temporary`` (the query stopped while its tasks ran,
  or while it committed): it is aborted (``abort_job`` undoes a partly-run commit), and
  the batch is written again as the next generation;
* else the batch's generation 0 is set up.

Spark calls ``streamWriter()`` again to commit (a different worker); that call sets up
nothing, and ``commit()`` takes the job from the tasks' messages.
"""

from __future__ import annotations

import json
import re

import anyio

from aiocommit.errors import InvalidInput, NotFound
from aiocommit.integrations.spark.committer import abort_write, clean_up_write, prepare_job
from aiocommit.integrations.spark.settings import WriteSettings
from aiocommit.protocol.success import decode_success
from aiocommit.stores.registry import open_store

_JOB = re.compile(r"^job_(?P<query>[0-9a-f]{32})b(?P<batch>\d+)g(?P<generation>\d+)_0000$")


def stream_job_id(query_id: str, batch_id: int, generation: int) -> str:
    """The job of one generation of one micro-batch of the query ``query_id`` (a UUID)."""
    core = query_id.replace("-", "").lower()
    if not re.fullmatch(r"[0-9a-f]{32}", core):
        raise InvalidInput(f"not a streaming query ID: {query_id!r}")
    return f"job_{core}b{batch_id}g{generation}_0000"


def _batch_of(job_id: str, query_id: str, batch_id: int) -> int | None:
    """The generation of ``job_id`` when it is a job of this batch, else None."""
    found = _JOB.match(job_id)
    if found is None or found["query"] != query_id.replace("-", "").lower():
        return None
    return int(found["generation"]) if int(found["batch"]) == batch_id else None


async def stream_position(checkpoint: str) -> tuple[str, int]:
    """The query's ID (``CHECKPOINT/metadata``) and the batch about to run (the highest
    ``CHECKPOINT/offsets/N``, written by Spark before batch N runs)."""
    store, root = open_store(checkpoint)
    root = root.rstrip("/") or "/"
    try:
        try:
            metadata = json.loads(await store.read_bytes(f"{root}/metadata"))
            batches = [
                int(entry.path.rstrip("/").rsplit("/", 1)[-1])
                async for page in store.list_dir(f"{root}/offsets")
                for entry in page
                if entry.path.rstrip("/").rsplit("/", 1)[-1].isdigit()
            ]
        except (NotFound, ValueError) as error:
            raise InvalidInput(
                f"cannot read the streaming checkpoint {checkpoint}: {error}"
            ) from None
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()
    if not batches or not isinstance(metadata, dict) or "id" not in metadata:
        raise InvalidInput(f"the streaming checkpoint {checkpoint} names no query or batch")
    return str(metadata["id"]), max(batches)


async def _committed_and_open(
    settings: WriteSettings, query_id: str, batch_id: int
) -> tuple[str | None, dict[str, int]]:
    """The job of this batch ``_SUCCESS`` names (None: none), and this batch's jobs
    under ``_temporary`` with their generations."""
    from aiocommit.client.jobs import list_jobs

    store, dest = open_store(settings.url, settings.commit.store.as_s3a() or None)
    dest = dest.rstrip("/") or "/"
    try:
        committed = None
        try:
            success = decode_success(await store.read_bytes(f"{dest}/_SUCCESS"))
            if _batch_of(success.job_id, query_id, batch_id) is not None:
                committed = success.job_id
        except NotFound:
            pass
        try:
            jobs = await list_jobs(dest, store=store)
        except NotFound:
            jobs = []
    finally:
        with anyio.CancelScope(shield=True):
            await store.aclose()
    found = {}
    for job in jobs:
        generation = _batch_of(job.job_id, query_id, batch_id)
        if generation is not None:
            found[job.job_id] = generation
    return committed, found


async def prepare_stream_batch(
    settings: WriteSettings, query_id: str, batch_id: int
) -> tuple[str, bool]:
    """Driver side, before a micro-batch's tasks: ``(job ID, already committed)``; see
    the module docstring. Idempotent across restarts."""
    committed, open_jobs = await _committed_and_open(settings, query_id, batch_id)
    if committed is not None:
        for job_id in sorted(open_jobs):  # stopped before its cleanup
            if job_id == committed:
                await clean_up_write(settings, job_id)
            else:
                await abort_write(settings, job_id, False)
        return committed, True
    for job_id in sorted(open_jobs):  # stopped part-way: undone, then written again
        await abort_write(settings, job_id, False)
    generation = max(open_jobs.values(), default=-1) + 1
    job_id = stream_job_id(query_id, batch_id, generation)
    await prepare_job(settings, job_id)
    return job_id, False
