"""Where everything of a job lives, as Hadoop 3.5.0 lays it out::

    DEST/_SUCCESS
    DEST/_temporary/JOB/NN/manifests/ATTEMPT-manifest.json.tmp   (while a task commits)
    DEST/_temporary/JOB/NN/manifests/TASK-manifest.json          (committed task)
    DEST/_temporary/JOB/NN/tasks/ATTEMPT/...                     (task attempt output)
    DEST/_temporary/JOB/NN/tasks/shared-attempts/.ATTEMPT-N-NAME (aiocommit only: output
                                               of attempts that share one directory)
    DEST/_temporary/JOB/NN/_SUCCESS.tmp
    DEST/_temporary/JOB/NN/_SUCCESS.old     (aiocommit only: an older job's _SUCCESS, set aside)
    DEST/_temporary/JOB/NN/commit-plan.json                      (aiocommit only; see below)
    DEST/_temporary/JOB/NN/plan-manifests/part-NNNNN             (aiocommit only)
    DEST/_temporary/JOB/NN/replaced/...       (aiocommit only: old output a replace moved)
    DEST/_temporary/JOB/_SUCCESS.finished     (aiocommit only: the job's commit, finished
                                               by another job's lease take-over)

``commit-plan.json`` lists the manifests a job commit loaded, with a hash of each, written
before the first rename, so a re-run after a crash commits exactly the same manifests; it
also records the job's state (committing, committed, aborted). ``plan-manifests/`` keeps
the bytes of those manifests, packed into a few parts of up to 8 MB, so an abort undoes
exactly what the plan renamed even after a late task attempt replaced a manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiocommit.errors import InvalidInput, ReservedName
from aiocommit.protocol.ids import check_id
from aiocommit.stores.base import join

TEMPORARY = "_temporary"
SUCCESS = "_SUCCESS"
MANIFEST_SUFFIX = "-manifest.json"
TEMP_MANIFEST_SUFFIX = "-manifest.json.tmp"
#: per-attempt manifests (``commit_task(per_attempt=True)``). The name ends in
#: ``-manifest.json`` too, so a job commit that lists ``manifests/`` loads every
#: attempt's (two of one task are refused): such jobs are committed with their records
ATTEMPT_MANIFEST_SUFFIX = ".attempt-manifest.json"
#: in a job attempt's ``manifests/``: its tasks' manifests travel in an engine's commit
#: messages, not files, so a job commit that lists ``manifests/`` for them refuses
MESSAGE_RECORDS_MARKER = "_task-records-in-messages"
#: the magic committer's directories (``__magic``, Hadoop's ``__magic_job-JOB``) start so
MAGIC_PREFIX = "__magic"

#: the per-destination publish lease (aiocommit only; ``committers/common/lease.py``) and
#: its claims, ``LEASE.claim-TOKEN``
LEASE = "_aiocommit.lease"
#: the directory below ``tasks`` whose files several task attempts share (aiocommit
#: only: an engine worker's local attempts, which then make no directory each); each
#: file is named ``shared_file_prefix(ATTEMPT)...``, and a manifest whose
#: ``taskAttemptDir`` is this directory may name only its own attempt's files
SHARED_ATTEMPTS_DIR = "shared-attempts"


def shared_file_prefix(task_attempt_id: str) -> str:
    """How the names of ``task_attempt_id``'s files in ``SHARED_ATTEMPTS_DIR`` start."""
    return f".{task_attempt_id}-"


#: names at the top of a destination the commit protocol keeps for itself
RESERVED_TOP_NAMES = frozenset({SUCCESS, TEMPORARY})


