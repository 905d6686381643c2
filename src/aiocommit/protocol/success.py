"""The ``_SUCCESS`` summary: Hadoop's ``ManifestSuccessData`` JSON (S3A ``SuccessData/1``)."""

from __future__ import annotations

import datetime
import getpass
import socket
import time

import msgspec

from aiocommit.errors import ManifestError
from aiocommit.protocol.codec import decode_or_raise, encode_pretty
from aiocommit.protocol.iostatistics import IOStatisticsSnapshot

SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
COMMITTER_NAME = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter"
#: Hadoop's SUCCESS_MARKER_FILE_LIMIT: how many committed file names go into ``filenames``.
FILENAMES_LIMIT = 100


class SuccessData(msgspec.Struct):
    """Fields Hadoop leaves out when null are ``UNSET`` here, so they are left out too."""

    name: str = SUCCESS_NAME
    timestamp: int = 0
    success: bool = True
    date: str = ""
    hostname: str = ""
    committer: str = COMMITTER_NAME
    description: str | msgspec.UnsetType = msgspec.UNSET
    job_id: str = msgspec.field(default="", name="jobId")
    job_id_source: str = msgspec.field(default="", name="jobIdSource")
    metrics: dict[str, int] = msgspec.field(default_factory=dict)
    diagnostics: dict[str, str] = msgspec.field(default_factory=dict)
    filenames: list[str] = msgspec.field(default_factory=list)
    iostatistics: IOStatisticsSnapshot = msgspec.field(default_factory=IOStatisticsSnapshot)
    state: str | msgspec.UnsetType = msgspec.UNSET
    stage: str | msgspec.UnsetType = msgspec.UNSET

    @classmethod
    def now(cls, job_id: str, job_id_source: str) -> SuccessData:
        moment = datetime.datetime.now(datetime.UTC)
        try:
            principal = getpass.getuser()
        except (KeyError, OSError):
            principal = "unknown"
        return cls(
            timestamp=int(time.time() * 1000),
            date=moment.isoformat().replace("+00:00", "Z") + "[Etc/UTC]",
            hostname=socket.gethostname(),
            job_id=job_id,
            job_id_source=job_id_source,
            diagnostics={"principal": principal, "stage": "committer_commit_job"},
        )


_decoder = msgspec.json.Decoder(SuccessData)


def encode_success(data: SuccessData) -> bytes:
    return encode_pretty(data)


def decode_success(data: bytes, *, path: str = "") -> SuccessData:
    success = decode_or_raise(_decoder, data, "_SUCCESS file", path)
    if success.name != SUCCESS_NAME:
        raise ManifestError(f"not a success file: name is {success.name!r}", path=path)
    return success
