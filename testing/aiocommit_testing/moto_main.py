"""``python -m moto.server`` with one S3 gap closed: ``ListMultipartUploads`` reports when
each upload started (moto 5.x reports ``2010-11-10T20:48:33.000Z`` for every upload), so
what reads an upload's start (the S3A committers' search for uploads whose create answer
was lost) runs against moto as against S3."""

from __future__ import annotations

import datetime
import sys
from typing import Any


def _patch() -> None:
    from moto.s3 import models, responses

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

    models.FakeMultipart.__init__ = init  # type: ignore[method-assign]
    responses.S3Response.serialized = serialized  # type: ignore[method-assign,assignment]


def main() -> None:
    _patch()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
