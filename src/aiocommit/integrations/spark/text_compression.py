"""Compressed CSV and JSON files as Spark's text writers write them (Hadoop's codecs):
``gzip`` (``.gz``), ``bzip2`` (``.bz2``), ``deflate`` (``.deflate``, a zlib stream),
``lz4`` and ``snappy`` (``.lz4``, ``.snappy``: Hadoop's block format, each block its
4-byte big-endian length, then the compressed chunk's length and bytes). Spark's pip
build has no ``zstd`` codec for text (``CODEC_NOT_AVAILABLE``), so neither do we.
"""

from __future__ import annotations

import bz2
import gzip
import io
import struct
import zlib
from typing import BinaryIO, cast

import pyarrow as pa

#: Spark's text codec name -> file name suffix (Hadoop's codecs' default extensions)
TEXT_CODEC_EXTENSIONS = {
    "gzip": ".gz",
    "bzip2": ".bz2",
    "deflate": ".deflate",
    "lz4": ".lz4",
    "snappy": ".snappy",
}
TEXT_CODECS = ("none", "uncompressed", *TEXT_CODEC_EXTENSIONS)

#: uncompressed bytes per Hadoop block: below the 256 KiB buffers Hadoop's lz4 and
#: snappy decompressors read blocks into
_BLOCK = 64 * 1024


class _ZlibFile(io.RawIOBase):
    """A write-only zlib stream (Hadoop's ``DefaultCodec``/``DeflateCodec``)."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._compressor = zlib.compressobj(6)

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._file.write(self._compressor.compress(data))
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._file.write(self._compressor.flush())
            self._file.close()
        super().close()


class _HadoopBlockFile(io.RawIOBase):
    """Hadoop's ``BlockCompressorStream`` with a raw ``lz4`` or ``snappy`` codec."""

    def __init__(self, path: str, codec: str) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._codec = pa.Codec("lz4_raw" if codec == "lz4" else "snappy")
        self._pending = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._pending += data
        while len(self._pending) >= _BLOCK:
            self._block(bytes(self._pending[:_BLOCK]))
            del self._pending[:_BLOCK]
        return len(data)

    def _block(self, raw: bytes) -> None:
        packed = self._codec.compress(raw, asbytes=True)
        self._file.write(struct.pack(">II", len(raw), len(packed)) + packed)

    def close(self) -> None:
        if not self.closed:
            if self._pending:
                self._block(bytes(self._pending))
            self._file.close()
        super().close()


def open_text(path: str, compression: str | None) -> BinaryIO:
    """A binary file that compresses what is written with ``compression`` (None: plain)."""
    if compression is None:
        return open(path, "wb")
    if compression == "gzip":
        return cast(BinaryIO, gzip.open(path, "wb", compresslevel=6))
    if compression == "bzip2":
        return cast(BinaryIO, bz2.open(path, "wb"))
    if compression == "deflate":
        return cast(BinaryIO, io.BufferedWriter(_ZlibFile(path)))
    if compression in ("lz4", "snappy"):
        return cast(BinaryIO, io.BufferedWriter(_HadoopBlockFile(path, compression)))
    raise ValueError(f"no text codec {compression!r}")


def text_extension(fmt: str, compression: str | None) -> str:
    """``.csv``, ``.json.gz``, ``.csv.bz2``..."""
    return f".{fmt}" + (TEXT_CODEC_EXTENSIONS[compression] if compression else "")
