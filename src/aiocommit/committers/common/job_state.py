"""A job's state, read from its durable record (the commit plans), never guessed from
the destination's ``_SUCCESS`` alone, which another job may replace.

====================  =========================================================
state                 recognised by
====================  =========================================================
``set up``            ``_temporary/JOB`` exists; no attempt has a commit plan
``committing``        an attempt's plan says ``committing`` (renames may be done)
``committed``         an attempt's plan says ``committed``, or the destination's
                      ``_SUCCESS`` is this job's, or another job finished its
                      commit (``_temporary/JOB/_SUCCESS.finished``)
``aborted``           an attempt's plan says ``aborted`` (the job's directory is
                      being deleted)
``refused``           an attempt's plan says ``refused``: the conflict check refused
                      the commit before anything changed (re-run, or abort)
====================  =========================================================

A job with no ``_temporary/JOB`` has no state here: it was never set up, or it was
committed or aborted and cleaned up.

A job is only what was set up (``require_job``): every job-side call first finds the
job at its destination, by what ``setup_job`` recorded (``_temporary/JOB``: the
committer record, manifests or pending sets directory; the magic committer's
``__magic/JOB``) or by the destination's ``_SUCCESS`` naming it, and refuses any other
job ID with ``JobNotFound`` before changing anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from aiocommit.committers.common.commit_plan import (
    ABORTED,
    COMMITTED,
    COMMITTING,
    REFUSED,
    CommitPlan,
    read_plan,
)
from aiocommit.committers.common.context import StageContext, stage
from aiocommit.committers.common.save_success import read_finished, read_success
from aiocommit.errors import ContainerNotFound, JobNotFound, NotFound
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import JobLayout
from aiocommit.protocol.pending import magic_job_dir
from aiocommit.stores.base import missing_container
from aiocommit.stores.multipart import supports_multipart

JobState = Literal["set up", "committing", "committed", "aborted", "refused"]
#: how a job is known at its destination: by its own data, or only by ``_SUCCESS``
JobPresence = Literal["recorded", "committed"]


@dataclass
class JobRecord:
    """What the store says about one job: its attempts and the plan of each."""

    state: JobState
    attempts: list[int] = field(default_factory=list)
    plans: dict[int, CommitPlan] = field(default_factory=dict)

    def layouts(self, dest: str, job_id: str, state: str) -> list[tuple[JobLayout, CommitPlan]]:
        """The job attempts whose plan is in ``state``."""
        return [
            (JobLayout(dest, job_id, attempt), plan)
            for attempt, plan in sorted(self.plans.items())
            if plan.state == state
        ]


async def job_attempts(context: StageContext) -> list[int] | None:
    """The job's attempt numbers, or None when ``_temporary/JOB`` does not exist."""
    attempts: list[int] = []
    try:
        async for page in context.ops.list_dir(context.layout.job_dir):
            attempts.extend(int(s.name) for s in page if s.is_dir and s.name.isdigit())
    except NotFound:
        return None
    return sorted(attempts)


async def read_job_record(context: StageContext, *, check_success: bool = True) -> JobRecord | None:
    """The job's state from every attempt's plan (and, with ``check_success``, this
    job's ``_SUCCESS``), or None when the job has no directory."""
    attempts = await job_attempts(context)
    if attempts is None:
        return None
    layout = context.layout
    plans: dict[int, CommitPlan] = {}
    for attempt in attempts:
        plan = await read_plan(context, JobLayout(layout.dest, layout.job_id, attempt))
        if plan is not None:
            plans[attempt] = plan
    states = {plan.state for plan in plans.values()}
    state: JobState
    if COMMITTED in states or (check_success and await read_success(context) is not None):
        state = "committed"
    elif not plans and await read_finished(context) is not None:
        state = "committed"  # another job finished its commit; its directory is left
    elif COMMITTING in states:
        state = "committing"
    elif ABORTED in states:
        state = "aborted"
    elif REFUSED in states:
        state = "refused"
    else:
        state = "set up"
    return JobRecord(state, attempts, plans)


async def require_job(context: StageContext, operation: str) -> JobPresence:
    """How the destination knows the context's job: ``recorded`` (``_temporary/JOB``, or
    the magic committer's ``__magic/JOB``, exists) or ``committed`` (neither, but
    ``_SUCCESS`` records its success: committed and cleaned up).

    pre:  none; reads only.
    post: nothing changed.
    fail: ``ContainerNotFound`` naming the bucket or filesystem when the destination's
          is missing; ``JobNotFound`` naming the destination and job ID for any other
          job; a store error as ``CommitError`` of stage ``job_stage_find_committer``.
    """
    async with stage(context, S.JOB_STAGE_FIND_COMMITTER):
        presence = await _presence(context)
    if presence is None:
        layout = context.layout
        dest = context.qualify(layout.dest)
        missing = await missing_container(context.ops.store)
        if missing is not None:
            raise ContainerNotFound(dest, missing, operation=operation)
        raise JobNotFound(dest, layout.job_id, operation=operation)
    return presence


async def _presence(context: StageContext) -> JobPresence | None:
    if await job_attempts(context) is not None:
        return "recorded"
    magic = magic_job_dir(context.layout)
    if supports_multipart(context.ops.store) and await context.ops.stat_or_none(magic):
        return "recorded"
    if await read_success(context) is not None:
        return "committed"
    return None
