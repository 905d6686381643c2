"""The lean ADLS Gen2 (DFS REST) request path: one shared aiohttp session, prepared headers,
SharedKey / SAS / bearer-token auth, no SDK client objects or policy pipeline per call.

Hand-written because it is the hot path: building two ``DataLakeFileClient`` objects and
running azure-core's pipeline costs ~3 ms CPU per rename, this ~0.3 ms (issue #11). An account
key (``SharedKey``) or SAS token (``SasToken``) needs no SDK at all: azure-core (49 modules,
3,000 objects for the host's garbage collector to walk in every full collection) is loaded
only by a token credential (``AsyncTokenCredential``, whose tokens are refreshed here
before they expire), and ``azure-storage-file-datalake`` (26,000 objects) never.

Signing follows "Authorize with Shared Key" (services version 2009-09-19 and later): the
string-to-sign holds the verb, eleven standard headers by position (``Content-Length: 0``
as empty), the ``x-ms-*`` headers lower-cased and sorted, and ``/ACCOUNT`` + the encoded
path as sent + each query name lower-cased with its decoded value. The URL is sent exactly
as signed (``yarl.URL(..., encoded=True)``).

At most ``runtime.loop_turns.STARTS_PER_TURN`` requests start in one event-loop turn. Non-2xx
answers raise ``DfsResponseError``; aiohttp's own errors pass through. The store adapter
(``aiocommit.stores.adls``) translates both, once.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import sys
import time
from collections.abc import AsyncIterator
from email.utils import formatdate
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
import msgspec
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from aiocommit.runtime.loop_turns import StartsPerTurn

if TYPE_CHECKING:
    from azure.core.credentials_async import AsyncTokenCredential

#: the REST API version sent (supported by azure-storage-file-datalake 12.26)
API_VERSION = "2025-01-05"
#: the OAuth scope of Azure Storage
STORAGE_SCOPE = "https://storage.azure.com/.default"
#: refresh a bearer token this many seconds before it expires
TOKEN_REFRESH_MARGIN = 300.0


class SharedKey:
    """An account's name and base64 key, for Shared Key signing (the repr hides the key)."""

    __slots__ = ("account", "key")

    def __init__(self, account: str, key: str) -> None:
        self.account = account
        self.key = key

    def __repr__(self) -> str:
        return f"SharedKey({self.account!r}, key=...)"


