"""The task manifest: Hadoop's ``TaskManifest`` JSON, version 1.

Field names, order and meaning follow what Hadoop 3.5.0 writes (manifests it wrote are
in ``tests/data/hadoop/``): a manifest Hadoop wrote loads here, and one written here
loads in Hadoop.
"""

from __future__ import annotations

from enum import IntEnum

import msgspec

from aiocommit.errors import ManifestError
from aiocommit.protocol.codec import decode_or_raise, encode_pretty
from aiocommit.protocol.iostatistics import IOStatisticsSnapshot

MANIFEST_TYPE = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest/1"
MANIFEST_VERSION = 1


class DirState(IntEnum):
    """State of a destination directory when the task committed (Hadoop's ``EntryStatus``)."""

    UNKNOWN = 0
    NOT_FOUND = 1
    FILE = 2
    DIR = 3
    CREATED_DIR = 4


class FileEntry(msgspec.Struct, omit_defaults=True, gc=False):
    """A file to rename: source URI, destination URI, size, and etag when the store has one."""

    source: str = msgspec.field(name="s")
    dest: str = msgspec.field(name="d")
    size: int = msgspec.field(name="z")
    etag: str | None = msgspec.field(default=None, name="e")


class DirEntry(msgspec.Struct, gc=False):
    """A destination directory, its state at task commit, and its depth below the destination."""

    dest: str = msgspec.field(name="d")
    state: int = msgspec.field(name="t")
    level: int = msgspec.field(name="l")


class TaskManifest(msgspec.Struct):
    extra_data: dict[str, str] = msgspec.field(default_factory=dict, name="extraData")
    type: str = MANIFEST_TYPE
    version: int = MANIFEST_VERSION
    job_id: str = msgspec.field(default="", name="jobId")
    job_attempt_number: int = msgspec.field(default=0, name="jobAttemptNumber")
    task_id: str = msgspec.field(default="", name="taskID")
    task_attempt_id: str = msgspec.field(default="", name="taskAttemptID")
    task_attempt_dir: str = msgspec.field(default="", name="taskAttemptDir")
    files: list[FileEntry] = msgspec.field(default_factory=list)
    directories: list[DirEntry] = msgspec.field(default_factory=list)
    iostatistics: IOStatisticsSnapshot = msgspec.field(default_factory=IOStatisticsSnapshot)

    @property
    def total_size(self) -> int:
        return sum(entry.size for entry in self.files)


_decoder = msgspec.json.Decoder(TaskManifest)


def encode_manifest(manifest: TaskManifest) -> bytes:
    """Pretty JSON with a two-space indent, as Hadoop writes it."""
    return encode_pretty(manifest)


def decode_manifest(data: bytes, *, path: str = "") -> TaskManifest:
    """Parse and check type and version; ``ManifestError`` for anything malformed."""
    manifest = decode_or_raise(_decoder, data, "task manifest", path)
    if manifest.type != MANIFEST_TYPE:
        raise ManifestError(f"wrong manifest type {manifest.type!r}", path=path)
    if manifest.version != MANIFEST_VERSION:
        raise ManifestError(f"unsupported manifest version {manifest.version}", path=path)
    return manifest
