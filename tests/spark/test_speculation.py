"""Speculative execution on a real standalone cluster (a master and two workers on
127.0.0.2 and 127.0.0.3), run as the script ``speculation_job.py`` beside this test in a
subprocess: one cluster and one Spark application for every way of writing (``format``,
``write``, ``jvm``), one write after another, each write's commit coordinator decisions
read for its own stages; a minute of it the cluster starting.

It checks issue #13's items 1 and 4 together: the write succeeds even though a losing
attempt is still writing while the job cleans up (before the fix: ``CommitError:
job_stage_cleanup failed: Directory not empty`` after ``_SUCCESS``), only the attempts
Spark's commit coordinator accepted are in the destination, every row is there once,
and the destination is a relative path, qualified on the driver (before the fix each
executor resolved it in its own working directory: ``job is not set up``).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiocommit.integrations.spark import seam

#: the run of every way of writing; on a loaded 2-core machine the cluster alone can take
#: 2 minutes, each write about half a minute (AIOCOMMIT_SPECULATION_SECONDS gives a machine
#: loaded past that more)
RUN_SECONDS = int(os.environ.get("AIOCOMMIT_SPECULATION_SECONDS") or 480)
#: the ways of writing, with why one cannot run here
VIAS = {
    "format": None if seam.HAS_DATA_SOURCES else "needs pyspark 4",
    "write": None,
    "jvm": None if seam.HAS_DATA_SOURCES else "needs Hadoop >= 3.3.5",
}


@dataclasses.dataclass(frozen=True)
class Run:
    """The one scenario run: its exit status and output (stdout, then stderr's end)."""

    returncode: int
    stdout: str
    report: str


@pytest.fixture(scope="module")
def speculation_run(request: pytest.FixtureRequest) -> Run:
    """Every way of writing selected that can run here, one after another in one Spark
    application on one standalone cluster (its start-up is most of the time), in one
    subprocess."""
    selected = {
        item.callspec.params["via"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == test_speculation_on_a_standalone_cluster_is_exactly_once.__name__
    }
    vias = [via for via, skipped in VIAS.items() if skipped is None and via in selected]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    process = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("speculation_job.py")),
            "--rows",
            "30000",
            "--via",
            ",".join(vias),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        stdout, stderr = process.communicate(timeout=RUN_SECONDS)
    except subprocess.TimeoutExpired:
        process.terminate()  # the scenario stops its cluster on SIGTERM
        stdout, stderr = process.communicate(timeout=45)
        pytest.fail(f"speculation scenario took over {RUN_SECONDS} s:\n{stdout}{stderr[-3000:]}")
    return Run(process.returncode, stdout, stdout + stderr[-3000:])


@pytest.mark.timeout(RUN_SECONDS + 60)
@pytest.mark.parametrize(
    "via",
    [
        pytest.param(via, marks=pytest.mark.skipif(skipped is not None, reason=skipped or ""))
        for via, skipped in VIAS.items()
    ],
)
def test_speculation_on_a_standalone_cluster_is_exactly_once(
    via: str, speculation_run: Run
) -> None:
    """``via``: ``format("aiocommit")`` (Spark's commit coordinator picks the attempt),
    ``write()`` (``mapInArrow``: the attempt whose result ``collect()`` kept) or
    ``write(engine="jvm")``; each a write of its own in the one Spark application."""
    report = speculation_run.report
    lines = {line for line in speculation_run.stdout.splitlines() if line.startswith(f"[{via}] ")}
    assert f"[{via}] EXACTLY ONCE: yes" in lines, report
    assert f"[{via}] _SUCCESS saved: True" in lines, report
    assert f"[{via}] rows read back 30000 of 30000; distinct 30000" in lines, report
    assert speculation_run.returncode == 0, report
