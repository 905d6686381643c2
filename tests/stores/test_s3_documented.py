"""S3's documented behaviour where moto differs or cannot produce it, scripted over HTTP
by a loopback aiohttp server that plays S3's answers in order (the real aiobotocore client
sends and parses each; aioresponses cannot stand in for aiobotocore's responses with
aiohttp 3.14):

* ``ListMultipartUploads`` pages (moto ignores ``MaxUploads``);
* a second ``CompleteMultipartUpload`` of a completed upload answers ``NoSuchUpload``
  (moto answers 200): the job commit recognises the upload as done by its etag;
* 503 SlowDown, 403 AccessDenied, 412 on ``If-None-Match: *``, 409
  ConditionalRequestConflict, 500 InternalError: each becomes its store error;
* a rename's 412 from a copy carrying both preconditions: one HEAD of the destination
  tells ``AlreadyExists`` from ``PreconditionFailed``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from aiocommit.errors import (
    AlreadyExists,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    Throttled,
    Transient,
)
from aiocommit.stores.multipart import multipart_etag
from aiocommit.stores.s3 import S3Store
from aiocommit_testing.s3_emulator import use_dummy_credentials


@dataclass
class Scripted:
    """Answers (status, body, headers) in order; records (method, path?query)."""

    answers: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def add(self, status: int, body: str = "", headers: dict[str, str] | None = None) -> None:
        self.answers.append((status, body, headers or {}))

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.requests.append((request.method, str(request.rel_url)))
        self.headers.append(dict(request.headers))
        status, body, headers = self.answers.pop(0)
        return web.Response(
            status=status,
            body=body.encode(),
            headers={"Content-Type": "application/xml", **headers},
        )


def error_xml(code: str, message: str = "scripted") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    )


def uploads_xml(uploads: list[tuple[str, str]], next_marker: tuple[str, str] | None) -> str:
    items = "".join(
        f"<Upload><Key>{key}</Key><UploadId>{upload}</UploadId>"
        "<Initiated>2026-01-01T00:00:00.000Z</Initiated></Upload>"
        for key, upload in uploads
    )
    truncated = "true" if next_marker else "false"
    markers = (
        f"<NextKeyMarker>{next_marker[0]}</NextKeyMarker>"
        f"<NextUploadIdMarker>{next_marker[1]}</NextUploadIdMarker>"
        if next_marker
        else ""
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        "<ListMultipartUploadsResult><Bucket>bkt</Bucket>"
        f"<IsTruncated>{truncated}</IsTruncated>{markers}{items}"
        "</ListMultipartUploadsResult>"
    )


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[S3Store, Scripted]]:
    use_dummy_credentials()
    script = Scripted()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", script.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    s3 = S3Store("bkt", endpoint_url=f"http://127.0.0.1:{port}", path_style=True, page_size=2)
    yield s3, script
    await s3.aclose()
    await runner.cleanup()


async def test_list_uploads_follows_pages(scripted: tuple[S3Store, Scripted]) -> None:
    store, script = scripted
    script.add(200, uploads_xml([("d/a", "u1"), ("d/b", "u2")], ("d/b", "u2")))
    script.add(200, uploads_xml([("d/c", "u3")], None))
    pages = [page async for page in store.list_uploads("/d/")]
    requests = [url for (_, url) in script.requests]
    assert [[u.upload_id for u in page] for page in pages] == [["u1", "u2"], ["u3"]]
    assert pages[0][0].path == "/d/a"
    second = requests[1]
    assert "key-marker=d%2Fb" in second and "upload-id-marker=u2" in second
    assert "max-uploads=2" in requests[0]


async def test_second_complete_answers_no_such_upload(
    scripted: tuple[S3Store, Scripted],
) -> None:
    """S3 documents NoSuchUpload for an upload already completed; the store says NotFound
    and the completed object's etag is what ``multipart_etag`` computes from the parts."""
    store, script = scripted
    parts = ["0cc175b9c0f1b6a831c399e269772661", "92eb5ffee6ae2fec3ad71c777531578f"]
    script.add(404, error_xml("NoSuchUpload"))
    with pytest.raises(NotFound):
        await store.complete_upload("/d/f", "u1", parts)
    script.add(200, "", {"ETag": f'"{multipart_etag(parts)}"', "Content-Length": "2"})
    status = await store.stat("/d/f")
    assert status.etag == multipart_etag(parts)
    assert multipart_etag(parts).endswith("-2")


@pytest.mark.parametrize(
    ("status", "code", "error", "creating"),
    [
        (503, "SlowDown", Throttled, False),
        (403, "AccessDenied", PermissionDenied, False),
        (412, "PreconditionFailed", AlreadyExists, True),
        (412, "PreconditionFailed", PreconditionFailed, False),
        (409, "ConditionalRequestConflict", Transient, True),
        (500, "InternalError", Transient, False),
    ],
)
async def test_errors_mapped_at_the_edge(
    scripted: tuple[S3Store, Scripted],
    status: int,
    code: str,
    error: type[Exception],
    creating: bool,
) -> None:
    store, script = scripted
    script.add(status, error_xml(code))
    call = (
        store.write_bytes("/d/f", b"x", overwrite=False)
        if creating
        else store.upload_part("/d/f", "u1", 1, b"x")
    )
    with pytest.raises(error) as caught:
        await call
    assert len(script.requests) == 1, "no hidden retry below the engine's"
    if isinstance(caught.value, Transient):
        assert caught.value.maybe_applied == (code != "ConditionalRequestConflict")
    assert caught.value.retryable == (error in (Throttled, Transient))  # type: ignore[attr-defined]


EMPTY_LISTING = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    "<ListBucketResult><Name>bkt</Name><KeyCount>0</KeyCount>"
    "<IsTruncated>false</IsTruncated></ListBucketResult>"
)


@pytest.mark.parametrize(
    ("dest_there", "error"), [(True, AlreadyExists), (False, PreconditionFailed)]
)
async def test_rename_412_is_told_apart_by_one_head(
    scripted: tuple[S3Store, Scripted], dest_there: bool, error: type[Exception]
) -> None:
    """The copy carries ``x-amz-copy-source-if-match`` and ``If-None-Match: *``; S3's 412
    names neither, so a HEAD of the destination decides; nothing is deleted."""
    store, script = scripted
    script.add(200, EMPTY_LISTING)
    script.add(412, error_xml("PreconditionFailed"))
    if dest_there:
        script.add(200, "", {"ETag": '"e2"', "Content-Length": "1"})
    else:
        script.add(404, "")
    with pytest.raises(error):
        await store.rename("/d/a", "/d/b", source_etag="e1")
    assert [method for method, _ in script.requests] == ["GET", "PUT", "HEAD"]
    copy = script.headers[1]
    assert copy["x-amz-copy-source-if-match"] == '"e1"'
    assert copy["If-None-Match"] == "*"
    assert script.requests[2][1] == "/bkt/d/b"
