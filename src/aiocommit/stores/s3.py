"""Amazon S3 (and S3-compatible stores) through ``aiobotocore``: ``s3://`` and ``s3a://`` URLs.

Store path ``/a/b`` is key ``a/b`` of the bucket; ``/`` is the bucket itself.

Design (beyond the contract in ``stores.base`` and ``stores.multipart``):

* **Directories are prefixes**, as on GCS: ``mkdirs`` writes a zero-byte ``dir/`` marker
  for the path and each ancestor lacking one (a file at the path or an ancestor raises
  ``AlreadyExists``); ``stat`` of a directory succeeds when its marker or any key under
  its prefix exists; listings hide the directory's own marker; ``write_bytes`` never
  creates parents. ``capabilities.directories`` is ``False``.
* **Etag** is S3's ETag without quotes. CopyObject gives a multipart object a new etag,
  so ``etags_preserved_in_rename`` is ``False``; a single-part object's etag is its MD5,
  which a copy keeps, so it is also the ``checksum`` (``md5:...``) rename recovery compares.
* **Rename is ListObjectsV2 + CopyObject + DeleteObject**, three requests (S3 has no
  rename; ``atomic_rename`` is False): the listing refuses a directory at the destination,
  the copy carries the preconditions, the delete removes the source. ``source_etag``
  becomes ``x-amz-copy-source-if-match``; without ``overwrite`` the copy carries
  ``If-None-Match: *`` (S3 refuses a copy onto an existing key with 412). A 412 is
  told apart by one HEAD of the destination: there, ``AlreadyExists``; else the source
  changed, ``PreconditionFailed``. An S3-compatible store that ignores ``If-None-Match``
  on CopyObject needs ``conditional_copy=False``: the destination is then probed with
  HEAD before the copy (a check two racing renames can both pass; the engine never
  races renames onto one key). The S3A committers never rename data; they complete
  multipart uploads.
* **Conditional put**: ``write_bytes(overwrite=False)`` and
  ``complete_upload(if_none_match=True)`` send ``If-None-Match: *``; a 412 is
  ``AlreadyExists``. S3 answers a concurrent conditional write with 409
  ``ConditionalRequestConflict``: retryable (``Transient``, not applied).
* **Delete** of a missing key succeeds silently on S3, so ``delete`` asks HEAD first to
  answer whether anything was there; a directory tree is deleted with DeleteObjects, 1000
  keys a call.
* **Errors** are translated once, here (``translate``): NoSuchKey / NoSuchUpload / 404
  ``NotFound``; PreconditionFailed / 412 ``PreconditionFailed`` (``AlreadyExists`` for an
  ``If-None-Match`` write); AccessDenied / 403 / 401 ``PermissionDenied``; SlowDown / 503 /
  429 ``Throttled``; 500 / InternalError / RequestTimeout / 409 ConditionalRequestConflict
  and dropped connections ``Transient``; a connection never made ``Transient`` with
  ``maybe_applied=False``.
* **No hidden retries**: botocore's retries are off (one attempt), the engine's retry
  policy is the only one. One aiobotocore client per store: one connection pool of
  ``connections`` sockets shared by every call. One aiobotocore session per thread for
  every store: botocore loads and parses the S3 service model once, not per store.
* **Per-request CPU** (every call runs on the caller's event loop): the client sends a
  fixed ``User-Agent`` (``aiocommit/VERSION aiobotocore/VERSION botocore/VERSION``), so
  botocore does not rebuild and sanitise its full user-agent string twice per request;
  timestamps (``Last-Modified`` of every HEAD, ``LastModified`` of every listed key and
  copy) are parsed by the standard library, not dateutil (``parse_time``).
* **Credentials and endpoint**: botocore's standard chain (environment, shared config and
  credentials files, SSO, container and instance metadata), overridden by
  ``fs.s3a.access.key`` / ``fs.s3a.secret.key`` / ``fs.s3a.session.token`` when given;
  ``fs.s3a.endpoint`` (or ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, which botocore
  reads itself) points at an S3-compatible store; ``fs.s3a.endpoint.region``,
  ``fs.s3a.path.style.access``, ``fs.s3a.connection.maximum``, ``fs.s3a.paging.maximum``
  and ``fs.s3a.connection.request.timeout`` map to the client settings of those names.
"""

