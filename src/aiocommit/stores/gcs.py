"""Google Cloud Storage through ``gcloud-aio-storage``: URLs ``gs://bucket/path``.

Store path ``/a/b`` is object ``a/b`` of the bucket; ``/`` is the bucket itself.

Design (what this adapter promises beyond the contract in ``stores.base``):

* **Directories are prefixes.** ``mkdirs`` writes a zero-byte placeholder object
  ``dir/`` for the path and for every ancestor that lacks one, so an empty directory
  exists and survives the deletion of its last child; it first checks that no object
  named like the path or an ancestor exists (a file in the way raises ``AlreadyExists``).
  ``stat`` of a directory succeeds when its placeholder or any object under its prefix
  exists. Parents are never required: ``write_bytes`` and ``rename`` do not create
  placeholders (their parents exist implicitly as prefixes) and never check for a file at
  an ancestor. Listings hide a directory's own placeholder. A bucket may hold both an
  object ``a`` and objects under ``a/``: then ``stat`` reports the file and a listing
  reports both. ``capabilities.directories`` is therefore ``False``.
* **Etag = generation**, ``checksum`` = ``crc32c`` (base64, as GCS reports it), the
  same from a listing, ``stat`` and a write. The generation is unique per write of a name,
  so it is what preconditions use (``source_etag`` -> ``ifSourceGenerationMatch``), but a
  rewrite or move gives the destination a new one: ``etags_preserved_in_rename`` is
  ``False``. crc32c and size *are* kept by a copy, so rename recovery compares
  ``checksum`` + ``size`` of the destination with the values recorded for the source.
* **Rename** is two requests: ``objects.moveTo`` (one atomic call) where the bucket has a
  hierarchical namespace (asked once per store; ``atomic_move=True``/``False`` decides
  instead), else rewrite + delete. Rewrite + delete: the source generation ``G`` is
  ``source_etag`` or, without one, read from the source (a third request);
  ``rewriteTo`` with ``ifSourceGenerationMatch=G`` and, without ``overwrite``,
  ``ifGenerationMatch=0`` (looping on ``rewriteToken``); then delete the source with
  ``ifGenerationMatch=G``. A 412 from the rewrite is ``AlreadyExists`` when the
  destination exists, else ``PreconditionFailed`` (the source is not at ``G``); a 404 is
  ``NotFound(source)``. A directory (placeholder or bare prefix) at the destination is not
  probed: the object lands beside it, as a write would. Both requests go straight to the
  shared session (no gcloud-aio call objects), the hot path of a job commit; at most
  ``runtime.loop_turns.STARTS_PER_TURN`` of those start in one event-loop turn.
  ``capabilities.atomic_rename`` is True only for ``atomic_move=True``.
* **Interrupted rename** (copied, source not yet deleted): a re-run without ``overwrite``
  raises ``AlreadyExists(dest)``. The engine then stats both; equal ``checksum``
  and ``size`` mean the copy completed, so it deletes the source and counts the file as
  renamed. ``complete_interrupted_rename`` does exactly that, deleting the source only at
  the generation it compared (an overwritten source is left alone).
* **Errors** are translated once, here: 404 ``NotFound``; 412 ``PreconditionFailed`` (or
  ``AlreadyExists`` for a create with ``ifGenerationMatch=0``); 409 ``AlreadyExists``;
  401/403 ``PermissionDenied``; 429/503 ``Throttled`` (``Retry-After`` honoured);
  408/500/502/504, timeouts and dropped connections ``Transient`` (``maybe_applied``
  false only when the connection was never made).
* **No hidden retries.** gcloud-aio-storage retries only the final PUT of resumable
  uploads; writes here are single-request (multipart) uploads, so the engine's backoff is
  the only one. Token refreshes are retried by gcloud-aio-auth, which is harmless.
* One ``aiohttp`` session per store, ``connections`` sockets; credentials as
  gcloud-aio-auth finds them (``service_file``, ``GOOGLE_APPLICATION_CREDENTIALS``,
  gcloud's ADC file, the metadata server); ``api_root`` or ``STORAGE_EMULATOR_HOST`` points
  at an emulator (no auth header then).
"""

