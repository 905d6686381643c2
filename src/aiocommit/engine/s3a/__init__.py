"""The S3A committers (Hadoop's staging, partitioned and magic committers): output is
uploaded as multipart uploads that the job commit completes; nothing is renamed or
copied. ``setup_job`` & co. use them on S3 by default; this package holds their own API:
settings (``S3CommitterOptions``, Hadoop's ``fs.s3a.*`` names), what a job left
(``describe_s3_job``, ``list_outstanding_uploads``) and the task side's building blocks.

Modules: ``options``; ``job`` (setup, commit, abort, cleanup); ``staging`` and ``magic``
(the task sides); ``committer`` (both behind the ``Committer`` interface); ``inspect``.
"""

from aiocommit.engine.s3a.committer import S3ACommitter, s3_task_attempt, setup_magic_task
from aiocommit.engine.s3a.inspect import (
    S3JobFacts,
    S3Uploads,
    describe_s3_job,
    list_outstanding_uploads,
    s3_uploads,
)
from aiocommit.engine.s3a.job import abort_s3_job, cleanup_s3_job, commit_s3_job, setup_s3_job
from aiocommit.engine.s3a.magic import abort_magic_task, commit_magic_task, write_magic_file
from aiocommit.engine.s3a.options import HADOOP_KEYS, S3CommitterOptions
from aiocommit.engine.s3a.staging import abort_staging_task, commit_staging_task

__all__ = [
    "HADOOP_KEYS",
    "S3ACommitter",
    "S3CommitterOptions",
    "S3JobFacts",
    "S3Uploads",
    "abort_magic_task",
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
