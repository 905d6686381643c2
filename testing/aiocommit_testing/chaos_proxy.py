"""A fault-injecting, rate-limiting HTTP proxy in front of a store emulator (loopback only).

``run_chaos_proxy(upstream, kind, chaos)`` starts an aiohttp server on 127.0.0.1 that
forwards every request to ``upstream`` (the ADLS emulator, fake-gcs-server or moto) and,
drawn from a seeded random generator, per request:

* throttles it the way the store does: ADLS ``503`` + ``x-ms-error-code: ServerBusy``;
  GCS ``429 rateLimitExceeded`` or ``503 backendError`` JSON; S3 ``503 SlowDown`` XML;
  a share of them with ``Retry-After``;
* loses its response: forwards it (the store applies it), then drops the connection;
* resets the connection before forwarding;
* delays it by a long-tailed latency (Pareto);
* with ``rate`` set, admits requests through a token bucket per account, bucket or key
  prefix (``rate_scope``) and throttles the rest in the store's format (issue 22's
  throttling front; ``rate`` may change while the proxy runs, as a store tightening).

Where an emulator differs from the service, the proxy enforces the service's documented
behaviour: on GCS the generation preconditions fake-gcs-server ignores (``ifGenerationMatch``
on simple uploads, rewrites, copies and deletes; ``ifSourceGenerationMatch``), answering
412 ``conditionNotMet``; on S3 a request naming a completed multipart upload (a repeated
``CompleteMultipartUpload``, an abort after completion) gets ``404 NoSuchUpload`` where moto
answers 200. ``ChaosProxy.counts`` says what was injected.

``ChaosProxyServer`` runs the same proxy in a child process (``python -m
aiocommit_testing.chaos_proxy``), so that serving it takes nothing from the caller's event
loop, as a remote store's front would not; its control API (``CONTROL``: ``GET``/``POST``
the ``Chaos`` fields, ``GET .../counts``, ``POST .../counts/clear``) is answered before any
chaos is drawn and is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import random
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal
from urllib.parse import quote

import anyio
from aiohttp import ClientSession, ClientTimeout, web
from yarl import URL

from aiocommit_testing.child_server import ChildServer, until_signalled

#: the largest request body forwarded (aiohttp's default is 1 MiB; a commit plan's part is more)
MAX_BODY = 256 * 1024 * 1024

StoreKind = Literal["adls", "gcs", "s3"]
RateScope = Literal["account", "bucket", "prefix"]
KINDS: tuple[StoreKind, ...] = ("adls", "gcs", "s3")
#: the control API's path on a proxy run with ``control`` (no store's path starts so)
CONTROL = "/_chaos"

_AUTO_HEADERS = ("Content-Type", "User-Agent", "Accept-Encoding", "Accept")
_HOP_HEADERS = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "expect",
}


@dataclasses.dataclass
class Chaos:
    """What the proxy injects; probabilities per request. Fields may change while it runs.

    Attributes:
        seed: seeds every draw (one generator per proxy; the run is reproducible as far
            as the order requests arrive in is).
        throttle: share of requests answered with the store's throttling response.
        retry_after_share: share of throttling responses that carry ``Retry-After``.
        retry_after: its value in seconds (a decimal number; ``"1"`` style on the wire).
        lost: share of requests forwarded, then answered by a dropped connection.
        reset: share of requests whose connection is reset before forwarding.
        latency: median added latency in seconds (0: none); the tail is Pareto.
        latency_cap: the most latency added to one request, in seconds.
        rate: requests per second admitted per ``rate_scope`` key (None: no limit).
        burst: bucket depth in seconds of ``rate``.
        rate_scope: ``account`` (ADLS's limit), ``bucket`` (GCS), ``prefix`` (S3: the key
            up to its last ``/``).
        enforce: enforce the service's documented behaviour where the emulator differs.
    """

    seed: int = 0
    throttle: float = 0.0
    retry_after_share: float = 0.5
    retry_after: float = 1.0
    lost: float = 0.0
    reset: float = 0.0
    latency: float = 0.0
    latency_cap: float = 2.0
    rate: float | None = None
    burst: float = 0.5
    rate_scope: RateScope = "account"
    enforce: bool = True


class TokenBuckets:
    """One token bucket per key: ``rate`` tokens a second, at most ``rate * burst``."""

    def __init__(self) -> None:
        self._state: dict[str, tuple[float, float]] = {}

    def take(self, key: str, rate: float, burst: float) -> bool:
        now = time.monotonic()
        depth = max(1.0, rate * burst)
        tokens, when = self._state.get(key, (depth, now))
        tokens = min(depth, tokens + (now - when) * rate)
        admitted = tokens >= 1.0
        self._state[key] = (tokens - 1.0 if admitted else tokens, now)
        return admitted


@dataclasses.dataclass(frozen=True)
class Target:
    """What a request is about: its account or bucket, object key, and kind of call."""

    account: str
    bucket: str
    key: str
    write: bool

    def scope(self, scope: RateScope) -> str:
        if scope == "account":
            return self.account
        if scope == "bucket":
            return f"{self.account}/{self.bucket}"
        return f"{self.account}/{self.bucket}/{self.key.rpartition('/')[0]}"


def target_of(kind: StoreKind, request: web.BaseRequest) -> Target:
    """Account, bucket and key of a request to ``kind``'s REST API (path-style S3)."""
    parts = request.path.split("/")
    write = request.method not in ("GET", "HEAD")
    if kind == "adls":  # /ACCOUNT/FILESYSTEM/path
        account = parts[1] if len(parts) > 1 else ""
        bucket = parts[2] if len(parts) > 2 else ""
        key = request.query.get("directory", "/".join(parts[3:]))
        return Target(account, bucket, key, write)
    if kind == "gcs":  # /storage/v1/b/B/o/NAME..., /upload/storage/v1/b/B/o?name=
        offset = 5 if parts[1:2] == ["upload"] else 4
        bucket = parts[offset] if len(parts) > offset else ""
        key = request.query.get("name") or request.query.get("prefix") or ""
        if not key and len(parts) > offset + 2:
            key = parts[offset + 2]
        return Target("gcs", bucket, key, write)
    bucket = parts[1] if len(parts) > 1 else ""  # S3 path style: /BUCKET/KEY
    key = "/".join(parts[2:]) or request.query.get("prefix", "")
    return Target("s3", bucket, key, write)


