"""The resolved settings of one S3A job (staging, partitioned, magic): what its record and
commit plan keep. Callers give them through ``CommitOptions`` (``committer``,
``conflicts`` and ``committer.s3a``; Hadoop's ``fs.s3a.*`` names resolve there)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from aiocommit.committers.s3a.upload import MIN_PART_SIZE
from aiocommit.errors import InvalidInput, ManifestError
from aiocommit.options import CONFLICT_MODES, CommitOptions
from aiocommit.protocol.pending import MAGIC_COMMITTER, PARTITIONED_COMMITTER, STAGING_COMMITTER

COMMITTERS = ("staging", "magic")


@dataclass(frozen=True)
class S3CommitterOptions:
    """The resolved settings of one S3A job (Hadoop's names in brackets); built from
    ``CommitOptions`` (``from_options``), recorded with the job and in its commit plan.

    Attributes:
        committer: ``staging`` or ``magic`` (``fs.s3a.committer.name``).
        conflict_mode: ``fail``, ``append`` or ``replace``
            (``fs.s3a.committer.staging.conflict-mode``; Hadoop's default is ``append``
            for the partitioned committer and ``fail`` for the directory one).
        partitioned: apply the conflict mode per partition, not to the whole destination.
        part_size: bytes per uploaded part, at least 5 MiB (``fs.s3a.multipart.size``).
        abort_pending_uploads: job cleanup and abort also list and abort every outstanding
            upload under the destination (``fs.s3a.committer.abort.pending.uploads``); turn
            off when several jobs write below one destination at once.
    """

    committer: str = "staging"
    conflict_mode: str = "append"
    partitioned: bool = False
    part_size: int = 64 * 1024 * 1024
    abort_pending_uploads: bool = True

    def __post_init__(self) -> None:
        if self.committer not in COMMITTERS:
            raise InvalidInput(f"committer must be one of {COMMITTERS}, not {self.committer!r}")
        if self.conflict_mode not in CONFLICT_MODES:
            raise InvalidInput(
                f"conflict mode must be one of {CONFLICT_MODES}, not {self.conflict_mode!r}"
            )
        if not isinstance(self.part_size, int) or self.part_size < MIN_PART_SIZE:
            raise InvalidInput(
                f"part size must be at least {MIN_PART_SIZE}, not {self.part_size!r}"
            )

    @property
    def kind(self) -> str:
        """The committer's short name: ``staging``, ``partitioned`` or ``magic``."""
        if self.committer == "magic":
            return "magic"
        return "partitioned" if self.partitioned else "staging"

    @classmethod
    def of_kind(cls, kind: str, base: S3CommitterOptions | None = None) -> S3CommitterOptions:
        """``base`` (or the defaults) as the committer named ``kind``."""
        if kind not in ("staging", "partitioned", "magic"):
            raise InvalidInput(f"not an S3A committer: {kind!r}")
        base = base or cls()
        return dataclasses.replace(
            base,
            committer="magic" if kind == "magic" else "staging",
            partitioned=kind == "partitioned" or (kind == "magic" and base.partitioned),
        )

    @property
    def committer_name(self) -> str:
        """The committer's class name, as Hadoop's ``_SUCCESS`` carries it."""
        if self.committer == "magic":
            return MAGIC_COMMITTER
        return PARTITIONED_COMMITTER if self.partitioned else STAGING_COMMITTER

    def as_record(self) -> dict[str, str]:
        """These settings as the commit plan records them (``from_record`` reads them)."""
        return {
            "committer": self.committer,
            "conflict_mode": self.conflict_mode,
            "partitioned": str(self.partitioned).lower(),
            "part_size": str(self.part_size),
            "abort_pending_uploads": str(self.abort_pending_uploads).lower(),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, str]) -> S3CommitterOptions:
        try:
            return cls(
                committer=record["committer"],
                conflict_mode=record["conflict_mode"],
                partitioned=record["partitioned"] == "true",
                part_size=int(record["part_size"]),
                abort_pending_uploads=record["abort_pending_uploads"] == "true",
            )
        except (KeyError, ValueError) as error:
            raise ManifestError(f"commit plan: bad committer settings {record}: {error}") from None

    @classmethod
    def from_options(
        cls, options: CommitOptions, base: S3CommitterOptions | None = None
    ) -> S3CommitterOptions:
        """``base`` (or the defaults) with what ``options`` sets: the committer's name
        (when it is an S3A one), the conflict mode and scope, and the ``committer.s3a``
        leaves."""
        settings = base or cls()
        name = options.committer.name
        if name is not None and name not in ("manifest", "file"):
            settings = cls.of_kind("staging" if name == "directory" else name, settings)
        return with_options(settings, options)


def with_options(settings: S3CommitterOptions, options: CommitOptions) -> S3CommitterOptions:
    """``settings`` with the leaves ``options`` sets over them: the conflict mode and its
    scope (every committer's), the part size and whether cleanup aborts outstanding
    uploads. Unset leaves keep ``settings``' values."""
    changes: dict[str, object] = {}
    if options.conflicts.mode is not None:
        changes["conflict_mode"] = options.conflicts.mode
    if options.conflicts.per_partition is not None:
        changes["partitioned"] = options.conflicts.per_partition
    if options.committer.s3a.part_size is not None:
        changes["part_size"] = options.committer.s3a.part_size
    if options.committer.s3a.abort_pending_uploads is not None:
        changes["abort_pending_uploads"] = options.committer.s3a.abort_pending_uploads
    return dataclasses.replace(settings, **changes) if changes else settings  # type: ignore[arg-type]
