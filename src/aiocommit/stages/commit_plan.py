"""The commit plan: the job's durable record of which manifests its commit renames, and
of the job's state.

``NN/commit-plan.json`` is written once, before the first rename, listing every loaded
manifest with a hash of its bytes; each manifest's bytes are kept beside it in
``NN/plan-manifests/`` (written while loading), so a late task attempt that replaces a
manifest cannot change what a re-run or an abort works from. The plan's ``state`` moves
``committing`` -> ``committed`` (every file in place, before ``_SUCCESS`` is written) or
``committing`` -> ``aborted`` (every renamed file moved back, before anything is
deleted). Each change is published whole (write, then rename over), so a reader sees the
old state or the new one.

pre:  manifests loaded and checked (``fix_plan``); renames done (``mark_committed``);
      renames undone (``mark_aborted``).
post: the plan on the store says so; a re-run of commit or abort reads it first.
fail: a store error names the plan; nothing in the destination changed because of it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from aiocommit.errors import ManifestError, NotFound
from aiocommit.protocol.codec import decode_or_raise, encode_pretty
from aiocommit.protocol.layout import JobLayout
from aiocommit.stages.context import StageContext

PlanState = Literal["committing", "committed", "aborted"]
COMMITTING: PlanState = "committing"
COMMITTED: PlanState = "committed"
ABORTED: PlanState = "aborted"


class CommitPlan(msgspec.Struct):
    """``commit-plan.json``: the manifests a job commit loaded, fixed before any rename,
    and how far the job got. Plans written before ``state`` existed read as committing."""

    job_id: str
    manifests: dict[str, str]  # manifest file name -> sha256 of its bytes
    state: PlanState = COMMITTING


_plan_decoder = msgspec.json.Decoder(CommitPlan)


def decode_plan(data: bytes, path: str) -> CommitPlan:
    return decode_or_raise(_plan_decoder, data, "commit plan", path)


def encode_plan(plan: CommitPlan) -> bytes:
    return encode_pretty(plan)


async def read_plan(context: StageContext, layout: JobLayout | None = None) -> CommitPlan | None:
    """The plan of ``layout``'s job attempt (the context's by default), or None."""
    path = (layout or context.layout).commit_plan_path
    try:
        return decode_plan(await context.ops.read_bytes(path), path)
    except NotFound:
        return None


async def save_plan(context: StageContext, plan: CommitPlan) -> None:
    """Publish the plan whole: written to a temporary name, renamed over the old one."""
    layout = context.layout
    await context.ops.publish_bytes(
        layout.commit_plan_path + ".tmp", layout.commit_plan_path, encode_plan(plan)
    )


def check_unchanged(context: StageContext, plan: CommitPlan, digests: dict[str, str]) -> None:
    """On a re-run: the manifests loaded now must be the ones the plan fixed."""
    for name, digest in plan.manifests.items():
        if digests.get(name) != digest:
            raise ManifestError(
                "manifest changed since this job's commit started (a late task attempt?); "
                "refusing to mix two attempts' output; `aiocommit abort` undoes the plan's "
                "renames from the copies kept with it",
                path=context.layout.manifests_dir + "/" + name,
            )
