"""The commit plan: the job's durable record of which manifests its commit renames, and
of the job's state.

``NN/commit-plan.json`` is written once, before the first rename, listing every loaded
manifest with a hash of its bytes; the manifests' bytes are kept beside it, packed into
parts of up to 8 MB in ``NN/plan-manifests/`` (a few writes per job, not one per task),
so a late task attempt that replaces a manifest cannot change what a re-run or an abort
works from. The plan's ``state`` moves
``committing`` -> ``committed`` (every file in place, before ``_SUCCESS`` is written) or
``committing`` -> ``aborted`` (every renamed file moved back, before anything is
deleted), or ``committing`` -> ``refused`` (the conflict check refused the commit before
anything in the destination changed; a re-run checks again). Each change is published
whole (write, then rename over), so a reader sees the old state or the new one.

pre:  manifests loaded and checked (``fix_plan``); renames done (``mark_committed``);
      renames undone (``mark_aborted``).
post: the plan on the store says so; a re-run of commit or abort reads it first.
fail: a store error names the plan; nothing in the destination changed because of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
import anyio.to_thread
import msgspec

from aiocommit.committers.common.context import StageContext
from aiocommit.errors import NotFound, PlanMismatch
from aiocommit.protocol import statistics as S
from aiocommit.protocol.codec import decode_or_raise, encode_pretty, is_partial
from aiocommit.protocol.layout import JobLayout

PlanState = Literal["committing", "committed", "aborted", "refused"]
COMMITTING: PlanState = "committing"
COMMITTED: PlanState = "committed"
ABORTED: PlanState = "aborted"
#: the conflict check refused the commit; nothing in the destination changed
REFUSED: PlanState = "refused"


class ConflictRecord(msgspec.Struct):
    """How the job commit resolved conflicts with the destination's old output (the
    ``resolve_conflicts`` stage), recorded before it changed anything, so a re-run
    finishes the same resolution and an abort restores or reports what it replaced."""

    #: ``fail``, ``append`` or ``replace``
    mode: str
    #: per partition (the directories the job writes into), not the whole destination
    partitioned: bool = False
    #: the directories the mode applied to, relative to the destination ("" is all of it)
    roots: list[str] = msgspec.field(default_factory=list)
    #: replace: the old files, relative to the destination
    replaced: list[str] = msgspec.field(default_factory=list)
    #: replace: the old files a new file lands on: replaced first (plans of older
    #: versions list ``_SUCCESS`` here too)
    collisions: list[str] = msgspec.field(default_factory=list)
    #: replace: the old directories in scope (removed when emptied, recreated on restore)
    directories: list[str] = msgspec.field(default_factory=list)
    #: replace: the old files are moved into ``NN/replaced/`` (restorable), not deleted
    aside: bool = False
    #: replace: the collisions are aside or deleted, saved before the first of the job's
    #: files arrives; a re-run never replaces them again (they may hold its files now)
    cleared: bool = False
    #: every old file is aside or deleted (a re-run skips the stage)
    done: bool = False
    #: replace per partition on the local filesystem: the partitions (relative to the
    #: destination) whose old directory is swapped for the new one in one step
    #: (``committers.manifest.swap_partitions``) instead of file by file
    swapped: list[str] = msgspec.field(default_factory=list)
    #: append with ``delete_target_files``: the old files the job's files overwrite
    #: (relative to the destination) with their etags ("" where the store gives none),
    #: which no abort restores once overwritten
    overwritten: dict[str, str] = msgspec.field(default_factory=dict)


class CommitPlan(msgspec.Struct):
    """``commit-plan.json``: the manifests a job commit loaded, fixed before any rename,
    and how far the job got. Plans written before ``state`` existed read as committing."""

    job_id: str
    manifests: dict[str, str]  # manifest file name -> sha256 of its bytes
    state: PlanState = COMMITTING
    #: manifest file name -> [part, offset, length] of its copy in ``plan-manifests/``
    copies: dict[str, tuple[int, int, int]] = msgspec.field(default_factory=dict)
    #: the S3A committers: the settings the commit started with (Hadoop's
    #: ``fs.s3a.*`` names), so a re-run finishes it the same way
    committer: dict[str, str] = msgspec.field(default_factory=dict)
    #: the conflict resolution, once decided (None before; plans of older versions)
    conflicts: ConflictRecord | None = None
    #: the options tree the commit started with (``CommitOptions.as_record``: tree
    #: path -> value), for the record
    options: dict[str, str] = msgspec.field(default_factory=dict)
    #: the manifests that tasks' commit messages carried (no file in ``manifests/``):
    #: a re-run reads them from ``copies``
    delivered: list[str] = msgspec.field(default_factory=list)


_plan_decoder = msgspec.json.Decoder(CommitPlan)


def decode_plan(data: bytes, path: str) -> CommitPlan:
    return decode_or_raise(_plan_decoder, data, "commit plan", path)


def encode_plan(plan: CommitPlan) -> bytes:
    return encode_pretty(plan)


#: entries in a plan (manifests, their copies' places, replaced files) from which it is
#: encoded in a worker thread, off the event loop
PLAN_ENCODE_THREAD_FROM = 1_000


async def encode_plan_off_loop(plan: CommitPlan) -> bytes:
    """``encode_plan``, in a worker thread for a large plan, so a job of many tasks
    does not hold its caller's event loop while the plan is encoded. The plan must not
    change until this returns (its stage awaits it)."""
    conflicts = plan.conflicts
    entries = len(plan.manifests) + len(plan.copies)
    if conflicts is not None:
        entries += len(conflicts.replaced) + len(conflicts.collisions) + len(conflicts.directories)
    if entries < PLAN_ENCODE_THREAD_FROM:
        return encode_plan(plan)
    return await anyio.to_thread.run_sync(encode_plan, plan)


async def read_plan(context: StageContext, layout: JobLayout | None = None) -> CommitPlan | None:
    """The plan of ``layout``'s job attempt (the context's by default), or None.

    A plan that is not whole JSON (empty or cut short: its first write stopped part-way)
    reads as None too: that write came before any rename, and every later change is
    published whole, so the commit it would have started changed nothing. A re-run then
    starts the commit again and replaces it; an abort or cleanup removes it."""
    path = (layout or context.layout).commit_plan_path
    try:
        data = await context.ops.read_bytes(path, statistic=S.OP_LOAD_COMMIT_PLAN)
    except NotFound:
        return None
    if is_partial(data):
        context.log.warning(
            "commit plan %s is incomplete (%d bytes: its first write stopped part-way, "
            "before anything was renamed); treated as absent",
            context.qualify(path),
            len(data),
        )
        return None
    return decode_plan(data, path)


async def save_plan(context: StageContext, plan: CommitPlan) -> None:
    """Publish the plan whole: written to a temporary name, renamed over the old one; on
    an object store (no directories), whose writes replace an object whole, in place (a
    rename there is a copy)."""
    layout = context.layout
    data = await encode_plan_off_loop(plan)
    if not context.ops.capabilities.directories:
        await context.ops.write_bytes(layout.commit_plan_path, data)
        return
    await context.ops.publish_bytes(layout.commit_plan_path + ".tmp", layout.commit_plan_path, data)


def copies_reader(context: StageContext, plan: CommitPlan) -> Callable[[str], Awaitable[bytes]]:
    """Reads a manifest's copy from the plan's parts (each part read once, then held)."""
    parts: dict[int, bytes] = {}
    lock = anyio.Lock()

    async def read(name: str) -> bytes:
        where = plan.copies.get(name)
        if where is None:
            raise NotFound("the commit plan has no copy of this manifest", path=name)
        part, offset, length = where
        async with lock:
            if part not in parts:
                parts[part] = await context.ops.read_bytes(
                    context.layout.plan_manifests_part(part), statistic=S.OP_LOAD_MANIFEST
                )
        return parts[part][offset : offset + length]

    return read


def check_unchanged(context: StageContext, plan: CommitPlan, digests: dict[str, str]) -> None:
    """On a re-run: the manifests loaded now must be the ones the plan fixed."""
    for name, digest in plan.manifests.items():
        if digests.get(name) != digest:
            raise PlanMismatch(
                "manifest changed since this job's commit started (a late task attempt?); "
                "refusing to mix two attempts' output; `aiocommit abort` undoes the plan's "
                "renames from the copies kept with it",
                path=context.layout.manifests_dir + "/" + name,
            )
