"""Settings of the S3A committers (staging, partitioned, magic) and Hadoop's names for
them (``fs.s3a.*``)."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiocommit.committers.s3a.upload import MIN_PART_SIZE
from aiocommit.errors import InvalidInput, ManifestError, UnknownOption
from aiocommit.options import CONFLICT_MODES
from aiocommit.protocol.pending import MAGIC_COMMITTER, PARTITIONED_COMMITTER, STAGING_COMMITTER

COMMITTERS = ("staging", "magic")


#: the Hadoop settings of the zero-rename committers that ``S3CommitterOptions`` reads
HADOOP_KEYS = frozenset(
    {
        "fs.s3a.committer.name",
        "fs.s3a.committer.staging.conflict-mode",
        "fs.s3a.multipart.size",
        "fs.s3a.committer.abort.pending.uploads",
    }
)


@dataclass(frozen=True)
class S3CommitterOptions:
    """Settings of the zero-rename committers (Hadoop's names in brackets).

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
    def from_settings(
        cls, settings: Mapping[str, str], *, others: Iterable[str] = ()
    ) -> S3CommitterOptions | None:
        """From the ``fs.s3a.*`` keys of ``settings`` (with or without ``spark.hadoop.``),
        None when there are none. Keys in ``others`` (the S3 client's settings) are
        skipped. ``UnknownOption`` for any other ``fs.s3a.*`` key that is not a committer
        setting (``HADOOP_KEYS``), ``ValueError`` for a bad value."""
        skipped = frozenset(others)
        known = sorted(HADOOP_KEYS | skipped)
        found: dict[str, str] = {}
        for key, value in settings.items():
            bare = key.strip().removeprefix("spark.hadoop.")
            if not bare.startswith("fs.s3a.") or bare in skipped:
                continue
            if bare not in HADOOP_KEYS:
                close = difflib.get_close_matches(bare, known, n=1)
                raise UnknownOption(key, close[0] if close else None)
            found[bare] = value
        return cls.from_hadoop(found) if found else None

    @classmethod
    def from_hadoop(cls, settings: Mapping[str, str]) -> S3CommitterOptions:
        """From ``fs.s3a.*`` settings (unknown keys ignored)."""
        values: dict[str, object] = {}
        name = settings.get("fs.s3a.committer.name")
        if name in ("directory", "partitioned"):
            values["committer"] = "staging"
            values["partitioned"] = name == "partitioned"
        elif name:
            values["committer"] = name
        if "fs.s3a.committer.staging.conflict-mode" in settings:
            values["conflict_mode"] = settings["fs.s3a.committer.staging.conflict-mode"]
        if "fs.s3a.multipart.size" in settings:
            values["part_size"] = int(settings["fs.s3a.multipart.size"])
        if "fs.s3a.committer.abort.pending.uploads" in settings:
            values["abort_pending_uploads"] = (
                settings["fs.s3a.committer.abort.pending.uploads"].lower() == "true"
            )
        return cls(**values)  # type: ignore[arg-type]
