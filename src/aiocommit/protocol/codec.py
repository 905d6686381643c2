"""JSON in and out for the committer's files: pretty, as Hadoop writes them, and a
``ManifestError`` naming the file for anything that does not parse."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from aiocommit.errors import ManifestError

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_any_decoder = msgspec.json.Decoder()


def encode_pretty(value: object) -> bytes:
    """JSON with a two-space indent, as Hadoop's Jackson writer lays it out."""
    return msgspec.json.format(_encoder.encode(value), indent=2)


def decode_or_raise(decoder: msgspec.json.Decoder[T], data: bytes, what: str, path: str) -> T:
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as error:
        raise ManifestError(f"malformed {what}: {error}", path=path) from error


def is_partial(data: bytes) -> bool:
    """True for bytes that are not one whole JSON document: an empty file, or one cut
    short by a write that stopped part-way (an ADLS create + append + flush whose append
    failed, written by a version that did not write state files whole)."""
    try:
        _any_decoder.decode(data)
    except msgspec.DecodeError:
        return True
    return False