def check_output_name(relative: str) -> str:
    """``relative`` (a task's output path, relative to the destination) unless it names
    what the protocol keeps: ``_SUCCESS``, ``_temporary`` or the lease (and its claims)
    at the top, or a directory
    starting ``__magic`` anywhere (Hadoop's S3A client treats those as magic paths).

    fail: ``ReservedName`` (an ``InvalidInput``), before anything is written.
    """
    parts = relative.strip("/").split("/")
    if parts[0] in RESERVED_TOP_NAMES or parts[0].startswith(LEASE):
        raise ReservedName(
            f"task output {relative!r}: {parts[0]} at the top of the destination is the "
            "commit protocol's own; write the file under another name"
        )
    if any(part.startswith(MAGIC_PREFIX) for part in parts):
        raise ReservedName(
            f"task output {relative!r}: a name starting {MAGIC_PREFIX!r} is the magic "
            "committer's own; write the file under another name"
        )
    return relative


@dataclass(frozen=True)
class JobLayout:
    """Paths of one job attempt under a destination directory (store paths). The
    directories the stages ask for again and again are joined once, when it is made."""

    dest: str
    job_id: str
    attempt: int = 0
    #: ``DEST/_temporary``
    temporary_dir: str = field(init=False, repr=False, compare=False)
    #: ``DEST/_temporary/JOB``
    job_dir: str = field(init=False, repr=False, compare=False)
    #: ``DEST/_temporary/JOB/NN``, NN the job attempt
    job_attempt_dir: str = field(init=False, repr=False, compare=False)
    #: the job attempt's ``manifests`` directory
    manifests_dir: str = field(init=False, repr=False, compare=False)
    #: the job attempt's ``tasks`` directory, holding its task attempts' directories
    tasks_dir: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_id("job ID", self.job_id)
        if not isinstance(self.attempt, int) or isinstance(self.attempt, bool) or self.attempt < 0:
            raise InvalidInput(f"job attempt must be an int >= 0, not {self.attempt!r}")
        temporary_dir = join(self.dest, TEMPORARY)
        job_dir = join(temporary_dir, self.job_id)
        job_attempt_dir = join(job_dir, f"{self.attempt:02d}")
        for name, value in (
            ("temporary_dir", temporary_dir),
            ("job_dir", job_dir),
            ("job_attempt_dir", job_attempt_dir),
            ("manifests_dir", join(job_attempt_dir, "manifests")),
            ("tasks_dir", join(job_attempt_dir, "tasks")),
        ):
            object.__setattr__(self, name, value)

    @property
    def success_path(self) -> str:
        return join(self.dest, SUCCESS)

    @property
    def success_temp_path(self) -> str:
        return join(self.job_attempt_dir, SUCCESS + ".tmp")

    @property
    def old_success_path(self) -> str:
        """Where the job commit sets an older job's ``_SUCCESS`` aside at its first change
        to the destination, so an abort can put it back."""
        return join(self.job_attempt_dir, SUCCESS + ".old")

    @property
    def finished_path(self) -> str:
        """The ``_SUCCESS`` of a job whose commit another job finished (a take-over of
        the destination's lease from the dead holder): how the job's re-run knows it
        committed after a later job replaced ``DEST/_SUCCESS``; removed with the job's
        directory."""
        return join(self.job_dir, SUCCESS + ".finished")

    @property
    def commit_plan_path(self) -> str:
        return join(self.job_attempt_dir, "commit-plan.json")

    @property
    def plan_manifests_dir(self) -> str:
        return join(self.job_attempt_dir, "plan-manifests")

    @property
    def replaced_dir(self) -> str:
        """Where a replacing commit moves the destination's old output (rename stores),
        so an abort can move it back; removed with the job's directory."""
        return join(self.job_attempt_dir, "replaced")

    def plan_manifests_part(self, part: int) -> str:
        return join(self.plan_manifests_dir, f"part-{part:05d}")

    def task_attempt_dir(self, task_attempt_id: str) -> str:
        return join(self.tasks_dir, check_id("task attempt ID", task_attempt_id))

    def manifest_path(self, task_id: str) -> str:
        return join(self.manifests_dir, check_id("task ID", task_id) + MANIFEST_SUFFIX)

    def temp_manifest_path(self, task_attempt_id: str) -> str:
        return join(
            self.manifests_dir, check_id("task attempt ID", task_attempt_id) + TEMP_MANIFEST_SUFFIX
        )
