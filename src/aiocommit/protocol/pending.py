"""The S3A committers' files: ``.pending`` (one upload) and ``.pendingset`` (a task's).

Field names and versions as Hadoop's ``org.apache.hadoop.fs.s3a.commit.files``
``SinglePendingCommit`` and ``PendingSet`` serialise them with Jackson (version 2; Hadoop
reads them with unknown fields allowed). Where everything lives under a destination::

    DEST/_temporary/JOB/NN/pendingsets/TASK.pendingset      (committed task, both committers)
    DEST/_temporary/JOB/NN/uploads/ATTEMPT/ID.upload        (aiocommit: an upload started by
                                                             an attempt not yet committed)
    DEST/_temporary/JOB/NN/commit-plan.json                 (which pending sets a commit took)
    DEST/__magic/JOB/NN/tasks/ATTEMPT/__base/REL            (magic: zero-byte marker)
    DEST/__magic/JOB/NN/tasks/ATTEMPT/__base/REL.pending    (magic: the upload of DEST/REL)
"""

from __future__ import annotations

import hashlib
import time

import msgspec

from aiocommit.errors import ManifestError
from aiocommit.protocol.codec import decode_or_raise, encode_pretty
from aiocommit.protocol.iostatistics import IOStatisticsSnapshot
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.base import join

VERSION = 2
PENDING_SUFFIX = ".pending"
PENDINGSET_SUFFIX = ".pendingset"
UPLOAD_RECORD_SUFFIX = ".upload"
MAGIC = "__magic"
BASE = "__base"

#: the committer names ``_SUCCESS`` carries, as Hadoop's S3A committers write them
STAGING_COMMITTER = "org.apache.hadoop.fs.s3a.commit.staging.DirectoryStagingCommitter"
PARTITIONED_COMMITTER = "org.apache.hadoop.fs.s3a.commit.staging.PartitionedStagingCommitter"
MAGIC_COMMITTER = "org.apache.hadoop.fs.s3a.commit.magic.MagicS3GuardCommitter"


class SinglePendingCommit(msgspec.Struct, kw_only=True):
    """One multipart upload, uploaded and not completed."""

    version: int = VERSION
    #: the pending file's own name; Hadoop ignores its persisted value
    filename: str | None = None
    uri: str = ""
    upload_id: str = msgspec.field(name="uploadId")
    bucket: str
    destination_key: str = msgspec.field(name="destinationKey")
    created: int = 0
    saved: int = 0
    date: str = ""
    job_id: str = msgspec.field(default="", name="jobId")
    task_id: str = msgspec.field(default="", name="taskId")
    text: str = ""
    etags: list[str] = msgspec.field(default_factory=list)
    extra_data: dict[str, str] = msgspec.field(default_factory=dict, name="extraData")
    iostatistics: IOStatisticsSnapshot = msgspec.field(default_factory=IOStatisticsSnapshot)
    length: int = 0

    def touch(self) -> None:
        millis = int(time.time() * 1000)
        self.created = self.created or millis
        self.saved = millis
        self.date = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(millis / 1000))

    def validate(self, path: str) -> None:
        """Hadoop's ``SinglePendingCommit.validate`` checks, as ``ManifestError``."""
        problems = [
            (self.version != VERSION, f"wrong version: {self.version}"),
            (not self.bucket, "empty bucket"),
            (not self.destination_key, "empty destination"),
            (not self.upload_id, "empty uploadId"),
            (self.length < 0, f"invalid length: {self.length}"),
            (not self.uri, "empty uri"),
            (any(not e for e in self.etags), "empty etag"),
        ]
        for failed, message in problems:
            if failed:
                raise ManifestError(f"invalid pending commit: {message}", path=path)


class PendingSet(msgspec.Struct, kw_only=True):
    """A task's pending commits: what its task commit leaves for the job commit."""

    version: int = VERSION
    job_id: str = msgspec.field(default="", name="jobId")
    commits: list[SinglePendingCommit] = msgspec.field(default_factory=list)
    extra_data: dict[str, str] = msgspec.field(default_factory=dict, name="extraData")
    iostatistics: IOStatisticsSnapshot = msgspec.field(default_factory=IOStatisticsSnapshot)

    def validate(self, path: str) -> None:
        """Hadoop's ``PendingSet.validate``: each commit valid, no destination twice."""
        if self.version != VERSION:
            raise ManifestError(f"invalid pending set: wrong version {self.version}", path=path)
        seen: set[str] = set()
        for commit in self.commits:
            commit.validate(path)
            if commit.destination_key in seen:
                raise ManifestError(
                    f"destination {commit.destination_key} is written to by more than one "
                    "pending commit",
                    path=path,
                )
            seen.add(commit.destination_key)


