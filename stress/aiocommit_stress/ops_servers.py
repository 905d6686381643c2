"""Servers for ``bench ops``, each run in its own process so its CPU is not the client's.

* ``gcs``: a fast GCS JSON-API stub for the calls a rename, stat and delete make (object
  GET, ``rewriteTo``, DELETE, bucket GET), answering with fake-gcs-server 1.54's response
  bodies (captured from it) over a small in-memory bucket. fake-gcs-server itself burns
  17-21 ms of its own CPU per rename, which would hide the client's cost.
* ``floor``: answers every request with an empty ``201``: the bare aiohttp request floor.

``python -m aiocommit_stress.ops_servers gcs|floor`` prints ``PORT=N`` and serves on
127.0.0.1 until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import time
import zlib
from typing import Any
from urllib.parse import quote

from aiohttp import web

from aiocommit_testing.child_server import until_signalled

_NOT_FOUND = json.dumps(
    {
        "error": {
            "code": 404,
            "message": "Not Found",
            "errors": [{"domain": "global", "reason": "Not Found", "message": "Not Found"}],
        }
    }
).encode()
_PRECONDITION = json.dumps(
    {
        "error": {
            "code": 412,
            "message": "Precondition failed",
            "errors": [
                {"domain": "global", "reason": "conditionNotMet", "message": "Precondition failed"}
            ],
        }
    }
).encode()


class GcsStub:
    """One bucket's objects (name -> (data digest fields, generation)) and the handlers."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[int, str, str, int]] = {}
        self._generations = itertools.count(int(time.time() * 1e6))
        self.app = web.Application()
        self.app.router.add_post("/_stub/seed", self._seed)
        self.app.router.add_get("/storage/v1/b/{bucket}", self._bucket)
        self.app.router.add_route("*", "/storage/v1/b/{bucket}/o/{tail:.+}", self._object)

    def _resource(self, request: web.Request, bucket: str, name: str) -> dict[str, Any]:
        size, crc32c, md5, generation = self.objects[name]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        base = f"http://{request.host}"
        quoted = quote(name, safe="")
        return {
            "kind": "storage#object",
            "name": name,
            "id": f"{bucket}/{name}",
            "bucket": bucket,
            "size": str(size),
            "contentType": "application/octet-stream",
            "crc32c": crc32c,
            "md5Hash": md5,
            "etag": md5,
            "storageClass": "STANDARD",
            "timeCreated": stamp,
            "timeStorageClassUpdated": stamp,
            "updated": stamp,
            "generation": str(generation),
            "selfLink": f"{base}/storage/v1/b/{bucket}/o/{quoted}",
            "mediaLink": f"{base}/download/storage/v1/b/{bucket}/o/{quoted}?alt=media",
            "metageneration": "1",
        }

    async def _seed(self, request: web.Request) -> web.Response:
        prefix, count = request.query["prefix"], int(request.query["count"])
        data = b"x"
        crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
        generations = {}
        for n in range(count):
            generation = next(self._generations)
            self.objects[f"{prefix}{n}"] = (len(data), crc, md5, generation)
            generations[f"{prefix}{n}"] = str(generation)
        return web.json_response(generations)

    async def _bucket(self, request: web.Request) -> web.Response:
        bucket = request.match_info["bucket"]
        body = {"kind": "storage#bucket", "id": bucket, "name": bucket, "location": "US-CENTRAL1"}
        return web.json_response(body)

    async def _object(self, request: web.Request) -> web.Response:
        bucket, tail = request.match_info["bucket"], request.match_info["tail"]
        name, _, rest = tail.partition("/rewriteTo/b/")
        if request.method == "POST" and rest:
            await request.read()
            dest = rest.partition("/o/")[2]
            if name not in self.objects:
                return web.Response(status=404, body=_NOT_FOUND, content_type="application/json")
            size, crc, md5, generation = self.objects[name]
            wanted = request.query.get("ifSourceGenerationMatch")
            if wanted is not None and wanted != str(generation):
                return web.Response(status=412, body=_PRECONDITION, content_type="application/json")
            if request.query.get("ifGenerationMatch") == "0" and dest in self.objects:
                return web.Response(status=412, body=_PRECONDITION, content_type="application/json")
            self.objects[dest] = (size, crc, md5, next(self._generations))
            body = {
                "kind": "storage#rewriteResponse",
                "totalBytesRewritten": str(size),
                "objectSize": str(size),
                "done": True,
                "rewriteToken": "",
                "resource": self._resource(request, bucket, dest),
            }
            return web.json_response(body)
        if name not in self.objects:
            return web.Response(status=404, body=_NOT_FOUND, content_type="application/json")
        if request.method == "GET":
            return web.json_response(self._resource(request, bucket, name))
        if request.method == "DELETE":
            wanted = request.query.get("ifGenerationMatch")
            if wanted is not None and wanted != str(self.objects[name][3]):
                return web.Response(status=412, body=_PRECONDITION, content_type="application/json")
            del self.objects[name]
            return web.Response(status=200, body=b"null", content_type="application/json")
        return web.Response(status=405)


def floor_app() -> web.Application:
    """Every request gets an empty ``201``."""

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=201)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


async def _serve(kind: str) -> None:
    app = GcsStub().app if kind == "gcs" else floor_app()
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.base_events.Server)
    print(f"PORT={server.sockets[0].getsockname()[1]}", flush=True)
    try:
        await until_signalled()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="bench ops servers (loopback only)")
    parser.add_argument("kind", choices=["gcs", "floor"])
    asyncio.run(_serve(parser.parse_args(argv).kind))


if __name__ == "__main__":
    main()