class SasToken:
    """A shared access signature, without its leading ``?`` (the repr hides it)."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token.lstrip("?")

    def __repr__(self) -> str:
        return "SasToken(...)"


def is_authentication_error(error: BaseException) -> bool:
    """Whether ``error`` is azure-core's ``ClientAuthenticationError`` (a token credential
    that could not get a token). Not imported for it: only a loaded azure-core raises it."""
    exceptions = sys.modules.get("azure.core.exceptions")
    return exceptions is not None and isinstance(error, exceptions.ClientAuthenticationError)


class DfsResponseError(Exception):
    """A non-2xx answer: status, ``x-ms-error-code`` (or the body's code) and message."""

    def __init__(self, status: int, code: str, message: str, headers: CIMultiDictProxy[str]):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


class DfsResponse(msgspec.Struct, frozen=True, gc=False):
    """What a successful call returns: status and the headers the adapter reads."""

    status: int
    headers: CIMultiDictProxy[str]
    body: bytes = b""


class PathItem(msgspec.Struct, frozen=True, gc=False):
    """One entry of a Path-List page (strings on the wire for lengths and flags)."""

    name: str
    isDirectory: str | bool = "false"
    contentLength: str | int = "0"
    etag: str | None = None

    @property
    def is_dir(self) -> bool:
        return self.isDirectory is True or self.isDirectory == "true"


class PathList(msgspec.Struct, frozen=True, gc=False):
    paths: list[PathItem] = []


#: a body larger than this is sent in slices of it: aiohttp warns (``ResourceWarning``)
#: that a larger ``bytes`` body may hold the loop, and a commit plan's part is up to 8 MB
BODY_SLICE_BYTES = 1 << 20

#: aiohttp would add ``Content-Type: application/octet-stream`` to a PUT after signing
_SKIP_AUTO_HEADERS = frozenset({"Content-Type"})

_decode_paths = msgspec.json.Decoder(PathList).decode


async def _slices(body: bytes) -> AsyncIterator[memoryview]:
    """``body`` in ``BODY_SLICE_BYTES`` slices (no copies), sent under the request's own
    ``Content-Length``."""
    view = memoryview(body)  # not released here: the transport may still hold a slice
    for start in range(0, len(body), BODY_SLICE_BYTES):
        yield view[start : start + BODY_SLICE_BYTES]


def quote_path(rel: str) -> str:
    """Percent-encode a filesystem-relative path for the URL (``/`` kept)."""
    return quote(rel, safe="/")


def _error_details(body: bytes) -> tuple[str, str]:
    """(code, first message line) from a JSON (DFS) or XML (blob-style) error body."""
    text = body.decode("utf-8", "replace")
    try:
        error = msgspec.json.decode(body).get("error", {})
        return str(error.get("code", "")), str(error.get("message", "")).split("\n", 1)[0]
    except (msgspec.DecodeError, AttributeError):
        pass
    code = text.partition("<Code>")[2].partition("</Code>")[0]
    message = text.partition("<Message>")[2].partition("</Message>")[0]
    return code, message.split("\n", 1)[0]


class LeanDfsClient:
    """Signed DFS REST calls on one filesystem over a shared session."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        endpoint: str,
        filesystem: str,
        credential: SharedKey | SasToken | AsyncTokenCredential | None,
        account: str,
        *,
        connection_timeout: float,
        read_timeout: float,
    ) -> None:
        self.session = session
        endpoint = endpoint.rstrip("/")
        self._base = f"{endpoint}/{quote(filesystem, safe='')}"
        # the path part of the base URL, signed as sent
        base = URL(self._base, encoded=True)
        self._base_path = base.raw_path.rstrip("/")
        self._origin = str(base.origin())
        self.filesystem = filesystem
        self._source_prefix = f"/{quote(filesystem, safe='')}/"
        self._account = account
        self._key: bytes | None = None
        self._sas: str | None = None
        self._token_credential: AsyncTokenCredential | None = None
        if isinstance(credential, SharedKey):
            self._key = base64.b64decode(credential.key)
            self._account = credential.account
        elif isinstance(credential, SasToken):
            self._sas = credential.token
        elif credential is not None:
            self._token_credential = credential
        self._token: str | None = None
        self._token_expires = 0.0
        self._token_lock = asyncio.Lock()
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connection_timeout, sock_read=read_timeout
        )
        self._date_second = -1
        self._date = ""
        self._starts = StartsPerTurn()

    # -- auth --------------------------------------------------------------------------------

    def _now_header(self) -> str:
        now = int(time.time())
        if now != self._date_second:
            self._date_second = now
            self._date = formatdate(now, usegmt=True)
        return self._date

    async def _bearer(self) -> str:
        if self._token is not None and time.time() < self._token_expires - TOKEN_REFRESH_MARGIN:
            return self._token
        async with self._token_lock:
            if self._token is None or time.time() >= self._token_expires - TOKEN_REFRESH_MARGIN:
                assert self._token_credential is not None
                try:
                    access = await self._token_credential.get_token(STORAGE_SCOPE)
                except Exception as error:
                    if not is_authentication_error(error):
                        raise
                    # no credential could give a token: an answer the adapter translates
                    # like the service's own 401, not an SDK error escaping the edge
                    reason = str(getattr(error, "message", None) or error).splitlines()[0]
                    raise DfsResponseError(
                        401, "NoToken", reason, CIMultiDictProxy(CIMultiDict())
                    ) from error
                self._token, self._token_expires = access.token, float(access.expires_on)
        return self._token

    def sign(
        self, method: str, raw_path: str, query: dict[str, str], headers: dict[str, str]
    ) -> str:
        """The SharedKey signature of a request; ``headers`` hold every header sent, their
        names in lower case (as ``request`` builds them)."""
        assert self._key is not None
        get = headers.get
        length = get("content-length", "")
        text = (
            f"{method}\n{get('content-encoding', '')}\n{get('content-language', '')}\n"
            f"{'' if length == '0' else length}\n{get('content-md5', '')}\n"
            f"{get('content-type', '')}\n{get('date', '')}\n{get('if-modified-since', '')}\n"
            f"{get('if-match', '')}\n{get('if-none-match', '')}\n"
            f"{get('if-unmodified-since', '')}\n{get('range', '')}\n"
        )
        for name in sorted(name for name in headers if name.startswith("x-ms-")):
            text += f"{name}:{headers[name].strip()}\n"
        text += f"/{self._account}{raw_path}"
        for name in sorted(query):
            text += f"\n{name.lower()}:{query[name]}"
        return base64.b64encode(hmac.digest(self._key, text.encode(), "sha256")).decode()

    # -- requests ----------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        rel: str | None,
        query: dict[str, str],
        headers: dict[str, str],
        *,
        read_body: bool = False,
        body: bytes = b"",
    ) -> DfsResponse:
        """One call on ``rel`` (a filesystem-relative path, None for the filesystem itself).

        ``query`` values are plain (encoded here); ``headers`` are sent as given plus
        version, date and auth; their names must be lower case; ``body`` is sent with
        ``PUT``, ``POST`` and ``PATCH``. Raises ``DfsResponseError`` for a non-2xx answer.
        """
        await self._starts.wait()
        raw_path = self._base_path if rel is None else f"{self._base_path}/{quote_path(rel)}"
        headers["x-ms-version"] = API_VERSION
        headers["x-ms-date"] = self._now_header()
        if method in ("PUT", "POST", "PATCH"):
            headers["content-length"] = str(len(body))
        query_text = "&".join(f"{name}={quote(value, safe='')}" for name, value in query.items())
        if self._key is not None:
            signature = self.sign(method, raw_path, query, headers)
            headers["authorization"] = f"SharedKey {self._account}:{signature}"
        elif self._sas is not None:
            query_text = f"{query_text}&{self._sas}" if query_text else self._sas
        elif self._token_credential is not None:
            headers["authorization"] = f"Bearer {await self._bearer()}"
        url = self._origin + raw_path
        if query_text:
            url = f"{url}?{query_text}"
        async with self.session.request(
            method,
            URL(url, encoded=True),
            headers=headers,
            data=(_slices(body) if len(body) > BODY_SLICE_BYTES else body) or None,
            timeout=self._timeout,
            skip_auto_headers=_SKIP_AUTO_HEADERS,
        ) as response:
            status = response.status
            if status < 300:
                body = await response.read() if read_body else b""
                return DfsResponse(status, response.headers, body)
            body = await response.read()
            code = response.headers.get("x-ms-error-code", "")
            body_code, message = _error_details(body) if body else ("", "")
            raise DfsResponseError(
                status, code or body_code, message or str(response.reason), response.headers
            )

    async def rename(self, source_rel: str, dest_rel: str, headers: dict[str, Any]) -> None:
        """Path-Create with ``x-ms-rename-source``, following ``x-ms-continuation``."""
        query = {"mode": "legacy"}
        source = self._source_prefix + quote_path(source_rel)
        # as the SDK: with a SAS, the source carries it too (it authorizes the source)
        headers["x-ms-rename-source"] = f"{source}?{self._sas}" if self._sas else source
        while True:
            response = await self.request("PUT", dest_rel, query, dict(headers))
            continuation = response.headers.get("x-ms-continuation")
            if not continuation:
                return
            query = {"mode": "legacy", "continuation": continuation}

    async def create(self, rel: str, resource: str, headers: dict[str, str]) -> str | None:
        """Path-Create of a ``"file"`` or ``"directory"`` (parents are made; an existing
        directory stays); its etag as sent."""
        response = await self.request("PUT", rel, {"resource": resource}, headers)
        return response.headers.get("ETag")

    async def append(self, rel: str, position: int, data: bytes) -> None:
        """Path-Update ``action=append``: ``data`` at ``position``, not yet committed."""
        query = {"action": "append", "position": str(position)}
        await self.request("PATCH", rel, query, {}, body=data)

    async def flush(self, rel: str, position: int, etag: str | None) -> str | None:
        """Path-Update ``action=flush&close=true``: commits the file's appended data up to
        ``position`` if its etag is still ``etag``; the new etag as sent."""
        query = {"action": "flush", "position": str(position), "close": "true"}
        headers = {} if etag is None else {"if-match": etag}
        response = await self.request("PATCH", rel, query, headers)
        return response.headers.get("ETag")

    async def delete(self, rel: str, recursive: bool) -> None:
        """Path-Delete, following ``x-ms-continuation`` (paged deletes) to the end."""
        query = {"recursive": "true" if recursive else "false"}
        if recursive and self._token_credential is not None:
            # as the SDK (API >= 2023-08-03): the ACL checks of a large tree are paged
            # instead of timing out; the delete itself stays atomic, in the last call
            query["paginated"] = "true"
        while True:
            response = await self.request("DELETE", rel, query, {})
            continuation = response.headers.get("x-ms-continuation")
            if not continuation:
                return
            query = {**query, "continuation": continuation}

    async def read(self, rel: str) -> DfsResponse:
        """Path-Read (``GET``) of a whole file: its headers and body."""
        return await self.request("GET", rel, {}, {}, read_body=True)

    async def properties(self, rel: str) -> CIMultiDictProxy[str]:
        """Path-GetProperties (``HEAD``): the response headers."""
        return (await self.request("HEAD", rel, {}, {})).headers

    async def list_page(
        self, rel: str, max_results: int, continuation: str | None, *, recursive: bool = False
    ) -> tuple[list[PathItem], str | None]:
        """One Path-List page of ``rel``'s direct children (``recursive``: everything
        below it) and the next continuation."""
        query = {
            "resource": "filesystem",
            "recursive": "true" if recursive else "false",
            "maxResults": str(max_results),
        }
        if rel:
            query["directory"] = rel
        if continuation:
            query["continuation"] = continuation
        response = await self.request("GET", None, query, {}, read_body=True)
        return _decode_paths(response.body).paths, response.headers.get("x-ms-continuation")
