"""An ADLS Gen2 (hierarchical namespace, DFS endpoint) emulator on aiohttp.

Serves the REST subset that ``aiocommit.stores.adls`` sends through the real
``azure-storage-file-datalake`` SDK, path-style (``http://127.0.0.1:PORT/ACCOUNT/FS/PATH``),
so the SDK cannot tell it from the service for these calls:

* filesystem create/delete (``restype=container`` or ``resource=filesystem``);
* path create (``resource=file|directory``; parents are created; ``If-None-Match: *``);
* append + flush (contiguous positions, ``If-Match`` on flush; the etag changes on flush);
* read (``GET``, ``x-ms-range``/``Range``; ``416 InvalidRange`` on an empty file, as the
  blob endpoint does) and get properties (``HEAD``; directories carry
  ``x-ms-meta-hdi_isfolder: true``);
* list paths (``resource=filesystem``, ``directory``, ``recursive``, ``maxResults``,
  ``continuation`` / ``x-ms-continuation``; listing a file returns that file);
* delete (``recursive``; ``409 DirectoryNotEmpty``);
* rename (``x-ms-rename-source`` with ``x-ms-source-if-match``/``-none-match`` and
  destination ``If-Match``/``If-None-Match``); etags (``0x8D…``) change on every write and
  are preserved by rename.

Errors carry ``x-ms-error-code`` and Azure's bodies (JSON on DFS calls, XML on the blob-style
GET/HEAD). Auth: ``SharedKey ACCOUNT:SIGNATURE`` is verified against the emulator's key
(``403 AuthenticationFailed`` on a wrong signature, see ``string_to_sign``), a SAS (``sig=``
in the query) and a bearer token are accepted unchecked, an anonymous request gets
``401 NoAuthenticationInformation``.

Faults are injected at the HTTP level from ``Faults`` (mutable at run time, seeded):
latency, random ``503 ServerBusy`` with ``Retry-After``, rename applied and then answered
with ``500 OperationTimedOut``, and scripted one-off errors or dropped connections
(``Faults.inject``). A control endpoint ``/_emulator/faults`` (GET, PUT JSON) and
``/_emulator/stats`` lets another process change faults, and ``/_emulator/seed`` (POST
JSON ``{"filesystem": FS, "files": [[PATH, SIZE], ...]}``) creates files in bulk for a
bench's preparation; loopback only.

CLI: ``python -m aiocommit_testing.adls_emulator --port N`` prints the environment
(``AIOCOMMIT_ADLS_ENDPOINT``, ``AZURE_STORAGE_ACCOUNT_KEY``) for ``abfs://FS@ACCOUNT.dfs.core.windows.net/``;
``AdlsEmulatorServer`` runs it so for a block (``child_server.run_child_server``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import contextlib
import dataclasses
import hashlib
import hmac
import ipaddress
import itertools
import json
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from email.utils import formatdate, parsedate_to_datetime
from typing import Any
from urllib.parse import unquote
from xml.sax.saxutils import escape

from aiohttp import web

from aiocommit_testing.child_server import ChildServer, until_signalled

DEFAULT_ACCOUNT = "devstoreaccount1"
#: Not a secret: the emulator's account key (signatures are checked against it).
DEFAULT_KEY = base64.b64encode(b"aiocommit-adls-emulator-account-key-not-a-secret!").decode()
MAX_RESULTS = 5000

_MESSAGES = {
    "AuthenticationFailed": "Server failed to authenticate the request. Make sure the value of "
    "Authorization header is formed correctly including the signature.",
    "AuthorizationPermissionMismatch": "This request is not authorized to perform this "
    "operation using this permission.",
    "BlobNotFound": "The specified blob does not exist.",
    "ConditionNotMet": "The condition specified using HTTP conditional header(s) is not met.",
    "ContainerAlreadyExists": "The specified container already exists.",
    "ContainerNotFound": "The specified container does not exist.",
    "DirectoryNotEmpty": "The recursive query parameter value must be true to delete a "
    "non-empty directory.",
    "FilesystemAlreadyExists": "The specified filesystem already exists.",
    "FilesystemNotFound": "The specified filesystem does not exist.",
    "InternalError": "The server encountered an internal error. Please retry the request.",
    "InvalidQueryParameterValue": "Value for one of the query parameters specified in the "
    "request URI is invalid.",
    "InvalidRenameSourcePath": "The source directory cannot be the same as the destination "
    "directory, nor can the destination be a subdirectory of the source directory.",
    "InvalidSourceOrDestinationResourceType": "The source and destination resource type must "
    "be identical.",
    "LeaseNotPresent": "There is currently no lease on the resource.",
    "InvalidFlushPosition": "The uploaded data is not contiguous or the position query "
    "parameter value is not equal to the length of the file after appending the uploaded data.",
    "InvalidRange": "The range specified is invalid for the current size of the resource.",
    "NoAuthenticationInformation": "Server failed to authenticate the request. Please refer to "
    "the information in the www-authenticate header.",
    "OperationTimedOut": "Operation could not be completed within the specified time.",
    "PathAlreadyExists": "The specified path already exists.",
    "PathConflict": "The specified path, or an element of the path, exists and its resource "
    "type is invalid for this operation.",
    "PathNotFound": "The specified path does not exist.",
    "RenameDestinationParentPathNotFound": "The parent directory of the destination path does "
    "not exist.",
    "ServerBusy": "Operations per second is over the account limit.",
    "SourceConditionNotMet": "The source condition specified using HTTP conditional header(s) "
    "is not met.",
    "SourcePathNotFound": "The source path for a rename operation does not exist.",
    "UnsupportedOperation": "The emulator does not implement this operation.",
}

#: Operation names used by fault matching and statistics.
OPERATIONS = (
    "create_filesystem",
    "delete_filesystem",
    "create",
    "rename",
    "append",
    "flush",
    "read",
    "head",
    "list",
    "delete",
    "other",
)


@dataclasses.dataclass
class ScriptedFault:
    """One scripted failure: answer matching requests with ``status``/``code``.

    ``apply_first`` performs the operation before failing (a lost response);
    ``disconnect`` closes the connection instead of answering.
    """

    status: int = 500
    code: str = "InternalError"
    operation: str | None = None
    path_contains: str | None = None
    times: int = 1
    apply_first: bool = False
    disconnect: bool = False
    retry_after: float | None = None

    def matches(self, operation: str, path: str) -> bool:
        if self.operation is not None and self.operation != operation:
            return False
        return self.path_contains is None or self.path_contains in path


@dataclasses.dataclass
class Faults:
    """HTTP-level fault injection; fields may be changed while the emulator runs."""

    latency_seconds: float = 0.0
    throttle_probability: float = 0.0
    retry_after_seconds: float | None = 1.0
    drop_rename_response_probability: float = 0.0
    #: the transient 404 RenameDestinationParentPathNotFound of a live account (HADOOP-18242)
    rename_parent_not_found_probability: float = 0.0
    #: answer the next rename with this many ``x-ms-continuation`` tokens before applying it
    rename_continuations: int = 0
    seed: int = 0
    scripted: list[ScriptedFault] = dataclasses.field(default_factory=list)
    rng: random.Random = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def reseed(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)

    def inject(
        self,
        status: int = 500,
        code: str = "InternalError",
        *,
        operation: str | None = None,
        path_contains: str | None = None,
        times: int = 1,
        apply_first: bool = False,
        disconnect: bool = False,
        retry_after: float | None = None,
    ) -> ScriptedFault:
        """Fail the next ``times`` requests of ``operation`` (any when ``None``)."""
        if operation is not None and operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {OPERATIONS}")
        fault = ScriptedFault(
            status, code, operation, path_contains, times, apply_first, disconnect, retry_after
        )
        self.scripted.append(fault)
        return fault

    def clear(self) -> None:
        self.latency_seconds = 0.0
        self.throttle_probability = 0.0
        self.drop_rename_response_probability = 0.0
        self.rename_parent_not_found_probability = 0.0
        self.rename_continuations = 0
        self.scripted.clear()

    def take_scripted(self, operation: str, path: str) -> ScriptedFault | None:
        for fault in self.scripted:
            if fault.matches(operation, path):
                fault.times -= 1
                if fault.times <= 0:
                    self.scripted.remove(fault)
                return fault
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "latency_seconds": self.latency_seconds,
            "throttle_probability": self.throttle_probability,
            "retry_after_seconds": self.retry_after_seconds,
            "drop_rename_response_probability": self.drop_rename_response_probability,
            "rename_parent_not_found_probability": self.rename_parent_not_found_probability,
            "rename_continuations": self.rename_continuations,
            "seed": self.seed,
            "scripted": [dataclasses.asdict(f) for f in self.scripted],
        }

    def update(self, values: dict[str, Any]) -> None:
        for name in (
            "latency_seconds",
            "throttle_probability",
            "retry_after_seconds",
            "drop_rename_response_probability",
            "rename_parent_not_found_probability",
            "rename_continuations",
        ):
            if name in values:
                setattr(self, name, values[name])
        if "seed" in values:
            self.reseed(int(values["seed"]))
        if "scripted" in values:
            self.scripted = [ScriptedFault(**item) for item in values["scripted"]]


class _AzureError(Exception):
    def __init__(self, status: int, code: str, *, headers: dict[str, str] | None = None):
        super().__init__(code)
        self.status = status
        self.code = code
        self.headers = headers or {}


class _Node:
    __slots__ = ("children", "created", "data", "etag", "is_dir", "modified", "pending", "sorted")

    def __init__(self, is_dir: bool, etag: str):
        now = time.time()
        self.is_dir = is_dir
        self.etag = etag
        self.modified = now
        self.created = now
        self.data = b""
        self.pending = bytearray()
        self.children: set[str] = set()
        self.sorted: list[str] | None = None

    def sorted_children(self) -> list[str]:
        if self.sorted is None:
            self.sorted = sorted(self.children)
        return self.sorted

    def add_child(self, name: str) -> None:
        if name not in self.children:
            self.children.add(name)
            self.sorted = None

    def remove_child(self, name: str) -> None:
        self.children.discard(name)
        self.sorted = None


def _parent(rel: str) -> str:
    return rel.rpartition("/")[0]


def _name(rel: str) -> str:
    return rel.rpartition("/")[2]


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def _unquote_etag(etag: str) -> str:
    return etag.strip().removeprefix("W/").strip('"')


#: tokens start with bytes whose base64 is ``+/``, as opaque service tokens often hold
#: ``+``, ``/`` and ``=``: a client that does not URL-encode them sends a broken token
_TOKEN_MARK = b"\xfb\xff"


def _encode_token(text: str) -> str:
    return base64.b64encode(_TOKEN_MARK + text.encode()).decode()


def _decode_token(token: str) -> str:
    try:
        raw = base64.b64decode(token, validate=True)
    except ValueError as error:
        raise _AzureError(400, "InvalidQueryParameterValue") from error
    if not raw.startswith(_TOKEN_MARK):
        raise _AzureError(400, "InvalidQueryParameterValue")
    return raw[len(_TOKEN_MARK) :].decode()


def _segments(rel: str) -> tuple[str, ...]:
    return tuple(rel.split("/"))


def _parse_http_date(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(parsedate_to_datetime(value).timestamp())
    except (TypeError, ValueError) as error:
        raise _AzureError(400, "InvalidHeaderValue") from error


def _http_date(timestamp: float) -> str:
    return formatdate(timestamp, usegmt=True)


def _filetime(timestamp: float) -> str:
    return str(int(timestamp * 10_000_000) + 116_444_736_000_000_000)


class FileSystem:
    """One filesystem (container): paths relative to it, ``""`` is the root directory."""

    def __init__(self, name: str, etag: str):
        self.name = name
        self.nodes: dict[str, _Node] = {"": _Node(True, etag)}

    def get(self, rel: str) -> _Node | None:
        return self.nodes.get(rel)

    def descendants(self, rel: str) -> Iterator[str]:
        node = self.nodes[rel]
        for name in node.sorted_children():
            child = _join(rel, name)
            yield child
            if self.nodes[child].is_dir:
                yield from self.descendants(child)

    def remove(self, rel: str) -> None:
        node = self.nodes[rel]
        if node.is_dir:
            for child in list(self.descendants(rel)):
                self.nodes.pop(child, None)
        del self.nodes[rel]
        self.nodes[_parent(rel)].remove_child(_name(rel))

    def attach(self, rel: str, node: _Node) -> None:
        self.nodes[rel] = node
        self.nodes[_parent(rel)].add_child(_name(rel))


#: the standard headers signed by position (Authorize with Shared Key, version 2009-09-19+)
_SIGNED_HEADERS = (
    "Content-Encoding",
    "Content-Language",
    "Content-Length",
    "Content-MD5",
    "Content-Type",
    "Date",
    "If-Modified-Since",
    "If-Match",
    "If-None-Match",
    "If-Unmodified-Since",
    "Range",
)


def string_to_sign(account: str, request: web.BaseRequest) -> str:
    """The SharedKey string-to-sign of ``request`` as the service builds it.

    Written from the "Authorize with Shared Key" reference, independently of the SDK's and
    the adapter's signers, so either one's mistakes show up as ``403 AuthenticationFailed``:
    the path is the *encoded* path as sent, query values decoded, names lower-cased and
    sorted, repeated values comma-joined, ``Content-Length: 0`` signed as empty.
    """
    headers = request.headers
    lines = [request.method]
    for name in _SIGNED_HEADERS:
        value = headers.get(name, "")
        if name == "Content-Length" and value == "0":
            value = ""
        lines.append(value)
    canonical_headers = sorted(
        (name.lower(), value.strip())
        for name, value in headers.items()
        if name.lower().startswith("x-ms-")
    )
    raw_path = request.raw_path.partition("?")[0]
    resource = f"/{account}{raw_path}"
    query: dict[str, list[str]] = {}
    for name, value in request.query.items():
        query.setdefault(name.lower(), []).append(value)
    for name in sorted(query):
        resource += f"\n{name}:{','.join(sorted(query[name]))}"
    text = "\n".join(lines) + "\n"
    text += "".join(f"{name}:{value}\n" for name, value in canonical_headers)
    return text + resource


def shared_key_signature(key: str, account: str, request: web.BaseRequest) -> str:
    """Base64 HMAC-SHA256 of ``string_to_sign`` under the base64 account ``key``."""
    digest = hmac.new(
        base64.b64decode(key), string_to_sign(account, request).encode(), hashlib.sha256
    ).digest()
    return base64.b64encode(digest).decode()


class AdlsEmulator:
    """The emulator's state and request handling; serve ``app`` with aiohttp."""

    def __init__(
        self, account: str = DEFAULT_ACCOUNT, key: str = DEFAULT_KEY, faults: Faults | None = None
    ):
        self.account = account
        self.key = key
        self.faults = faults or Faults()
        self.filesystems: dict[str, FileSystem] = {}
        self.stats: Counter[str] = Counter()
        #: open rename continuations: (token, source, destination, tokens still to give)
        self._continuations: list[tuple[str, str, str, int]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._etag_counter = itertools.count(random.Random(account).randrange(1 << 40, 1 << 44))
        self.app = web.Application(client_max_size=1 << 30)
        self.app.router.add_route("*", "/_emulator/{what}", self._control)
        self.app.router.add_route("*", "/{tail:.*}", self._handle)

    # -- state helpers used by tests and the CLI -----------------------------------------

    def new_etag(self) -> str:
        return f"0x8D{next(self._etag_counter):013X}"

    def create_filesystem(self, name: str) -> FileSystem:
        fs = self.filesystems.get(name)
        if fs is None:
            fs = self.filesystems[name] = FileSystem(name, self.new_etag())
        return fs

    # -- HTTP plumbing ----------------------------------------------------------------------

    async def _control(self, request: web.Request) -> web.Response:
        what = request.match_info["what"]
        if what == "faults":
            if request.method == "PUT":
                self.faults.update(await request.json())
            return web.json_response(self.faults.to_json())
        if what == "stats":
            return web.json_response({**self.stats, "max_in_flight": self.max_in_flight})
        if what == "seed" and request.method == "POST":
            body = await request.json()
            return web.json_response({"seeded": self.seed(body["filesystem"], body["files"])})
        raise web.HTTPNotFound()

    def seed(self, filesystem: str, files: list[tuple[str, int]]) -> int:
        """Create (or replace) files of ``size`` zero bytes at ``rel`` paths, parents
        made, each with a new etag, as create + append + flush would leave them: a bench
        prepares 100,000 task outputs in one request instead of 300,000."""
        fs = self.create_filesystem(filesystem)
        for rel, size in files:
            rel = rel.strip("/")
            existing = fs.get(rel)
            if existing is not None and existing.is_dir:
                raise web.HTTPConflict(text=f"a directory is at {rel}")
            self._make_parents(fs, rel)
            node = _Node(False, self.new_etag())
            node.data = bytes(size)
            fs.attach(rel, node)
        return len(files)

    def _base_headers(self, request: web.Request) -> dict[str, str]:
        return {
            "x-ms-request-id": str(uuid.uuid4()),
            "x-ms-version": request.headers.get("x-ms-version", "2025-01-05"),
            "Date": _http_date(time.time()),
            "Server": "Windows-Azure-HDFS/1.0 Microsoft-HTTPAPI/2.0",
        }

    def _error_response(
        self, request: web.Request, error: _AzureError, *, blob_style: bool
    ) -> web.Response:
        headers = self._base_headers(request)
        headers.update(error.headers)
        headers["x-ms-error-code"] = error.code
        message = _MESSAGES.get(error.code, error.code)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.0000000Z", time.gmtime())
        message += f"\nRequestId:{headers['x-ms-request-id']}\nTime:{stamp}"
        self.stats[f"error:{error.status}:{error.code}"] += 1
        if request.method == "HEAD":
            return web.Response(status=error.status, headers=headers)
        if blob_style:
            body = (
                '<?xml version="1.0" encoding="utf-8"?><Error>'
                f"<Code>{escape(error.code)}</Code><Message>{escape(message)}</Message></Error>"
            )
            headers["Content-Type"] = "application/xml"
            return web.Response(status=error.status, headers=headers, body=body.encode())
        headers["Content-Type"] = "application/json;charset=utf-8"
        body = json.dumps({"error": {"code": error.code, "message": message}})
        return web.Response(status=error.status, headers=headers, body=body.encode())

    def _check_auth(self, request: web.Request) -> None:
        if "sig" in request.query:
            return
        authorization = request.headers.get("Authorization", "")
        scheme, _, value = authorization.partition(" ")
        if scheme == "SharedKey":
            account, _, signature = value.partition(":")
            if account != self.account:
                raise _AzureError(403, "AuthenticationFailed")
            expected = shared_key_signature(self.key, self.account, request)
            if not hmac.compare_digest(signature.encode(), expected.encode()):
                self.stats["auth:bad_signature"] += 1
                raise _AzureError(403, "AuthenticationFailed")
            return
        if scheme == "Bearer" and value:
            return
        raise _AzureError(401, "NoAuthenticationInformation")

    @staticmethod
    def _classify(method: str, query: Any, headers: Any, rel: str | None) -> str:
        if rel is None:
            if method == "PUT":
                return "create_filesystem"
            if method == "DELETE":
                return "delete_filesystem"
            if method == "GET" and query.get("resource") == "filesystem":
                return "list"
            return "other"
        if method == "PUT":
            return "rename" if "x-ms-rename-source" in headers else "create"
        if method == "PATCH":
            action = query.get("action")
            return action if action in ("append", "flush") else "other"
        return {"GET": "read", "HEAD": "head", "DELETE": "delete"}.get(method, "other")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.lstrip("/").split("/", 2)
        account = parts[0]
        fs_name = parts[1] if len(parts) > 1 and parts[1] else None
        rel = parts[2].strip("/") if len(parts) > 2 and parts[2].strip("/") else None
        operation = self._classify(request.method, request.query, request.headers, rel)
        self.stats[operation] += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._handle_counted(request, operation, account, fs_name, rel)
        finally:
            self.in_flight -= 1

    async def _handle_counted(
        self,
        request: web.Request,
        operation: str,
        account: str,
        fs_name: str | None,
        rel: str | None,
    ) -> web.StreamResponse:
        blob_style = operation in ("read", "head") or "restype" in request.query
        try:
            if account != self.account:
                raise _AzureError(400, "InvalidUri")
            self._check_auth(request)
            if self.faults.latency_seconds > 0:
                await asyncio.sleep(self.faults.latency_seconds)
            path = f"{fs_name or ''}/{rel or ''}"
            scripted = self.faults.take_scripted(operation, path)
            if scripted is not None and not scripted.apply_first:
                return await self._fail(request, scripted)
            if self.faults.throttle_probability > 0 and (
                self.faults.rng.random() < self.faults.throttle_probability
            ):
                headers = {}
                if self.faults.retry_after_seconds is not None:
                    headers["Retry-After"] = f"{self.faults.retry_after_seconds:g}"
                self.stats["injected:throttle"] += 1
                raise _AzureError(503, "ServerBusy", headers=headers)
            if fs_name is None:
                raise _AzureError(400, "InvalidUri")
            if (
                operation == "rename"
                and self.faults.rename_parent_not_found_probability > 0
                and self.faults.rng.random() < self.faults.rename_parent_not_found_probability
            ):
                self.stats["injected:rename_parent_not_found"] += 1
                raise _AzureError(404, "RenameDestinationParentPathNotFound")
            response = await self._dispatch(request, operation, fs_name, rel)
            if scripted is not None:
                return await self._fail(request, scripted)
            if (
                operation == "rename"
                and self.faults.drop_rename_response_probability > 0
                and (self.faults.rng.random() < self.faults.drop_rename_response_probability)
            ):
                self.stats["injected:drop_rename_response"] += 1
                raise _AzureError(500, "OperationTimedOut")
            return response
        except _AzureError as error:
            return self._error_response(request, error, blob_style=blob_style)

    async def _fail(self, request: web.Request, fault: ScriptedFault) -> web.StreamResponse:
        self.stats["injected:scripted"] += 1
        if fault.disconnect:
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # the connection is gone; nothing to answer
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = f"{fault.retry_after:g}"
        raise _AzureError(fault.status, fault.code, headers=headers)

    async def _dispatch(
        self, request: web.Request, operation: str, fs_name: str, rel: str | None
    ) -> web.StreamResponse:
        query = request.query
        if operation == "create_filesystem":
            if fs_name in self.filesystems:
                dfs = query.get("resource") == "filesystem"
                raise _AzureError(
                    409, "FilesystemAlreadyExists" if dfs else "ContainerAlreadyExists"
                )
            created = self.create_filesystem(fs_name)
            return self._ok(request, 201, created.nodes[""])
        fs = self.filesystems.get(fs_name)
        if fs is None:
            raise _AzureError(
                404, "ContainerNotFound" if "restype" in query else "FilesystemNotFound"
            )
        if operation == "delete_filesystem":
            del self.filesystems[fs_name]
            return self._ok(request, 202)
        if operation == "list":
            return self._list(request, fs)
        if rel is None:
            if request.method == "HEAD":
                return self._ok(request, 200, fs.nodes[""])
            raise _AzureError(400, "UnsupportedOperation")
        if operation == "create":
            return self._create(request, fs, rel)
        if operation == "rename":
            return self._rename(request, fs, rel)
        if operation == "append":
            return await self._append(request, fs, rel)
        if operation == "flush":
            return self._flush(request, fs, rel)
        if operation in ("read", "head"):
            return self._read(request, fs, rel)
        if operation == "delete":
            return self._delete(request, fs, rel)
        raise _AzureError(400, "UnsupportedOperation")

    def _ok(
        self, request: web.Request, status: int, node: _Node | None = None, body: bytes = b""
    ) -> web.Response:
        headers = self._base_headers(request)
        if node is not None:
            headers["ETag"] = f'"{node.etag}"'
            headers["Last-Modified"] = _http_date(node.modified)
        if request.method in ("PUT", "PATCH"):
            headers["x-ms-request-server-encrypted"] = "true"
        return web.Response(status=status, headers=headers, body=body)

    # -- conditions ---------------------------------------------------------------------------

    @staticmethod
    def _check_conditions(
        headers: Any, node: _Node | None, *, prefix: str = "", code: str = "ConditionNotMet"
    ) -> None:
        """``If-Match``/``If-None-Match``/``If-(Un)Modified-Since`` (``x-ms-source-`` ones
        with ``prefix``). ``If-None-Match: *`` on an existing destination is 409
        ``PathAlreadyExists`` (Path-Create); every other failure is 412 ``code``."""
        if_match = headers.get(f"{prefix}If-Match")
        if_none_match = headers.get(f"{prefix}If-None-Match")
        if (
            if_match is not None
            and if_match != "*"
            and (node is None or _unquote_etag(if_match) != node.etag)
        ):
            raise _AzureError(412, code)
        if if_match == "*" and node is None:
            raise _AzureError(412, code)
        if if_none_match is not None:
            if if_none_match == "*":
                if node is not None:
                    raise _AzureError(
                        409 if not prefix else 412, code if prefix else "PathAlreadyExists"
                    )
            elif node is not None and _unquote_etag(if_none_match) == node.etag:
                raise _AzureError(412, code)
        if node is None:
            return
        modified = int(node.modified)
        since = _parse_http_date(headers.get(f"{prefix}If-Modified-Since"))
        if since is not None and modified <= since:
            raise _AzureError(412, code)
        until = _parse_http_date(headers.get(f"{prefix}If-Unmodified-Since"))
        if until is not None and modified > until:
            raise _AzureError(412, code)

    @staticmethod
    def _check_leases(headers: Any) -> None:
        """The emulator grants no leases: naming one fails as on an unleased path."""
        if headers.get("x-ms-lease-action"):
            raise _AzureError(400, "UnsupportedOperation")
        if headers.get("x-ms-lease-id") or headers.get("x-ms-source-lease-id"):
            raise _AzureError(412, "LeaseNotPresent")

    def _make_parents(self, fs: FileSystem, rel: str) -> None:
        missing: list[str] = []
        current = _parent(rel)
        while True:
            node = fs.get(current)
            if node is not None:
                if not node.is_dir:
                    raise _AzureError(409, "PathConflict")
                break
            missing.append(current)
            current = _parent(current)
        for directory in reversed(missing):
            fs.attach(directory, _Node(True, self.new_etag()))

    # -- operations ---------------------------------------------------------------------------

    def _create(self, request: web.Request, fs: FileSystem, rel: str) -> web.Response:
        resource = request.query.get("resource")
        if resource not in ("file", "directory"):
            raise _AzureError(400, "InvalidQueryParameterValue")
        self._check_leases(request.headers)
        existing = fs.get(rel)
        self._check_conditions(request.headers, existing)
        is_dir = resource == "directory"
        if existing is not None and existing.is_dir != is_dir:
            raise _AzureError(409, "PathConflict")
        self._make_parents(fs, rel)
        if existing is not None and is_dir:
            existing.etag = self.new_etag()
            existing.modified = time.time()
            node = existing
        else:
            node = _Node(is_dir, self.new_etag())
            if existing is not None:
                node.created = existing.created
            fs.attach(rel, node)
        response = self._ok(request, 201, node)
        response.headers["Content-Length"] = "0"
        return response

    def _rename(self, request: web.Request, fs: FileSystem, rel: str) -> web.Response:
        """Path-Create with ``x-ms-rename-source`` (any filesystem of the account)."""
        mode = request.query.get("mode", "posix")
        if mode not in ("legacy", "posix"):
            raise _AzureError(400, "InvalidQueryParameterValue")
        self._check_leases(request.headers)
        raw_source = request.headers["x-ms-rename-source"]
        source_path = unquote(raw_source.partition("?")[0]).strip("/")
        source_fs_name, _, source_rel = source_path.partition("/")
        source_fs = self.filesystems.get(source_fs_name)
        if source_fs is None:
            raise _AzureError(404, "SourcePathNotFound")
        source = source_fs.get(source_rel) if source_rel else None
        if source is None:
            raise _AzureError(404, "SourcePathNotFound")
        self._check_conditions(
            request.headers, source, prefix="x-ms-source-", code="SourceConditionNotMet"
        )
        same_fs = source_fs is fs
        if source.is_dir and same_fs and (rel + "/").startswith(source_rel + "/"):
            raise _AzureError(400, "InvalidRenameSourcePath")  # itself or its own subtree
        parent = fs.get(_parent(rel))
        if parent is None:
            raise _AzureError(404, "RenameDestinationParentPathNotFound")
        if not parent.is_dir:
            raise _AzureError(409, "PathConflict")
        dest = fs.get(rel)
        self._check_conditions(request.headers, dest)
        if same_fs and source_rel == rel:
            return self._ok(request, 201, source)
        if dest is not None and dest.is_dir != source.is_dir:
            raise _AzureError(409, "InvalidSourceOrDestinationResourceType")
        if dest is not None and dest.is_dir:
            raise _AzureError(409, "PathAlreadyExists")
        if self._rename_continues(request, f"{source_fs_name}/{source_rel}", f"{fs.name}/{rel}"):
            response = self._ok(request, 201, source)
            response.headers["x-ms-continuation"] = self._continuations[-1][0]
            response.headers["Content-Length"] = "0"
            return response
        if dest is not None:
            fs.remove(rel)
        moved = [source_rel, *(list(source_fs.descendants(source_rel)) if source.is_dir else [])]
        nodes = {old: source_fs.nodes[old] for old in moved}
        source_fs.remove(source_rel)
        for old, node in nodes.items():
            new = rel + old[len(source_rel) :]
            if old == source_rel:
                fs.attach(new, node)
            else:
                fs.nodes[new] = node
        response = self._ok(request, 201, source)
        response.headers["Content-Length"] = "0"
        return response

    def _rename_continues(self, request: web.Request, source: str, dest: str) -> bool:
        """True when this rename answers with a continuation token instead of finishing.

        ``Faults.rename_continuations`` starts a chain; a call carrying ``continuation``
        must name a token of the same source and destination (else 400).
        """
        token = request.query.get("continuation")
        if token is not None:
            found = [entry for entry in self._continuations if entry[0] == token]
            if not found or found[0][1:3] != (source, dest):
                raise _AzureError(400, "InvalidQueryParameterValue")
            self._continuations.remove(found[0])
            left = found[0][3]
        else:
            left = self.faults.rename_continuations
            self.faults.rename_continuations = 0
        if left <= 0:
            return False
        self.stats["injected:rename_continuation"] += 1
        token = _encode_token(f"rename:{uuid.uuid4()}")
        self._continuations.append((token, source, dest, left - 1))
        return True

    def _file(self, fs: FileSystem, rel: str) -> _Node:
        node = fs.get(rel)
        if node is None:
            raise _AzureError(404, "PathNotFound")
        if node.is_dir:
            raise _AzureError(409, "PathConflict")
        return node

    async def _append(self, request: web.Request, fs: FileSystem, rel: str) -> web.Response:
        node = self._file(fs, rel)
        body = await request.read()
        position = int(request.query.get("position", "-1"))
        if position != len(node.data) + len(node.pending):
            raise _AzureError(400, "InvalidFlushPosition")
        node.pending += body
        return self._ok(request, 202)

    def _flush(self, request: web.Request, fs: FileSystem, rel: str) -> web.Response:
        node = self._file(fs, rel)
        self._check_conditions(request.headers, node)
        position = int(request.query.get("position", "-1"))
        committed = len(node.data)
        if position < committed or position > committed + len(node.pending):
            raise _AzureError(400, "InvalidFlushPosition")
        taken = position - committed
        node.data += bytes(node.pending[:taken])
        if request.query.get("retainUncommittedData") == "true":
            del node.pending[:taken]
        else:
            node.pending = bytearray()
        node.etag = self.new_etag()
        node.modified = time.time()
        response = self._ok(request, 200, node)
        response.headers["Content-Length"] = "0"
        return response

    def _properties(self, node: _Node) -> dict[str, str]:
        headers = {
            "ETag": f'"{node.etag}"',
            "Last-Modified": _http_date(node.modified),
            "x-ms-creation-time": _http_date(node.created),
            "x-ms-resource-type": "directory" if node.is_dir else "file",
            "x-ms-blob-type": "BlockBlob",
            "x-ms-server-encrypted": "true",
            "x-ms-lease-state": "available",
            "x-ms-lease-status": "unlocked",
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if node.is_dir:
            headers["x-ms-meta-hdi_isfolder"] = "true"
        return headers

    def _read(self, request: web.Request, fs: FileSystem, rel: str) -> web.Response:
        node = fs.get(rel)
        if node is None:
            raise _AzureError(404, "BlobNotFound")
        self._check_conditions(request.headers, node)
        headers = self._base_headers(request)
        headers.update(self._properties(node))
        size = len(node.data)
        if request.method == "HEAD":
            headers["Content-Length"] = str(size)
            return web.Response(status=200, headers=headers)
        spec = request.headers.get("x-ms-range") or request.headers.get("Range")
        if spec is None:
            return web.Response(status=200, headers=headers, body=node.data)
        first_text, _, last_text = spec.removeprefix("bytes=").partition("-")
        first = int(first_text or "0")
        last = min(int(last_text), size - 1) if last_text else size - 1
        if first >= size:
            raise _AzureError(416, "InvalidRange", headers={"Content-Range": f"bytes */{size}"})
        headers["Content-Range"] = f"bytes {first}-{last}/{size}"
        return web.Response(status=206, headers=headers, body=node.data[first : last + 1])

    def _delete(self, request: web.Request, fs: FileSystem, rel: str) -> web.Response:
        self._check_leases(request.headers)
        node = fs.get(rel)
        if node is None:
            raise _AzureError(404, "PathNotFound")
        self._check_conditions(request.headers, node)
        if node.is_dir and node.children and request.query.get("recursive") != "true":
            raise _AzureError(409, "DirectoryNotEmpty")
        fs.remove(rel)
        return self._ok(request, 200)

    def _list(self, request: web.Request, fs: FileSystem) -> web.Response:
        query = request.query
        directory = query.get("directory", "").strip("/")
        node = fs.get(directory)
        if node is None:
            raise _AzureError(404, "PathNotFound")
        try:
            limit = min(int(query.get("maxResults", MAX_RESULTS)), MAX_RESULTS)
        except ValueError as error:
            raise _AzureError(400, "InvalidQueryParameterValue") from error
        if limit <= 0:
            raise _AzureError(400, "InvalidQueryParameterValue")
        after = query.get("continuation")
        after_name = _decode_token(after) if after else None
        names: list[str]
        if not node.is_dir:
            names = [directory]
        elif query.get("recursive") == "true":
            names = list(fs.descendants(directory))
        else:
            names = [_join(directory, name) for name in node.sorted_children()]
        start = 0
        if after_name is not None:
            # listing order is by path segments: resume after the token's path even when
            # that path was deleted between pages
            start = bisect.bisect_right(names, _segments(after_name), key=_segments)
        chosen = names[start : start + limit]
        paths = []
        for name in chosen:
            child = fs.nodes[name]
            entry = {
                "name": name,
                "contentLength": str(len(child.data)),
                "etag": child.etag,
                "lastModified": _http_date(child.modified),
                "creationTime": _filetime(child.created),
                "owner": "$superuser",
                "group": "$superuser",
                "permissions": "rwxr-x---" if child.is_dir else "rw-r-----",
            }
            if child.is_dir:
                entry["isDirectory"] = "true"
            paths.append(entry)
        headers = self._base_headers(request)
        headers["Content-Type"] = "application/json;charset=utf-8"
        if start + limit < len(names):
            headers["x-ms-continuation"] = _encode_token(chosen[-1])
        return web.Response(status=200, headers=headers, body=json.dumps({"paths": paths}).encode())


@dataclasses.dataclass
class EmulatorHandle:
    """A running emulator: point ``AdlsStore(endpoint=...)`` at ``endpoint``."""

    endpoint: str
    account: str
    key: str
    faults: Faults
    emulator: AdlsEmulator
    host: str
    port: int

    def create_filesystem(self, name: str) -> None:
        self.emulator.create_filesystem(name)

    @property
    def stats(self) -> Counter[str]:
        """Requests per operation, errors sent (``error:STATUS:CODE``), faults injected."""
        return self.emulator.stats

    @property
    def max_in_flight(self) -> int:
        """The most requests the emulator has handled at once."""
        return self.emulator.max_in_flight


def _check_loopback(host: str) -> None:
    if host == "localhost":
        return
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the emulator serves only on loopback, not {host!r}")


@contextlib.asynccontextmanager
async def run_adls_emulator(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    account: str = DEFAULT_ACCOUNT,
    key: str = DEFAULT_KEY,
    faults: Faults | None = None,
) -> AsyncIterator[EmulatorHandle]:
    """Serve an emulator on ``host:port`` (0 picks a free port) until the block exits."""
    _check_loopback(host)
    emulator = AdlsEmulator(account, key, faults)
    runner = web.AppRunner(emulator.app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, reuse_address=True)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        bound = server.sockets[0].getsockname()[1]
        yield EmulatorHandle(
            endpoint=f"http://{host}:{bound}/{account}",
            account=account,
            key=key,
            faults=emulator.faults,
            emulator=emulator,
            host=host,
            port=bound,
        )
    finally:
        await runner.cleanup()


class AdlsEmulatorServer(ChildServer):
    """The emulator in a child process (this module's CLI), with the default account and
    key and ``filesystems`` made at start: ``AdlsStore(ACCOUNT, FS,
    endpoint=server.account_endpoint, account_key=server.key)``."""

    name = "ADLS emulator"
    ready_path = "/_emulator/stats"
    account = DEFAULT_ACCOUNT
    key = DEFAULT_KEY

    def __init__(self, *filesystems: str, port: int = 0) -> None:
        super().__init__(port)
        self.filesystems = filesystems

    def command(self) -> list[str]:
        made = [arg for name in self.filesystems for arg in ("--filesystem", name)]
        module = "aiocommit_testing.adls_emulator"
        return [sys.executable, "-m", module, "--port", str(self.port), *made]

    @property
    def account_endpoint(self) -> str:
        return f"{self.endpoint}/{self.account}"


async def _serve(args: argparse.Namespace) -> None:
    faults = Faults(
        latency_seconds=args.latency,
        throttle_probability=args.throttle,
        drop_rename_response_probability=args.drop_rename,
        rename_parent_not_found_probability=args.rename_parent_not_found,
        rename_continuations=args.rename_continuations,
        seed=args.seed,
    )
    async with run_adls_emulator(
        args.host, args.port, account=args.account, key=args.key, faults=faults
    ) as handle:
        for name in args.filesystem:
            handle.create_filesystem(name)
        print(f"AIOCOMMIT_ADLS_ENDPOINT={handle.endpoint}", flush=True)
        print(f"AZURE_STORAGE_ACCOUNT_KEY={handle.key}", flush=True)
        print(f"# abfs://FILESYSTEM@{handle.account}.dfs.core.windows.net/", flush=True)
        await until_signalled()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="ADLS Gen2 DFS emulator (loopback only)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--account", default=DEFAULT_ACCOUNT)
    parser.add_argument("--key", default=DEFAULT_KEY)
    parser.add_argument("--filesystem", action="append", default=[], help="create at start")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per request")
    parser.add_argument("--throttle", type=float, default=0.0, help="503 ServerBusy probability")
    parser.add_argument("--drop-rename", type=float, default=0.0, help="lost rename probability")
    parser.add_argument(
        "--rename-parent-not-found",
        type=float,
        default=0.0,
        help="transient 404 RenameDestinationParentPathNotFound probability (HADOOP-18242)",
    )
    parser.add_argument(
        "--rename-continuations",
        type=int,
        default=0,
        help="x-ms-continuation tokens the first rename answers with before it completes",
    )
    parser.add_argument("--seed", type=int, default=0)
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