from __future__ import annotations

import datetime
import email.utils
import importlib.metadata
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

import aiobotocore
import anyio
import anyio.to_thread
from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)
from botocore.utils import parse_timestamp

from aiocommit.errors import (
    AlreadyExists,
    InvalidInput,
    NotEmpty,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    StoreError,
    Throttled,
    Transient,
)
from aiocommit.stores.base import (
    REMOTE_LOOP_IN_FLIGHT,
    REQUEST_RETRY,
    FileStatus,
    StoreCapabilities,
    check_clean,
)
from aiocommit.stores.edge import retry_after, translating
from aiocommit.stores.multipart import Upload
from aiocommit.stores.prefixes import (
    KnownDirectories,
    listing_prefix,
    mkdirs_with_markers,
    object_key,
    read_local_file,
)

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client
else:
    S3Client = Any

T = TypeVar("T")

_NOT_FOUND = {"NoSuchKey", "NoSuchUpload", "NotFound", "404", "NoSuchBucket"}
_DENIED = {"AccessDenied", "403", "401", "InvalidAccessKeyId", "SignatureDoesNotMatch"}
_THROTTLED = {"SlowDown", "503", "429", "Throttling", "ThrottlingException", "RequestLimitExceeded"}
_TRANSIENT = {
    "InternalError",
    "500",
    "502",
    "504",
    "RequestTimeout",
    "ServiceUnavailable",
    "ConditionalRequestConflict",
}


def translate(
    error: BaseException, path: str | None, operation: str, *, creating: bool = False
) -> StoreError:
    """The one place where botocore errors become store errors.

    ``creating``: the call carried ``If-None-Match: *``, so a 412 means "exists".
    """
    if isinstance(error, StoreError):
        return error
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        code = str(info.get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = f"S3 {status} {code}: {str(info.get('Message', ''))[:300]}"
        if code in _NOT_FOUND or status == 404:
            return NotFound(message, path=path, operation=operation)
        if code == "PreconditionFailed" or status == 412:
            if creating:
                return AlreadyExists(message, path=path, operation=operation)
            return PreconditionFailed(message, path=path, operation=operation)
        if code in _DENIED or status in (401, 403):
            return PermissionDenied(message, path=path, operation=operation)
        if code in _THROTTLED or status in (429, 503):
            headers = error.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            return Throttled(
                message,
                path=path,
                operation=operation,
                retry_after=retry_after(headers.get("retry-after")),
            )
        if code in _TRANSIENT or status in (500, 502, 504):
            return Transient(
                message,
                path=path,
                operation=operation,
                maybe_applied=code != "ConditionalRequestConflict",
            )
        return StoreError(message, path=path, operation=operation)
    if isinstance(error, EndpointConnectionError | ConnectTimeoutError):
        return Transient(
            f"cannot connect to S3: {error}", path=path, operation=operation, maybe_applied=False
        )
    # a timeout, a dropped connection or another client-side failure after sending: the
    # call may have been applied
    if isinstance(error, BotoCoreError | OSError):
        return Transient(
            f"S3 call failed: {error!r}", path=path, operation=operation, maybe_applied=True
        )
    return StoreError(f"S3 call failed: {error!r}", path=path, operation=operation)


_edge = translating(translate, Exception)

_sessions = threading.local()


def parse_time(value: str) -> datetime.datetime:
    """botocore's timestamp parser for the store's clients: S3's two forms, ISO 8601
    (``2026-11-27T22:16:46.000Z``, in bodies) and the HTTP date (``Fri, 27 Nov 2026
    22:16:46 GMT``, ``Last-Modified``), by the standard library; anything else by
    botocore's own parser (dateutil, a hundred times slower). S3's forms carry their
    zone; the answer is an aware UTC datetime (one without a zone is taken as UTC)."""
    try:
        if "T" in value and value[:4].isdigit():
            parsed = datetime.datetime.fromisoformat(value)
        elif "," in value:
            parsed = email.utils.parsedate_to_datetime(value)
        else:
            return parse_timestamp(value)
    except (ValueError, TypeError, IndexError):
        return parse_timestamp(value)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=datetime.UTC)
    return parsed.astimezone(datetime.UTC)


