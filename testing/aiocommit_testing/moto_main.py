"""``python -m moto.server`` with S3 gaps closed:

* ``ListMultipartUploads`` reports when each upload started (moto 5.x reports
  ``2010-11-10T20:48:33.000Z`` for every upload), so what reads an upload's start (the
  S3A committers' search for uploads whose create answer was lost) runs against moto as
  against S3.
* ``CopyObject`` honours ``x-amz-copy-source-if-match`` (the source's etag) and
  ``If-None-Match: *`` (no object at the destination) with S3's 412 ``PreconditionFailed``;
  moto 5.x ignores both, and the S3 store's rename relies on them.

And one cost of moto's own: it lists its package's folders from the disk (a ``stat`` of
each) twice a request, to find the service a request's host names; listed once here.
"""

from __future__ import annotations

import datetime
import sys
from typing import Any
from urllib.parse import unquote, urlparse


def _patch() -> None:
    from moto import backends
    from moto.s3 import exceptions, models, responses

    modules = tuple(backends.list_of_moto_modules())  # the installed package's: fixed
    backends.list_of_moto_modules = lambda: modules

    original_init = models.FakeMultipart.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.aiocommit_initiated = datetime.datetime.now(datetime.UTC)

    original_serialized = responses.S3Response.serialized

    def serialized(self: Any, result: Any) -> Any:
        if self.data.get("Action") == "ListMultipartUploads":
            uploads = self.backend.list_multipart_uploads(self.bucket_name)
            for entry in result.result.get("Uploads", []):
                started = getattr(uploads.get(entry["UploadId"]), "aiocommit_initiated", None)
                if started is not None:
                    entry["Initiated"] = started.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return original_serialized(self, result)

    original_copy = responses.S3Response.copy_object

    def copy_object(self: Any) -> Any:
        """S3's CopyObject preconditions, checked before moto copies."""
        wanted = self.headers.get("x-amz-copy-source-if-match")
        if wanted is not None:
            source = unquote(urlparse(str(self.headers.get("x-amz-copy-source"))).path)
            bucket, _, key = source.lstrip("/").partition("/")
            current = self.backend.get_object(bucket, key)
            if current is not None and current.etag.strip('"') != wanted.strip('"'):
                raise exceptions.PreconditionFailed("x-amz-copy-source-If-Match")
        if (
            self.headers.get("If-None-Match") == "*"
            and self.backend.get_object(self.bucket_name, self.parse_key_name()) is not None
        ):
            raise exceptions.PreconditionFailed("If-None-Match")
        return original_copy(self)

    models.FakeMultipart.__init__ = init  # type: ignore[method-assign]
    responses.S3Response.serialized = serialized  # type: ignore[method-assign,assignment]
    responses.S3Response.copy_object = copy_object  # type: ignore[method-assign]


def main() -> None:
    _patch()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
