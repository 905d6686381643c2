"""A job layout's directories: joined once, when the layout is made."""

from __future__ import annotations

import dataclasses

from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.base import join


def test_the_directories_are_joined_once_per_layout() -> None:
    layout = JobLayout("/out", "job_1_1", 2)
    assert layout.temporary_dir == "/out/_temporary"
    assert layout.job_dir == "/out/_temporary/job_1_1"
    assert layout.job_attempt_dir == "/out/_temporary/job_1_1/02"
    assert layout.manifests_dir == "/out/_temporary/job_1_1/02/manifests"
    assert layout.tasks_dir == "/out/_temporary/job_1_1/02/tasks"
    # the same string each time: made once, not joined again at each use
    assert layout.manifests_dir is layout.manifests_dir
    assert layout.tasks_dir is layout.tasks_dir


def test_a_changed_layout_has_its_own_directories_and_equality_is_by_its_fields() -> None:
    layout = JobLayout("/out", "job_1_1")
    other = dataclasses.replace(layout, attempt=1)
    assert other.manifests_dir == "/out/_temporary/job_1_1/01/manifests"
    assert layout == JobLayout("/out", "job_1_1")
    assert hash(layout) == hash(JobLayout("/out", "job_1_1"))
    assert layout != other
    assert repr(layout) == "JobLayout(dest='/out', job_id='job_1_1', attempt=0)"


def test_a_task_attempt_makes_its_layout_once() -> None:
    from aiocommit.client.task import task_attempt

    attempt = task_attempt("/out", "/out", "job_1_1", 3, 0)
    assert attempt.layout is attempt.layout
    assert attempt.layout == JobLayout("/out", "job_1_1")
    assert attempt.work_dir == join(attempt.layout.tasks_dir, attempt.task_attempt_id)
    assert dataclasses.replace(attempt, job_attempt=1).layout.attempt == 1
