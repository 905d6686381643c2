"""A job's state, read from its durable record (the commit plans), never guessed from
the destination's ``_SUCCESS`` alone, which another job may replace.

====================  =========================================================
state                 recognised by
====================  =========================================================
``set up``            ``_temporary/JOB`` exists; no attempt has a commit plan
``committing``        an attempt's plan says ``committing`` (renames may be done)
``committed``         an attempt's plan says ``committed``, or the destination's
                      ``_SUCCESS`` is this job's
``aborted``           an attempt's plan says ``aborted`` (the job's directory is
                      being deleted)
``refused``           an attempt's plan says ``refused``: the conflict check refused
                      the commit before anything changed (re-run, or abort)
====================  =========================================================

A job with no ``_temporary/JOB`` has no state here: it was never set up, or it was
committed or aborted and cleaned up.
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
from aiocommit.committers.common.context import StageContext
from aiocommit.committers.common.save_success import read_success
from aiocommit.errors import NotFound
from aiocommit.protocol.layout import JobLayout

JobState = Literal["set up", "committing", "committed", "aborted", "refused"]


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
    elif COMMITTING in states:
        state = "committing"
    elif ABORTED in states:
        state = "aborted"
    elif REFUSED in states:
        state = "refused"
    else:
        state = "set up"
    return JobRecord(state, attempts, plans)