from __future__ import annotations

import contextlib
import mimetypes
import os
from collections.abc import AsyncIterator
from functools import partial
from typing import Any
from urllib.parse import quote

import aiohttp
import anyio
import anyio.to_thread
import msgspec
from gcloud.aio.auth import Token
from gcloud.aio.storage import Storage

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
from aiocommit.runtime.loop_turns import StartsPerTurn
from aiocommit.stores.base import (
    REMOTE_LOOP_IN_FLIGHT,
    REQUEST_RETRY,
    FileStatus,
    StoreCapabilities,
    check_clean,
)
from aiocommit.stores.edge import retry_after, translating
from aiocommit.stores.prefixes import (
    KnownDirectories,
    gather,
    listing_prefix,
    mkdirs_with_markers,
    object_key,
    read_local_file,
)

_LIST_FIELDS = "items(name,size,generation,crc32c,md5Hash),prefixes,nextPageToken"


class _Rewrite(msgspec.Struct, frozen=True):
    """The fields of a rewrite (or move) answer that the rename loop reads."""

    done: bool = True
    rewriteToken: str | None = None


class _Namespace(msgspec.Struct, frozen=True):
    enabled: bool = False


class _Bucket(msgspec.Struct, frozen=True):
    hierarchicalNamespace: _Namespace = _Namespace()


_decode_rewrite = msgspec.json.Decoder(_Rewrite).decode
_decode_bucket = msgspec.json.Decoder(_Bucket).decode


class ObjectInfo(msgspec.Struct, frozen=True):
    """What GCS says about one object: enough for preconditions and rename recovery."""

    name: str
    size: int
    generation: int
    crc32c: str
    md5: str

    @property
    def etag(self) -> str:
        return str(self.generation)

    def status(self) -> FileStatus:
        return FileStatus("/" + self.name, False, self.size, self.etag, self.crc32c or None)

    def same_content(self, other: ObjectInfo) -> bool:
        """Equal size and crc32c (and md5 where both have one): what a copy keeps."""
        if (self.size, self.crc32c) != (other.size, other.crc32c) or not self.crc32c:
            return False
        return not (self.md5 and other.md5 and self.md5 != other.md5)

    @classmethod
    def from_resource(cls, resource: dict[str, Any]) -> ObjectInfo:
        return cls(
            name=str(resource["name"]),
            size=int(resource.get("size", 0)),
            generation=int(resource.get("generation", 0)),
            crc32c=str(resource.get("crc32c", "")),
            md5=str(resource.get("md5Hash", "")),
        )


