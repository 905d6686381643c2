"""The ``fs.s3a.*`` settings the S3 store's client reads (Hadoop's names), importable
without the ``s3`` extra."""

from __future__ import annotations

#: the settings ``S3Store(options=...)`` reads; see ``aiocommit.stores.s3``
CLIENT_KEYS = frozenset(
    {
        "fs.s3a.endpoint",
        "fs.s3a.endpoint.region",
        "fs.s3a.path.style.access",
        "fs.s3a.connection.maximum",
        "fs.s3a.paging.maximum",
        "fs.s3a.connection.request.timeout",
        "fs.s3a.access.key",
        "fs.s3a.secret.key",
        "fs.s3a.session.token",
    }
)
