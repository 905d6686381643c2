"""The S3A committers (Hadoop's staging, partitioned and magic committers): output is
uploaded as multipart uploads that the job commit completes; nothing is renamed or
copied. They run through the one API (``setup_job``, ``setup_task``, ``commit_task``,
``commit_job`` ...; ``CommitOptions.committer`` chooses one, staging by default on S3);
this package holds the committers, their stages and what a job left
(``describe_s3_job``, ``list_outstanding_uploads``).

The committers, as Hadoop's: ``StagingCommitter``, ``PartitionedStagingCommitter``
(``staging``) and ``MagicCommitter`` (``magic``), over one shared job side
(``S3ACommitter`` in ``committer``; ``job``: setup, commit, abort, cleanup).
``options``: the resolved settings of one job; ``inspect``: what a job left.
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

from aiocommit.committers.s3a.committer import S3ACommitter
from aiocommit.committers.s3a.inspect import (
    S3JobFacts,
    S3Uploads,
    abort_old_uploads,
    describe_s3_job,
    list_outstanding_uploads,
    s3_uploads,
)
from aiocommit.committers.s3a.magic import MagicCommitter
from aiocommit.committers.s3a.options import S3CommitterOptions
from aiocommit.committers.s3a.staging import PartitionedStagingCommitter, StagingCommitter

__all__ = [
    "MagicCommitter",
    "PartitionedStagingCommitter",
    "S3ACommitter",
    "S3CommitterOptions",
    "S3JobFacts",
    "S3Uploads",
    "StagingCommitter",
    "abort_old_uploads",
    "describe_s3_job",
    "list_outstanding_uploads",
    "s3_uploads",
]