def translate(
    error: BaseException, path: str | None, operation: str, *, creating: bool = False
) -> StoreError:
    """The one place where gcloud-aio / aiohttp errors become store errors.

    ``creating``: the call carried ``ifGenerationMatch=0``, so a 412 means "exists".
    """
    if isinstance(error, StoreError):
        return error
    if isinstance(error, aiohttp.ClientResponseError):
        status = error.status
        message = f"GCS {status}: {(error.message or '')[:300]}"
        if status == 404:
            return NotFound(message, path=path, operation=operation)
        if status == 412:
            if creating:
                return AlreadyExists(message, path=path, operation=operation)
            return PreconditionFailed(message, path=path, operation=operation)
        if status == 409:
            return AlreadyExists(message, path=path, operation=operation)
        if status in (401, 403):
            return PermissionDenied(message, path=path, operation=operation)
        if status in (429, 503):
            wait = retry_after(error.headers.get("Retry-After") if error.headers else None)
            return Throttled(message, path=path, operation=operation, retry_after=wait)
        if status in (408, 500, 502, 504):
            return Transient(message, path=path, operation=operation, maybe_applied=True)
        return StoreError(message, path=path, operation=operation)
    if isinstance(error, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        return Transient(
            f"cannot connect to GCS: {error}", path=path, operation=operation, maybe_applied=False
        )
    if isinstance(error, aiohttp.ClientError | TimeoutError | ConnectionError):
        return Transient(
            f"GCS call failed: {error!r}", path=path, operation=operation, maybe_applied=True
        )
    return StoreError(f"GCS call failed: {error!r}", path=path, operation=operation)


_edge = translating(translate, Exception)


#: the pool's size: as ADLS's (``aiocommit.stores.adls.DEFAULT_CONNECTIONS``), 1,024
#: requests in flight kept their objects alive through the young collections and set
#: off full ones (110-200 ms of the caller's loop each at 5,000 files on fake-gcs)
DEFAULT_CONNECTIONS = 256


class GcsStore:
    """One GCS bucket as a store. See the module docstring for the semantics.

    Args:
        bucket: the bucket name.
        connections: size of the shared aiohttp connection pool, which caps the
            engine's calls in flight (``max_in_flight``).
        api_root: e.g. ``http://127.0.0.1:4443`` for an emulator; defaults to
            ``STORAGE_EMULATOR_HOST`` if set, else the real service.
        api_is_dev: send no credentials; defaults to True when there is an ``api_root``
            (pass False for an authenticated private endpoint).
        service_file: a service-account (or authorized-user) JSON file; else
            gcloud-aio-auth's defaults.
        token: a ready ``gcloud.aio.auth.Token`` (overrides ``service_file``).
        page_size: ``maxResults`` per listing page.
        timeout: seconds per HTTP call.
        delete_concurrency: parallel deletes in a recursive delete.
        atomic_move: rename with ``objects.moveTo`` (True) or rewrite + delete (False);
            None (default): ``moveTo`` where the bucket has a hierarchical namespace.
    """

    def __init__(
        self,
        bucket: str,
        *,
        connections: int = DEFAULT_CONNECTIONS,
        api_root: str | None = None,
        api_is_dev: bool | None = None,
        service_file: str | None = None,
        token: Token | None = None,
        page_size: int = 1000,
        timeout: float = 60.0,
        delete_concurrency: int = 64,
        atomic_move: bool | None = None,
    ):
        if not bucket or "/" in bucket:
            raise InvalidInput(f"not a bucket name: {bucket!r}")
        self.bucket = bucket
        self.connections = connections
        self.page_size = page_size
        self.timeout = timeout
        self.delete_concurrency = delete_concurrency
        self.atomic_move = atomic_move
        if api_root is None:
            emulator = os.environ.get("STORAGE_EMULATOR_HOST")
            if emulator:
                api_root = emulator if "://" in emulator else f"http://{emulator}"
        self.api_root = api_root.rstrip("/") if api_root else None
        # as gcloud-aio: an explicit or emulator api_root sends no credentials unless False
        self.api_is_dev = bool(self.api_root) if api_is_dev is None else api_is_dev
        self._service_file = service_file
        self._token = token
        self._session: aiohttp.ClientSession | None = None
        self._client: Storage | None = None
        self._bucket_moves: bool | None = None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        #: directories this client made or found: mkdirs asks nothing about them again
        self._known_dirs = KnownDirectories()
        #: requests started per loop turn, bounded (a rename's delete follows its copy's
        #: answer at once: many answers in one turn would each start one)
        self._starts = StartsPerTurn()

    # -- plumbing ------------------------------------------------------------------------

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            etags=True,
            etags_preserved_in_rename=False,
            atomic_rename=bool(self.atomic_move),
            directories=False,
            max_in_flight=self.connections,
            loop_in_flight=REMOTE_LOOP_IN_FLIGHT,
        )

    def qualify(self, path: str) -> str:
        return f"gs://{self.bucket}{path}"

    def unqualify(self, uri: str) -> str:
        base = f"gs://{self.bucket}"
        if uri == base:
            return "/"
        if not uri.startswith(base + "/"):
            raise InvalidInput(f"{uri!r} is not in bucket {self.bucket!r}")
        return uri[len(base) :]

    def _storage(self) -> Storage:
        """The client, created on first use (inside the running event loop).
        ``PermissionDenied`` at once, naming the variables, when no credentials can be
        found (rather than seconds later, a connection error to the metadata server)."""
        if self._client is None:
            if not self.api_is_dev and self._service_file is None and self._token is None:
                missing = missing_credentials()
                if missing:
                    raise PermissionDenied(missing, path=f"gs://{self.bucket}", operation="auth")
            connector = aiohttp.TCPConnector(
                limit=self.connections, limit_per_host=self.connections
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None)
            )
            self._client = Storage(
                service_file=self._service_file,
                token=self._token,
                # gcloud-aio types ``session`` as its rest/aio alias; this is the aio build
                session=self._session,  # type: ignore[arg-type]
                api_root=self.api_root,
                api_is_dev=self.api_is_dev,
            )
        return self._client

    @property
    def _call_timeout(self) -> int:
        return max(1, round(self.timeout))

    def _url(self, name: str) -> str:
        return f"{self._storage()._api_root_read}/{self.bucket}/o/{quote(name, safe='')}"

    @staticmethod
    def _file_status(resource: dict[str, Any]) -> FileStatus:
        return ObjectInfo.from_resource(resource).status()

    async def _info_or_none(self, path: str, operation: str) -> ObjectInfo | None:
        try:
            with _edge(path, operation):
                body = await self._send("GET", self._url(object_key(path)), {})
        except NotFound:
            return None
        return ObjectInfo.from_resource(msgspec.json.decode(body))

    async def _list(self, params: dict[str, str], path: str, operation: str) -> dict[str, Any]:
        url = f"{self._storage()._api_root_read}/{self.bucket}/o"
        with _edge(path, operation):
            data: dict[str, Any] = msgspec.json.decode(await self._send("GET", url, params))
        return data

    async def _under(self, path: str, limit: int, operation: str) -> list[str]:
        """Names of up to ``limit`` objects below directory ``path`` (placeholder included)."""
        data = await self._list(
            {"prefix": listing_prefix(path), "maxResults": str(limit), "fields": _LIST_FIELDS},
            path,
            operation,
        )
        return [str(item["name"]) for item in data.get("items", [])]

    async def _upload(
        self, path: str, data: bytes, *, overwrite: bool, operation: str
    ) -> dict[str, Any]:
        """One multipart upload (fake-gcs-server enforces preconditions only on these)."""
        name = object_key(path)
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        params = {} if overwrite else {"ifGenerationMatch": "0"}
        with _edge(path, operation, creating=not overwrite):
            return await self._storage().upload(
                self.bucket,
                name,
                data,
                content_type=content_type,
                metadata={"contentType": content_type},
                parameters=params,
                force_resumable_upload=False,
                timeout=self._call_timeout,
            )

    # -- the store contract ----------------------------------------------------------------

    async def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        prefix = listing_prefix(path)
        params = {
            "prefix": prefix,
            "delimiter": "/",
            "maxResults": str(self.page_size),
            "fields": _LIST_FIELDS,
        }
        exists = prefix == ""
        seen: set[str] = set()  # fake-gcs-server repeats prefixes on later pages
        retry = REQUEST_RETRY.get()  # each page one request: retried at its page token
        while True:
            data = await retry(partial(self._list, dict(params), path, "list_dir"))
            fresh = [p for p in data.get("prefixes", []) if p not in seen]
            seen.update(fresh)
            page = [FileStatus("/" + p.rstrip("/"), True) for p in fresh]
            for item in data.get("items", []):
                if item["name"] == prefix:
                    exists = True
                    continue
                page.append(self._file_status(item))
            if page:
                exists = True
                yield page
            token = data.get("nextPageToken")
            if not token:
                break
            params["pageToken"] = str(token)
        if not exists:
            raise NotFound("no such directory", path=path, operation="list_dir")

    async def missing_container(self) -> str | None:
        """``bucket 'NAME' does not exist`` when the URL's bucket is missing (one
        Buckets-Get), else None (it exists, or the answer says nothing)."""
        try:
            await self._storage().get_bucket_metadata(self.bucket, timeout=self._call_timeout)
        except aiohttp.ClientResponseError as error:
            if error.status == 404:
                return f"bucket {self.bucket!r} does not exist"
        except (aiohttp.ClientError, TimeoutError, StoreError):
            pass
        return None

    async def stat(self, path: str) -> FileStatus:
        if path.strip("/") == "":
            return FileStatus("/", True)
        info = await self._info_or_none(path, "stat")
        if info is not None:
            return info.status()
        if await self._under(path, 1, "stat"):
            return FileStatus(path.rstrip("/"), True)
        raise NotFound("no such file or directory", path=path, operation="stat")

    async def object_info(self, path: str) -> ObjectInfo:
        """The object at ``path`` with its generation; ``NotFound`` if there is none."""
        info = await self._info_or_none(path, "stat")
        if info is None:
            raise NotFound("no such object", path=path, operation="stat")
        return info

    async def mkdirs(self, path: str) -> None:
        async def place(marker: str) -> None:
            with contextlib.suppress(AlreadyExists):  # a concurrent mkdirs placed it
                await self._upload(marker, b"", overwrite=False, operation="mkdirs")

        await mkdirs_with_markers(
            path, lambda name: self._info_or_none(name, "mkdirs"), place, self._known_dirs
        )

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        """Each request (the object's delete, the listings, a delete per object below it)
        runs in ``REQUEST_RETRY``: the engine paces and retries it on its own."""
        if path.strip("/") == "":
            raise PreconditionFailed("refusing to delete the root", path=path, operation="delete")
        self._known_dirs.forget(path)
        name = object_key(path.rstrip("/"))
        retry = REQUEST_RETRY.get()
        try:
            await retry(lambda: self._sent(path, "delete", "DELETE", self._url(name), {}))
            return True
        except NotFound:
            pass
        marker = listing_prefix(path)
        if not recursive:
            names = await retry(lambda: self._under(path, 2, "delete"))
            if any(n != marker for n in names):
                raise NotEmpty("directory is not empty", path=path, operation="delete")
            if not names:
                return False
            return await self._delete_names([marker], path)
        params = {"prefix": marker, "maxResults": str(self.page_size), "fields": _LIST_FIELDS}
        deleted = False
        while True:
            data = await retry(partial(self._list, dict(params), path, "delete"))
            names = [str(item["name"]) for item in data.get("items", [])]
            if names and await self._delete_names(names, path):
                deleted = True
            token = data.get("nextPageToken")
            if not token:
                return deleted
            params["pageToken"] = str(token)

    async def _delete_names(self, names: list[str], path: str) -> bool:
        """Delete objects, ``delete_concurrency`` at a time; missing ones are skipped."""
        limiter = anyio.CapacityLimiter(self.delete_concurrency)
        found = False
        retry = REQUEST_RETRY.get()

        async def one(name: str) -> None:
            nonlocal found
            async with limiter:
                try:
                    url = self._url(name)
                    await retry(lambda: self._sent("/" + name, "delete", "DELETE", url, {}))
                    found = True
                except NotFound:
                    pass

        await gather(partial(one, n) for n in names)
        return found

    async def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> None:
        """Two requests with ``source_etag`` (rewrite + delete, or one ``moveTo``); a GET of
        the source first without it. Requests go straight to the shared session."""
        check_clean(dest)
        generation: int | None = None
        if source_etag is not None:
            if not source_etag.isdigit():
                raise PreconditionFailed(
                    f"{source_etag!r} is not a GCS generation", path=source, operation="rename"
                )
            generation = int(source_etag)
        move = await self._uses_move()
        # each request in REQUEST_RETRY: the engine paces it, and retries it on its own
        # when throttled (not applied); other errors end the call as before
        retry = REQUEST_RETRY.get()
        if generation is None and not move:
            info = await retry(lambda: self._info_or_none(source, "rename"))
            if info is None:
                raise NotFound("rename source not found", path=source, operation="rename")
            generation = info.generation
        if source == dest:
            if not overwrite:
                raise AlreadyExists("rename destination exists", path=dest, operation="rename")
            return
        params: dict[str, str] = {} if overwrite else {"ifGenerationMatch": "0"}
        if generation is not None:
            params["ifSourceGenerationMatch"] = str(generation)
        source_url = self._url(object_key(source))
        dest_name = quote(object_key(dest), safe="")
        try:
            if move:
                url = f"{source_url}/moveTo/o/{dest_name}"
                await retry(lambda: self._sent(source, "rename", "POST", url, params))
            else:
                url = f"{source_url}/rewriteTo/b/{self.bucket}/o/{dest_name}"
                result = await retry(lambda: self._rewrite(source, url, params))
                while not result.done and result.rewriteToken:
                    more = {**params, "rewriteToken": result.rewriteToken}
                    result = await retry(partial(self._rewrite, source, url, more))
        except NotFound as error:
            raise NotFound("rename source not found", path=source, operation="rename") from error
        except PreconditionFailed as error:
            if not overwrite and await self._info_or_none(dest, "rename") is not None:
                raise AlreadyExists(
                    "rename destination exists", path=dest, operation="rename"
                ) from error
            if await self._info_or_none(source, "rename") is None:
                raise NotFound(
                    "rename source not found", path=source, operation="rename"
                ) from error
            raise PreconditionFailed(
                f"rename source is not at generation {generation}", path=source, operation="rename"
            ) from error
        if move:
            return
        condition = {"ifGenerationMatch": str(generation)}
        try:
            await retry(lambda: self._sent(source, "rename", "DELETE", source_url, condition))
        except NotFound:
            return  # deleted by someone else after our copy: the destination is in place
        except PreconditionFailed as error:
            raise PreconditionFailed(
                "the source was replaced during the rename; the destination holds"
                f" generation {generation} of it",
                path=source,
                operation="rename",
            ) from error

    async def _uses_move(self) -> bool:
        """``atomic_move``, or (when None) whether the bucket has a hierarchical namespace,
        where ``objects.moveTo`` is what GCS offers; asked once per store. A bucket that
        cannot be asked (no ``storage.buckets.get``) is renamed by rewrite + delete."""
        if self.atomic_move is not None:
            return self.atomic_move
        if self._bucket_moves is None:
            url = f"{self._storage()._api_root_read}/{self.bucket}"
            try:
                with _edge("/", "rename"):
                    body = await self._send("GET", url, {"fields": "hierarchicalNamespace"})
                self._bucket_moves = _decode_bucket(body).hierarchicalNamespace.enabled
            except (StoreError, msgspec.DecodeError):
                self._bucket_moves = False
        return self._bucket_moves

    async def _headers(self) -> dict[str, str]:
        client = self._storage()
        if self.api_is_dev:
            return {}
        return await client._headers()

    async def _send(
        self, method: str, url: str, params: dict[str, str], data: bytes | None = None
    ) -> bytes:
        """One request on the shared session; a non-2xx answer raises aiohttp's
        ``ClientResponseError`` (status, body text, headers) for ``translate``."""
        self._storage()
        assert self._session is not None
        await self._starts.wait()
        headers = await self._headers()
        if data is not None:
            headers["Content-Type"] = "application/json; charset=UTF-8"
        async with self._session.request(
            method, url, params=params, headers=headers, data=data, timeout=self._timeout
        ) as response:
            body = await response.read()
            if response.status >= 300:
                raise aiohttp.ClientResponseError(
                    response.request_info,
                    (),
                    status=response.status,
                    message=body.decode("utf-8", "replace")[:300] or str(response.reason),
                    headers=response.headers,
                )
            return body

    async def _rewrite(self, source: str, url: str, params: dict[str, str]) -> _Rewrite:
        """One rewrite request of a rename of ``source``, its errors translated."""
        body = await self._sent(source, "rename", "POST", url, params, b"{}")
        return _decode_rewrite(body or b"{}")

    async def _sent(
        self,
        path: str,
        operation: str,
        method: str,
        url: str,
        params: dict[str, str],
        data: bytes | None = None,
    ) -> bytes:
        """``_send`` with a failure translated to a ``StoreError`` about ``path``."""
        with _edge(path, operation):
            return await self._send(method, url, params, data)

    async def complete_interrupted_rename(self, source: str, dest: str) -> bool:
        """Finish a rename stopped between copy and delete.

        When ``dest`` holds what a copy of ``source`` would (``same_content``), delete the
        source at the generation compared and return True; otherwise change nothing and
        return False. ``NotFound`` if either is missing.
        """
        src = await self.object_info(source)
        dst = await self.object_info(dest)
        if not src.same_content(dst):
            return False
        try:
            with _edge(source, "rename"):
                await self._storage().delete(
                    self.bucket,
                    object_key(source),
                    params={"ifGenerationMatch": str(src.generation)},
                    timeout=self._call_timeout,
                )
        except NotFound:
            pass
        return True

    async def read_bytes(self, path: str) -> bytes:
        with _edge(path, "read_bytes"):
            return await self._storage().download(
                self.bucket, object_key(path), timeout=self._call_timeout
            )

    async def _write(self, path: str, data: bytes, overwrite: bool, operation: str) -> FileStatus:
        check_clean(path)
        if await self._under(path, 1, operation):
            raise AlreadyExists("a directory is at the path", path=path, operation=operation)
        resource = await self._upload(path, data, overwrite=overwrite, operation=operation)
        return self._file_status(resource)

    async def write_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> FileStatus:
        return await self._write(path, bytes(data), overwrite, "write_bytes")

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus:
        return await self._write(path, await read_local_file(local_path), overwrite, "upload_file")

    async def aclose(self) -> None:
        client, session = self._client, self._session
        self._client = self._session = None
        if client is not None:
            await client.close()
        if session is not None:
            await session.close()


