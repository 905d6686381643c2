"""The multipart-upload contract: what the S3A committers need beyond ``Store``.

A store that can hold an upload open (uploaded, not visible) and make it visible later in
one call implements ``MultipartStore`` (S3 does).

Contract (checked by ``tests/contract/test_multipart_contract.py``):

* ``create_upload(path)`` returns an upload ID; nothing is visible at ``path``.
* ``upload_part(path, upload_id, number, data)`` returns the part's etag; parts are
  numbered from 1. A missing upload raises ``NotFound``.
* ``complete_upload(path, upload_id, etags)`` makes the object visible at ``path`` and
  returns its status. A second complete of an applied upload either succeeds (S3 does so
  for a while) or raises ``NotFound`` (documented): callers recognise the latter with
  ``multipart_etag`` (see ``committers.s3a.completed``). ``if_none_match`` refuses an existing
  object with ``AlreadyExists``.
* ``abort_upload(path, upload_id)`` discards the upload; returns False when it was not
  there (aborted, completed or never created).
* ``list_uploads(prefix)`` yields pages of the outstanding uploads whose path starts
  with ``prefix`` (a plain string prefix, as S3 lists them).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

import msgspec

from aiocommit.errors import UnsupportedStore
from aiocommit.stores.base import FileStatus, Store


class Upload(msgspec.Struct, frozen=True):
    """An outstanding multipart upload."""

    path: str
    upload_id: str
    #: milliseconds since the epoch, 0 when unknown
    initiated: int = 0


@runtime_checkable
class MultipartStore(Store, Protocol):
    """A store with deferred-visibility multipart uploads. See the module docstring."""

    async def create_upload(self, path: str) -> str: ...

    async def upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str: ...

    async def complete_upload(
        self, path: str, upload_id: str, etags: Sequence[str], *, if_none_match: bool = False
    ) -> FileStatus: ...

    async def abort_upload(self, path: str, upload_id: str) -> bool: ...

    def list_uploads(self, prefix: str) -> AsyncIterator[list[Upload]]: ...


def multipart_etag(etags: Sequence[str]) -> str:
    """The etag S3 gives the object a multipart upload of these parts completes into:
    MD5 of the parts' binary MD5s, ``-`` and the part count. Lets a retried complete that
    was applied be recognised by a ``stat`` of the destination."""
    digest = hashlib.md5(usedforsecurity=False)
    for etag in etags:
        digest.update(bytes.fromhex(etag.strip('"')))
    return f"{digest.hexdigest()}-{len(etags)}"


def supports_multipart(store: Store) -> bool:
    """Does ``store`` have multipart uploads? A ``StoreWrapper`` has the methods whatever
    it wraps, so the innermost store decides."""
    inner: object = store
    while hasattr(inner, "inner"):  # a StoreWrapper forwards what its inner store has
        inner = inner.inner
    return isinstance(store, MultipartStore) and isinstance(inner, MultipartStore)


def as_multipart(store: Store) -> MultipartStore:
    """``store`` as a ``MultipartStore``, or ``UnsupportedStore`` naming what is missing."""
    if not supports_multipart(store) or not isinstance(store, MultipartStore):
        raise UnsupportedStore(
            f"{type(store).__name__} has no multipart uploads; the staging and magic "
            "committers need a store such as S3"
        )
    return store