_pending_decoder = msgspec.json.Decoder(SinglePendingCommit)
_pendingset_decoder = msgspec.json.Decoder(PendingSet)


def encode_pending(commit: SinglePendingCommit) -> bytes:
    return encode_pretty(commit)


def decode_pending(data: bytes, *, path: str = "") -> SinglePendingCommit:
    commit = decode_or_raise(_pending_decoder, data, "pending commit", path)
    commit.filename = path or commit.filename
    commit.validate(path)
    return commit


def encode_pendingset(pending: PendingSet) -> bytes:
    return encode_pretty(pending)


def decode_pendingset(data: bytes, *, path: str = "") -> PendingSet:
    pending = decode_or_raise(_pendingset_decoder, data, "pending set", path)
    pending.validate(path)
    return pending


def pendingsets_dir(layout: JobLayout) -> str:
    return join(layout.job_attempt_dir, "pendingsets")


def pendingset_path(layout: JobLayout, task_id: str) -> str:
    return join(pendingsets_dir(layout), task_id + PENDINGSET_SUFFIX)


class UploadRecord(msgspec.Struct, frozen=True):
    """An upload a task attempt started, saved as it starts: until the attempt's task
    commit names it in a pending set, this is how the job's abort and cleanup know the
    upload is the job's own (its key is a final key, shared with other jobs)."""

    path: str
    upload_id: str
    #: set when the create was sent more than once (an answer may have been lost): the
    #: client clock (ms) of its first and last send; an upload of ``path`` started in
    #: between that no job names is this attempt's, never answered
    retried_create: tuple[int, int] | None = None


_upload_record_decoder = msgspec.json.Decoder(UploadRecord)


def encode_upload_record(record: UploadRecord) -> bytes:
    return msgspec.json.encode(record)


def decode_upload_record(data: bytes, *, path: str = "") -> UploadRecord:
    return decode_or_raise(_upload_record_decoder, data, "upload record", path)


def uploads_dir(layout: JobLayout) -> str:
    """Where the job's task attempts record the uploads they start."""
    return join(layout.job_attempt_dir, "uploads")


def attempt_uploads_dir(layout: JobLayout, task_attempt_id: str) -> str:
    return join(uploads_dir(layout), task_attempt_id)


#: the name a record with ``retried_create`` ends in: always read, even when its own
#: upload is settled (its lost uploads are found from it)
RETRIED_CREATE_SUFFIX = ".retried" + UPLOAD_RECORD_SUFFIX


def upload_digest(upload_id: str) -> str:
    """An upload ID as a short file-name-safe digest (IDs are long, of any bytes)."""
    return hashlib.sha256(upload_id.encode()).hexdigest()[:32]


def upload_record_name(upload_id: str, *, retried_create: bool = False) -> str:
    """The file name of an upload's record: its digest, then the suffix."""
    suffix = RETRIED_CREATE_SUFFIX if retried_create else UPLOAD_RECORD_SUFFIX
    return upload_digest(upload_id) + suffix


def upload_record_path(
    layout: JobLayout, task_attempt_id: str, upload_id: str, *, retried_create: bool = False
) -> str:
    """The record of one upload of a task attempt."""
    name = upload_record_name(upload_id, retried_create=retried_create)
    return join(attempt_uploads_dir(layout, task_attempt_id), name)


def magic_job_dir(layout: JobLayout) -> str:
    return join(layout.dest, MAGIC, layout.job_id)


def magic_attempt_base(layout: JobLayout, task_attempt_id: str) -> str:
    """Where a magic task attempt writes: ``REL`` here becomes ``DEST/REL`` at job commit."""
    return join(magic_job_dir(layout), f"{layout.attempt:02d}", "tasks", task_attempt_id, BASE)