def throttle_response(
    kind: StoreKind, rng: random.Random, retry_after: float | None, head: bool
) -> web.Response:
    """The store's own throttling answer."""
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["Retry-After"] = f"{retry_after:g}"
    if kind == "adls":
        message = "Operations per second is over the account limit."
        headers["x-ms-error-code"] = "ServerBusy"
        body = {"error": {"code": "ServerBusy", "message": message}}
        return _answer(503, headers, json.dumps(body).encode(), "application/json", head)
    if kind == "gcs":
        status, reason = (429, "rateLimitExceeded") if rng.random() < 0.5 else (503, "backendError")
        message = "The rate of change requests to the bucket is too high."
        error = {"code": status, "message": message, "errors": [{"reason": reason}]}
        return _answer(
            status, headers, json.dumps({"error": error}).encode(), "application/json", head
        )
    body_xml = (
        "<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
        "<Message>Please reduce your request rate.</Message>"
        f"<RequestId>{rng.getrandbits(64):016X}</RequestId></Error>"
    )
    return _answer(503, headers, body_xml.encode(), "application/xml", head)


def _answer(
    status: int, headers: dict[str, str], body: bytes, content_type: str, head: bool
) -> web.Response:
    headers = {**headers, "Content-Type": content_type}
    return web.Response(status=status, headers=headers, body=None if head else body)


