"""Job, task and task attempt IDs in Hadoop's forms.

``job_<identifier>_<number>``, ``task_<identifier>_<number>_m_<6 digits>`` and
``attempt_<identifier>_<number>_m_<6 digits>_<attempt>``. Generated job IDs put a UTC
timestamp and 48 random bits into the identifier, so two jobs started in the same second,
in one process or many, never share directories.
"""

from __future__ import annotations

import itertools
import re
import secrets
import time

from aiocommit.errors import InvalidInput

_counter = itertools.count(1)
_SAFE = re.compile(r"^[^/\\\x00]+$")


def new_job_id() -> str:
    """A fresh, collision-free job ID that Hadoop's ``JobID.forName`` also parses."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    return f"job_{stamp}{secrets.token_hex(6)}_{next(_counter):04d}"


def check_id(kind: str, value: str) -> str:
    """IDs become directory and file names: refuse separators, NUL and dot names."""
    if not isinstance(value, str) or not _SAFE.match(value) or value in (".", ".."):
        raise InvalidInput(f"invalid {kind}: {value!r}")
    return value


def task_id_for(job_id: str, partition: int) -> str:
    """The task ID of a partition: ``job_X_N`` gives ``task_X_N_m_000003``."""
    core = job_id[len("job_") :] if job_id.startswith("job_") else job_id
    return f"task_{core}_m_{partition:06d}"


def task_attempt_id_for(task_id: str, attempt: int) -> str:
    core = task_id[len("task_") :] if task_id.startswith("task_") else task_id
    return f"attempt_{core}_{attempt}"


def attempt_ids(job_id: str, task: str | int, attempt: int | str) -> tuple[str, str]:
    """(task ID, task attempt ID), both checked. ``task`` is a task ID or a partition
    number (giving a Hadoop style ID); ``attempt`` an attempt number or a full attempt ID."""
    check_id("job ID", job_id)
    for kind, number in (("task", task), ("attempt", attempt)):
        if isinstance(number, bool) or (isinstance(number, int) and number < 0):
            raise InvalidInput(f"{kind} number must be >= 0, not {number!r}")
    task_id = task_id_for(job_id, task) if isinstance(task, int) else check_id("task ID", task)
    attempt_id = task_attempt_id_for(task_id, attempt) if isinstance(attempt, int) else attempt
    return task_id, check_id("task attempt ID", attempt_id)
