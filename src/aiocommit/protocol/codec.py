"""JSON in and out for the committer's files: pretty, as Hadoop writes them, and a
``ManifestError`` naming the file for anything that does not parse."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from aiocommit.errors import ManifestError

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


def encode_pretty(value: object) -> bytes:
    """JSON with a two-space indent, as Hadoop's Jackson writer lays it out."""
    return msgspec.json.format(_encoder.encode(value), indent=2)


def decode_or_raise(decoder: msgspec.json.Decoder[T], data: bytes, what: str, path: str) -> T:
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as error:
        raise ManifestError(f"malformed {what}: {error}", path=path) from error