class ChaosProxy:
    """The proxy's state: settings (``chaos``), counters and the upstream client."""

    def __init__(
        self, upstream: str, kind: StoreKind, chaos: Chaos, *, control: bool = False
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown store kind {kind!r}; one of {KINDS}")
        self.upstream = str(URL(upstream).origin())
        self.kind = kind
        self.chaos = chaos
        self.rng = random.Random(chaos.seed)
        self.buckets = TokenBuckets()
        self.counts: Counter[str] = Counter()
        self.endpoint = ""
        self.control = control
        self._completed_uploads: set[str] = set()
        self._lock = asyncio.Lock()
        self._client: ClientSession | None = None

    def url(self, upstream: str) -> str:
        """``upstream`` (with its path, e.g. an ADLS account) through this proxy."""
        path = URL(upstream).path.rstrip("/")
        return self.endpoint + path

    def reseed(self, seed: int) -> None:
        self.chaos.seed = seed
        self.rng = random.Random(seed)

    def update(self, fields: Mapping[str, Any]) -> None:
        """Set ``Chaos`` fields by name (``seed`` also reseeds); an unknown name raises
        ``ValueError`` and sets nothing."""
        known = {field.name for field in dataclasses.fields(Chaos)}
        if unknown := sorted(set(fields) - known):
            raise ValueError(f"not Chaos fields: {unknown}")
        for name, value in fields.items():
            setattr(self.chaos, name, value)
        if "seed" in fields:
            self.reseed(self.chaos.seed)

    async def _control(self, request: web.BaseRequest) -> web.Response:
        """The control API (see the module docstring)."""
        path, method = request.path.rstrip("/"), request.method
        if path == CONTROL and method == "POST":
            try:
                fields = await request.json()
                if not isinstance(fields, dict):
                    raise ValueError("a JSON object of Chaos fields is expected")
                self.update(fields)
            except ValueError as error:
                return web.json_response({"error": str(error)}, status=400)
        elif path == CONTROL + "/counts/clear" and method == "POST":
            self.counts.clear()
            return web.json_response({})
        elif path == CONTROL + "/counts" and method == "GET":
            return web.json_response(dict(self.counts))
        elif not (path == CONTROL and method == "GET"):
            return web.json_response({"error": f"no {method} {path}"}, status=404)
        return web.json_response(dataclasses.asdict(self.chaos))

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if self.control and (request.path == CONTROL or request.path.startswith(CONTROL + "/")):
            return await self._control(request)
        chaos, rng = self.chaos, self.rng
        self.counts["requests"] += 1
        target = target_of(self.kind, request)
        head = request.method == "HEAD"
        if chaos.latency > 0:
            pause = min(chaos.latency_cap, chaos.latency * rng.paretovariate(1.5) / 2 ** (2 / 3))
            await asyncio.sleep(pause)
        retry_after = chaos.retry_after if rng.random() < chaos.retry_after_share else None
        if chaos.rate is not None and not self.buckets.take(
            target.scope(chaos.rate_scope), chaos.rate, chaos.burst
        ):
            self.counts["rate_throttled"] += 1
            return throttle_response(self.kind, rng, retry_after, head)
        if rng.random() < chaos.throttle:
            self.counts["throttled"] += 1
            return throttle_response(self.kind, rng, retry_after, head)
        if rng.random() < chaos.reset:
            self.counts["reset"] += 1
            return self._drop(request)
        lose = rng.random() < chaos.lost
        response = await self._enforced(request, target)
        if lose:
            self.counts["lost"] += 1
            return self._drop(request)
        self.counts["forwarded"] += 1
        return response

    def _drop(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError  # the connection is gone: nothing to answer

    async def _enforced(self, request: web.BaseRequest, target: Target) -> web.StreamResponse:
        if not self.chaos.enforce:
            return await self._forward(request)
        if self.kind == "s3":
            return await self._s3(request)
        if self.kind == "gcs" and target.write:
            async with self._lock:  # check-then-forward is atomic for this proxy's clients
                if await self._gcs_violated(request):
                    self.counts["enforced"] += 1
                    error = {
                        "code": 412,
                        "message": "Precondition Failed",
                        "errors": [{"reason": "conditionNotMet"}],
                    }
                    return web.json_response({"error": error}, status=412)
                return await self._forward(request)
        return await self._forward(request)

    async def _s3(self, request: web.BaseRequest) -> web.StreamResponse:
        upload_id = request.query.get("uploadId")
        if upload_id is not None and upload_id in self._completed_uploads:
            self.counts["enforced"] += 1
            body = (
                "<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchUpload</Code>"
                "<Message>The specified upload does not exist. The upload ID may be invalid, "
                "or the upload may have been aborted or completed.</Message>"
                f"<UploadId>{upload_id}</UploadId></Error>"
            )
            return _answer(404, {}, body.encode(), "application/xml", request.method == "HEAD")
        response = await self._forward(request)
        if (
            upload_id is not None
            and request.method in ("POST", "DELETE")
            and response.status < 300
            and b"<Error>" not in (response.body if isinstance(response.body, bytes) else b"")
        ):
            self._completed_uploads.add(upload_id)
        return response

    async def _gcs_generation(self, bucket: str, quoted_name: str) -> int:
        url = URL(f"{self.upstream}/storage/v1/b/{bucket}/o/{quoted_name}", encoded=True)
        async with self._session().get(url) as reply:
            if reply.status == 404:
                return 0
            return int((await reply.json(content_type=None))["generation"])

    async def _gcs_violated(self, request: web.BaseRequest) -> bool:
        """A generation precondition of the request that GCS would refuse with 412."""
        parts = request.raw_path.split("?", 1)[0].split("/")
        query = request.query
        # (bucket, quoted object name, expected generation, is a rewrite source)
        checks: list[tuple[str, str, str, bool]] = []
        is_object_api = parts[1:4] == ["storage", "v1", "b"]
        if is_object_api and len(parts) == 12 and parts[7] in ("rewriteTo", "copyTo"):
            if "ifGenerationMatch" in query:
                checks.append((parts[9], parts[11], query["ifGenerationMatch"], False))
            if "ifSourceGenerationMatch" in query:
                checks.append((parts[4], parts[6], query["ifSourceGenerationMatch"], True))
        elif is_object_api and len(parts) == 7 and request.method == "DELETE":
            if "ifGenerationMatch" in query:
                checks.append((parts[4], parts[6], query["ifGenerationMatch"], False))
        elif (
            parts[1:5] == ["upload", "storage", "v1", "b"]
            and query.get("uploadType") == "media"
            and "ifGenerationMatch" in query
        ):
            name = quote(query.get("name", ""), safe="")
            checks.append((parts[5], name, query["ifGenerationMatch"], False))
        for bucket, quoted_name, expected, is_source in checks:
            actual = await self._gcs_generation(bucket, quoted_name)
            if actual == 0 and (is_source or request.method == "DELETE"):
                continue  # missing: fake-gcs-server answers 404, as GCS does
            if str(actual) != expected:
                return True
        return False

    def _session(self) -> ClientSession:
        if self._client is None:
            self._client = ClientSession(auto_decompress=False, timeout=ClientTimeout(total=120))
        return self._client

    async def _forward(self, request: web.BaseRequest) -> web.Response:
        if request.headers.get("Expect", "").lower() == "100-continue":  # botocore's PUTs
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        url = URL(self.upstream + request.raw_path, encoded=True)
        async with self._session().request(
            request.method,
            url,
            data=body,
            headers=headers,
            allow_redirects=False,
            skip_auto_headers=_AUTO_HEADERS,  # signed requests must pass unchanged
        ) as reply:
            payload = await reply.read()
            out = {k: v for k, v in reply.headers.items() if k.lower() not in _HOP_HEADERS}
            if request.method == "HEAD":
                response = web.Response(status=reply.status, headers=out)
                if "Content-Length" in reply.headers:
                    response.headers["Content-Length"] = reply.headers["Content-Length"]
                return response
            return web.Response(status=reply.status, body=payload, headers=out)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


@contextlib.asynccontextmanager
async def run_chaos_proxy(
    upstream: str,
    kind: StoreKind,
    chaos: Chaos | None = None,
    *,
    port: int = 0,
    control: bool = False,
) -> AsyncIterator[ChaosProxy]:
    """Run a chaos proxy in the current event loop on ``127.0.0.1:port`` for the block.
    Requests go to ``upstream``'s origin with their own path: ``proxy.url(upstream)`` is
    ``upstream`` with the proxy's origin (e.g. an ADLS endpoint with its account).
    ``control``: serve the control API at ``CONTROL``."""
    proxy = ChaosProxy(upstream, kind, chaos or Chaos(), control=control)
    loop = asyncio.get_running_loop()

    def request(
        message: Any, payload: Any, protocol: Any, writer: Any, task: Any
    ) -> web.BaseRequest:  # bodies as large as the stores take
        return web.BaseRequest(
            message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY
        )

    server = web.Server(proxy.handle, request_factory=request)
    runner = web.ServerRunner(server, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        proxy.endpoint = f"http://127.0.0.1:{runner.addresses[0][1]}"
        yield proxy
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()
            await proxy.aclose()


class ChaosProxyServer(ChildServer):
    """A chaos proxy with its control API in a child process, for the block::

        async with run_child_server(ChaosProxyServer(upstream, "s3", chaos)) as proxy:
            await proxy.update(throttle=0.3)
            ... S3Store(bucket, endpoint_url=proxy.endpoint) ...
            counts = await proxy.counts()

    ``chaos`` is the proxy's initial settings; the child keeps its own copy."""

    name = "chaos proxy"
    ready_path = CONTROL

    def __init__(
        self, upstream: str, kind: StoreKind, chaos: Chaos | None = None, *, port: int = 0
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown store kind {kind!r}; one of {KINDS}")
        super().__init__(port)
        self.upstream = upstream
        self.kind = kind
        self.initial = chaos or Chaos()

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "aiocommit_testing.chaos_proxy",
            "--upstream",
            self.upstream,
            "--kind",
            self.kind,
            "--port",
            str(self.port),
            "--chaos",
            json.dumps(dataclasses.asdict(self.initial)),
        ]

    def url(self, upstream: str) -> str:
        """``upstream`` (with its path, e.g. an ADLS account) through this proxy."""
        return self.endpoint + URL(upstream).path.rstrip("/")

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        async with (
            ClientSession(timeout=ClientTimeout(total=30)) as session,
            session.request(method, self.endpoint + CONTROL + path, json=body) as reply,
        ):
            answer: dict[str, Any] = await reply.json()
            if reply.status != 200:
                raise ValueError(f"{self.name}: {method} {CONTROL}{path}: {answer}")
            return answer

    async def update(self, **fields: Any) -> Chaos:
        """Set ``Chaos`` fields in the child (``seed`` also reseeds); its settings after."""
        return Chaos(**await self._call("POST", "", fields))

    async def settings(self) -> Chaos:
        return Chaos(**await self._call("GET", ""))

    async def counts(self) -> Counter[str]:
        """What the proxy counted (``requests``, ``throttled``, ...) since the last clear."""
        return Counter(await self._call("GET", "/counts"))

    async def clear_counts(self) -> None:
        await self._call("POST", "/counts/clear")


async def _serve(upstream: str, kind: StoreKind, chaos: Chaos, port: int) -> None:
    async with run_chaos_proxy(upstream, kind, chaos, port=port, control=True) as proxy:
        print(f"CHAOS_PROXY_ENDPOINT={proxy.endpoint}", flush=True)
        await until_signalled()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Chaos proxy with a control API (loopback)")
    parser.add_argument("--upstream", required=True, help="the store emulator's endpoint")
    parser.add_argument("--kind", required=True, choices=KINDS)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chaos", default="{}", help="initial Chaos fields, a JSON object")
    args = parser.parse_args(argv)
    chaos = Chaos(**json.loads(args.chaos))
    asyncio.run(_serve(args.upstream, args.kind, chaos, args.port))


if __name__ == "__main__":
    main()