#: where gcloud keeps application default credentials (``gcloud auth application-default
#: login``), under ``CLOUDSDK_CONFIG`` or ``~/.config/gcloud``
ADC_FILE = "application_default_credentials.json"


def missing_credentials() -> str | None:
    """Why no Google credentials can be found, or None when a source is there (the
    ``GOOGLE_APPLICATION_CREDENTIALS`` file, gcloud's ADC file, or Google Cloud's metadata
    server, known by ``GCE_METADATA_HOST`` or the machine's DMI product name)."""
    if os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") or os.environ.get("GCE_METADATA_HOST"):
        return None
    config = os.environ.get("CLOUDSDK_CONFIG") or os.path.expanduser("~/.config/gcloud")
    if os.path.isfile(os.path.join(config, ADC_FILE)):
        return None
    try:
        with open("/sys/class/dmi/id/product_name", encoding="utf-8") as product:
            if "Google" in product.read():
                return None
    except OSError:
        pass
    return (
        "no Google Cloud credentials: set GOOGLE_APPLICATION_CREDENTIALS to a service "
        "account key file (or run `gcloud auth application-default login`), or "
        "STORAGE_EMULATOR_HOST to an emulator's address"
    )


def open_gcs(url: str) -> tuple[GcsStore, str]:
    """Opener for ``gs://bucket/path``: a new store (close it with ``aclose``) and the path."""
    if not url.startswith("gs://"):
        raise InvalidInput(f"not a gs:// URL: {url!r}")
    rest = url[len("gs://") :]
    bucket, slash, tail = rest.partition("/")
    return GcsStore(bucket), ("/" + tail if slash else "/")