def shared_session() -> AioSession:
    """This thread's aiobotocore session, made on first use: its clients share botocore's
    loaded service models (a session is not safe to share between threads) and parse
    timestamps with ``parse_time``."""
    session: AioSession | None = getattr(_sessions, "session", None)
    if session is None:
        session = _sessions.session = get_session()
        parsers = session.get_component("response_parser_factory")
        parsers.set_parser_defaults(timestamp_parser=parse_time)
    return session


def user_agent() -> str:
    """The fixed start of the store's ``User-Agent`` (botocore appends its version)."""
    try:
        ours = importlib.metadata.version("aiocommit")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree
        ours = "0+unknown"
    return f"aiocommit/{ours} aiobotocore/{aiobotocore.__version__}"


def _etag(value: Any) -> str:
    return str(value or "").strip('"')


def _file(path: str, size: int, etag: Any) -> FileStatus:
    """A file's status. A single-part object's etag is the MD5 of its bytes, which a copy
    keeps: that is its ``checksum`` (multipart etags are not, and get none)."""
    tag = _etag(etag)
    checksum = f"md5:{tag}" if tag and "-" not in tag else None
    return FileStatus(path, False, size, tag or None, checksum)


class S3Store:
    """One S3 bucket as a store. See the module docstring for the semantics.

    Args:
        bucket: the bucket name.
        scheme: ``"s3"`` or ``"s3a"``: the URI form written into pending sets and
            ``_SUCCESS`` (Hadoop writes ``s3a://``).
        options: ``fs.s3a.*`` settings (see the module docstring); keyword arguments win.
        endpoint_url: an S3-compatible endpoint, e.g. moto's ``http://127.0.0.1:PORT``.
        region: the signing region.
        connections: size of the shared connection pool.
        page_size: keys per listing page (at most 1000).
        timeout: seconds per HTTP call.
        conditional_copy: the endpoint honours ``If-None-Match: *`` on CopyObject, as S3
            does; False probes a rename's destination with HEAD first instead.
    """

    def __init__(
        self,
        bucket: str,
        *,
        scheme: str = "s3",
        options: Mapping[str, str] | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        connections: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        path_style: bool | None = None,
        conditional_copy: bool = True,
    ):
        if not bucket or "/" in bucket:
            raise InvalidInput(f"not a bucket name: {bucket!r}")
        if scheme not in ("s3", "s3a"):
            raise InvalidInput(f"not an S3 scheme: {scheme!r}")
        opts = dict(options or {})
        self.bucket = bucket
        self.scheme = scheme
        self.endpoint_url = endpoint_url or opts.get("fs.s3a.endpoint") or None
        if self.endpoint_url and "://" not in self.endpoint_url:
            self.endpoint_url = "https://" + self.endpoint_url
        self.region = (
            region
            or opts.get("fs.s3a.endpoint.region")
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1"
        )
        self.connections = connections or int(opts.get("fs.s3a.connection.maximum", "256"))
        self.page_size = min(1000, page_size or int(opts.get("fs.s3a.paging.maximum", "1000")))
        #: directories this client made or found: mkdirs asks nothing about them again
        self._known_dirs = KnownDirectories()
        self.timeout = timeout or float(opts.get("fs.s3a.connection.request.timeout", "60"))
        style = opts.get("fs.s3a.path.style.access")
        self.path_style = path_style if path_style is not None else style == "true"
        self._credentials = {
            key: opts[name]
            for key, name in (
                ("aws_access_key_id", "fs.s3a.access.key"),
                ("aws_secret_access_key", "fs.s3a.secret.key"),
                ("aws_session_token", "fs.s3a.session.token"),
            )
            if opts.get(name)
        }
        self.conditional_copy = conditional_copy
        self._stack: AsyncExitStack | None = None
        self._client: S3Client | None = None
        self._lock = anyio.Lock()

    # -- plumbing ------------------------------------------------------------------------

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            etags=True,
            etags_preserved_in_rename=False,
            atomic_rename=False,
            directories=False,
            max_in_flight=self.connections,
            loop_in_flight=REMOTE_LOOP_IN_FLIGHT,
            rate_per_prefix=True,
        )

    def qualify(self, path: str) -> str:
        return f"{self.scheme}://{self.bucket}{path}"

    def unqualify(self, uri: str) -> str:
        for scheme in ("s3", "s3a"):
            base = f"{scheme}://{self.bucket}"
            if uri == base:
                return "/"
            if uri.startswith(base + "/"):
                return uri[len(base) :]
        raise InvalidInput(f"{uri!r} is not in bucket {self.bucket!r}")

    async def client(self) -> S3Client:
        """The shared client, created on first use inside the running event loop."""
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                config = AioConfig(
                    max_pool_connections=self.connections,
                    retries={"total_max_attempts": 1},
                    connect_timeout=min(self.timeout, 10.0),
                    read_timeout=self.timeout,
                    s3={"addressing_style": "path" if self.path_style else "auto"},
                    user_agent=user_agent(),
                )
                stack = AsyncExitStack()
                self._client = await stack.enter_async_context(
                    shared_session().create_client(
                        "s3",
                        endpoint_url=self.endpoint_url,
                        region_name=self.region,
                        config=config,
                        aws_access_key_id=self._credentials.get("aws_access_key_id"),
                        aws_secret_access_key=self._credentials.get("aws_secret_access_key"),
                        aws_session_token=self._credentials.get("aws_session_token"),
                    )
                )
                self._stack = stack
        assert self._client is not None
        return self._client

    async def _head(self, path: str, operation: str) -> FileStatus | None:
        client = await self.client()
        try:
            with _edge(path, operation):
                head = await client.head_object(Bucket=self.bucket, Key=object_key(path))
        except NotFound:
            return None
        return _file(path, int(head["ContentLength"]), head.get("ETag"))

    async def _keys_under(self, path: str, limit: int, operation: str) -> list[str]:
        client = await self.client()
        with _edge(path, operation):
            answer = await client.list_objects_v2(
                Bucket=self.bucket, Prefix=listing_prefix(path), MaxKeys=limit
            )
        return [str(item["Key"]) for item in answer.get("Contents", [])]

    async def _put(self, path: str, data: bytes, *, overwrite: bool, operation: str) -> FileStatus:
        client = await self.client()
        extra: dict[str, Any] = {} if overwrite else {"IfNoneMatch": "*"}
        with _edge(path, operation, creating=not overwrite):
            answer = await client.put_object(
                Bucket=self.bucket, Key=object_key(path), Body=data, **extra
            )
        return _file(path, len(data), answer.get("ETag"))

    def _page(
        self, call: Callable[..., Awaitable[T]], params: dict[str, Any], path: str, operation: str
    ) -> Awaitable[T]:
        """One page of a listing, ``call(**params)``, as one request in ``REQUEST_RETRY``:
        a throttled page is asked for again alone, at its token or markers."""
        params = dict(params)  # the caller moves on to the next page's token after

        async def request() -> T:
            with _edge(path, operation):
                return await call(**params)

        return REQUEST_RETRY.get()(request)

    # -- the store contract ----------------------------------------------------------------

    async def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        client = await self.client()
        prefix = listing_prefix(path)
        params: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": prefix,
            "Delimiter": "/",
            "MaxKeys": self.page_size,
        }
        exists = prefix == ""
        while True:
            answer = await self._page(client.list_objects_v2, params, path, "list_dir")
            page = [
                FileStatus("/" + str(p["Prefix"]).rstrip("/"), True)
                for p in answer.get("CommonPrefixes", [])
            ]
            for item in answer.get("Contents", []):
                key = str(item["Key"])
                if key == prefix:
                    exists = True
                    continue
                page.append(_file("/" + key, int(item.get("Size", 0)), item.get("ETag")))
            if page:
                exists = True
                yield page
            token = answer.get("NextContinuationToken")
            if not answer.get("IsTruncated") or not token:
                break
            params["ContinuationToken"] = token
        if not exists:
            raise NotFound("no such directory", path=path, operation="list_dir")

    async def missing_container(self) -> str | None:
        """``bucket 'NAME' does not exist`` when the URL's bucket is missing (one
        HeadBucket), else None (it exists, or the answer says nothing)."""
        try:
            await (await self.client()).head_bucket(Bucket=self.bucket)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket", "NotFound"):
                return f"bucket {self.bucket!r} does not exist"
        except Exception:
            pass
        return None

    async def stat(self, path: str) -> FileStatus:
        if path.strip("/") == "":
            return FileStatus("/", True)
        found = await self._head(path, "stat")
        if found is not None:
            return found
        if await self._keys_under(path, 1, "stat"):
            return FileStatus(path.rstrip("/"), True)
        raise NotFound("no such file or directory", path=path, operation="stat")

    async def mkdirs(self, path: str) -> None:
        async def place(marker: str) -> None:
            await self._put(marker, b"", overwrite=True, operation="mkdirs")

        await mkdirs_with_markers(
            path, lambda name: self._head(name, "mkdirs"), place, self._known_dirs
        )

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        if path.strip("/") == "":
            raise PreconditionFailed("refusing to delete the root", path=path, operation="delete")
        self._known_dirs.forget(path)
        client = await self.client()
        file_path = path.rstrip("/")
        if await self._head(file_path, "delete") is not None:
            with _edge(path, "delete"):
                await client.delete_object(Bucket=self.bucket, Key=object_key(file_path))
            return True
        marker = listing_prefix(path)
        if not recursive:
            keys = await self._keys_under(path, 2, "delete")
            if any(k != marker for k in keys):
                raise NotEmpty("directory is not empty", path=path, operation="delete")
            if not keys:
                return False
            await self._delete_keys([marker], path)
            return True
        deleted = False
        params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": marker, "MaxKeys": 1000}
        while True:
            with _edge(path, "delete"):
                answer = await client.list_objects_v2(**params)
            keys = [str(item["Key"]) for item in answer.get("Contents", [])]
            if keys:
                await self._delete_keys(keys, path)
                deleted = True
            token = answer.get("NextContinuationToken")
            if not answer.get("IsTruncated") or not token:
                return deleted
            params["ContinuationToken"] = token

    async def _delete_keys(self, keys: list[str], path: str) -> None:
        client = await self.client()
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            with _edge(path, "delete"):
                answer = await client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            errors = answer.get("Errors", [])
            if errors:
                first = errors[0]
                failure = ClientError(
                    {"Error": {"Code": first.get("Code", ""), "Message": first.get("Message", "")}},
                    "DeleteObjects",
                )
                raise translate(failure, "/" + str(first.get("Key", "")), "delete")

    async def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> None:
        """Three requests: a listing under ``dest/``, the conditional copy, the delete of
        the source (one more, a HEAD of ``dest``, to explain a 412 or where
        ``conditional_copy`` is False). Nothing is copied when a check fails; the
        source is deleted only after its copy succeeded."""
        check_clean(dest)
        client = await self.client()
        probe_first = not overwrite and not self.conditional_copy
        if probe_first and await self._head(dest, "rename") is not None:
            raise AlreadyExists("rename destination exists", path=dest, operation="rename")
        if await self._keys_under(dest, 1, "rename"):
            raise AlreadyExists("a directory is at the destination", path=dest, operation="rename")
        if source == dest:
            exists = not overwrite and not probe_first and await self._head(dest, "rename")
            if exists:
                raise AlreadyExists("rename destination exists", path=dest, operation="rename")
            return
        extra: dict[str, Any] = {}
        if source_etag is not None:
            extra["CopySourceIfMatch"] = f'"{source_etag}"'
        if not overwrite and self.conditional_copy:
            extra["IfNoneMatch"] = "*"
        try:
            with _edge(source, "rename"):
                await client.copy_object(
                    Bucket=self.bucket,
                    Key=object_key(dest),
                    CopySource={"Bucket": self.bucket, "Key": object_key(source)},
                    **extra,
                )
        except NotFound as error:
            raise NotFound("rename source not found", path=source, operation="rename") from error
        except PreconditionFailed as error:
            if "IfNoneMatch" in extra and (
                source_etag is None or await self._head(dest, "rename") is not None
            ):
                raise AlreadyExists(
                    "rename destination exists", path=dest, operation="rename"
                ) from error
            raise PreconditionFailed(
                f"rename source is not at etag {source_etag}", path=source, operation="rename"
            ) from error
        with _edge(source, "rename"):
            await client.delete_object(Bucket=self.bucket, Key=object_key(source))

    async def read_bytes(self, path: str) -> bytes:
        client = await self.client()
        with _edge(path, "read_bytes"):
            answer = await client.get_object(Bucket=self.bucket, Key=object_key(path))
            async with answer["Body"] as body:
                return await body.read()

    async def write_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> FileStatus:
        check_clean(path)
        return await self._put(path, bytes(data), overwrite=overwrite, operation="write_bytes")

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus:
        check_clean(path)
        data = await read_local_file(local_path)
        return await self._put(path, data, overwrite=overwrite, operation="upload_file")

    # -- multipart uploads -----------------------------------------------------------------

    async def create_upload(self, path: str) -> str:
        check_clean(path)
        client = await self.client()
        with _edge(path, "create_upload"):
            answer = await client.create_multipart_upload(Bucket=self.bucket, Key=object_key(path))
        return str(answer["UploadId"])

    async def upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        client = await self.client()
        with _edge(path, "upload_part"):
            answer = await client.upload_part(
                Bucket=self.bucket,
                Key=object_key(path),
                UploadId=upload_id,
                PartNumber=number,
                Body=data,
            )
        return _etag(answer.get("ETag"))

    async def complete_upload(
        self, path: str, upload_id: str, etags: Sequence[str], *, if_none_match: bool = False
    ) -> FileStatus:
        client = await self.client()
        parts = [{"PartNumber": n, "ETag": f'"{e}"'} for n, e in enumerate(etags, 1)]
        extra: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}
        with _edge(path, "complete_upload", creating=if_none_match):
            answer = await client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=object_key(path),
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},  # type: ignore[typeddict-item]
                **extra,
            )
        return FileStatus(path, False, 0, _etag(answer.get("ETag")))

    async def abort_upload(self, path: str, upload_id: str) -> bool:
        client = await self.client()
        try:
            with _edge(path, "abort_upload"):
                await client.abort_multipart_upload(
                    Bucket=self.bucket, Key=object_key(path), UploadId=upload_id
                )
        except NotFound:
            return False
        return True

    async def list_uploads(self, prefix: str) -> AsyncIterator[list[Upload]]:
        client = await self.client()
        params: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": object_key(prefix) if prefix.startswith("/") else prefix,
            "MaxUploads": self.page_size,
        }
        while True:
            answer = await self._page(client.list_multipart_uploads, params, prefix, "list_uploads")
            page = [
                Upload(
                    "/" + str(item["Key"]),
                    str(item["UploadId"]),
                    int(item["Initiated"].timestamp() * 1000) if item.get("Initiated") else 0,
                )
                for item in answer.get("Uploads", [])
            ]
            if page:
                yield page
            if not answer.get("IsTruncated"):
                return
            params["KeyMarker"] = answer.get("NextKeyMarker", "")
            params["UploadIdMarker"] = answer.get("NextUploadIdMarker", "")

    async def aclose(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()


def open_s3(url: str, options: Mapping[str, str] | None = None) -> tuple[S3Store, str]:
    """Opener for ``s3://bucket/path`` and ``s3a://bucket/path``: a new store (close it with
    ``aclose``) and the path. ``options``: ``fs.s3a.*`` client settings
    (``s3_settings.CLIENT_KEYS``); else the endpoint comes from ``AWS_ENDPOINT_URL_S3``
    / ``AWS_ENDPOINT_URL`` if set (botocore reads them), credentials from the AWS
    chain."""
    scheme, sep, rest = url.partition("://")
    if scheme.lower() not in ("s3", "s3a") or not sep:
        raise InvalidInput(f"not an s3:// or s3a:// URL: {url!r}")
    bucket, slash, tail = rest.partition("/")
    return S3Store(bucket, scheme=scheme.lower(), options=options), ("/" + tail if slash else "/")
