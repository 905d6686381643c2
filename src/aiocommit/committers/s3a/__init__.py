"""The S3A committers (Hadoop's staging, partitioned and magic committers): output is
uploaded as multipart uploads that the job commit completes; nothing is renamed or
copied. ``setup_job`` & co. use them on S3 by default; this package holds their own API:
settings (``S3CommitterOptions``, Hadoop's ``fs.s3a.*`` names), what a job left
(``describe_s3_job``, ``list_outstanding_uploads``) and the task side's building blocks.

Modules: ``options``; ``job`` (setup, commit, abort, cleanup); ``staging`` and ``magic``
(the task sides); ``committer`` (both behind the ``Committer`` interface); ``inspect``.
The stages, one per module, in the order a job runs them:

Task side
    ``upload``: a file becomes an uncompleted multipart upload of its final key.
    ``save_pendingset``: the task attempt's uploads saved as its pending set.

Job side
    ``load_pendingsets``: every committed task's pending set loaded and checked.
    ``complete_uploads``: every upload completed: the output becomes visible.
    ``abort_uploads``: uploads aborted (task failure, job abort, cleanup).

``completed`` recognises an upload already completed into its destination (by the etag
the parts complete into); ``walk`` lists a directory tree.
"""

from aiocommit.committers.s3a.committer import S3ACommitter, s3_task_attempt, setup_magic_task
from aiocommit.committers.s3a.inspect import (
    S3JobFacts,
    S3Uploads,
    abort_old_uploads,
    describe_s3_job,
    list_outstanding_uploads,
    s3_uploads,
)
from aiocommit.committers.s3a.job import abort_s3_job, cleanup_s3_job, commit_s3_job, setup_s3_job
from aiocommit.committers.s3a.magic import abort_magic_task, commit_magic_task, write_magic_file
from aiocommit.committers.s3a.options import S3CommitterOptions
from aiocommit.committers.s3a.staging import abort_staging_task, commit_staging_task

__all__ = [
    "S3ACommitter",
    "S3CommitterOptions",
    "S3JobFacts",
    "S3Uploads",
    "abort_magic_task",
    "abort_old_uploads",
    "abort_s3_job",
    "abort_staging_task",
    "cleanup_s3_job",
    "commit_magic_task",
    "commit_s3_job",
    "commit_staging_task",
    "describe_s3_job",
    "list_outstanding_uploads",
    "s3_task_attempt",
    "s3_uploads",
    "setup_magic_task",
    "setup_s3_job",
    "write_magic_file",
]
