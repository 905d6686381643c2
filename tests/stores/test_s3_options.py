"""``s3://`` and ``s3a://`` URLs, and the ``fs.s3a.*`` option names the store maps."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocommit.errors import InvalidInput
from aiocommit.stores.local import LocalStore
from aiocommit.stores.registry import open_store
from aiocommit.stores.s3 import S3Store


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_urls(scheme: str) -> None:
    store, path = open_store(f"{scheme}://bucket/table/k=1")
    assert isinstance(store, S3Store)
    assert (store.bucket, path) == ("bucket", "/table/k=1")
    assert store.qualify("/table/f") == f"{scheme}://bucket/table/f"
    assert store.unqualify("s3a://bucket/table/f") == "/table/f"
    assert store.unqualify("s3://bucket/table/f") == "/table/f"
    assert open_store(f"{scheme}://bucket")[1] == "/"
    with pytest.raises(ValueError, match="not in bucket"):
        store.unqualify("s3a://other/table/f")


def test_fs_s3a_options_map_to_client_settings() -> None:
    store = S3Store(
        "bucket",
        options={
            "fs.s3a.endpoint": "minio.local:9000",
            "fs.s3a.endpoint.region": "eu-west-1",
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.maximum": "32",
            "fs.s3a.paging.maximum": "5000",
            "fs.s3a.access.key": "AK",
            "fs.s3a.secret.key": "SK",
        },
    )
    assert store.endpoint_url == "https://minio.local:9000"
    assert store.region == "eu-west-1"
    assert store.path_style and store.connections == 32
    assert store.page_size == 1000  # S3's ceiling
    assert store._credentials == {"aws_access_key_id": "AK", "aws_secret_access_key": "SK"}
    assert not store.capabilities.atomic_rename and not store.capabilities.directories
    with pytest.raises(ValueError, match="not a bucket"):
        S3Store("a/b")


def test_open_store_hands_each_store_the_client_settings_it_reads(tmp_path: Path) -> None:
    """``open_store(url, settings)``: S3 gets the ``fs.s3a.*`` client settings
    (``spark.hadoop.`` dropped); another store ignores them, or with ``strict`` refuses
    them in one line naming the key."""
    settings = {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.access.key": "AK",
        "fs.s3a.secret.key": "SK",
    }
    store, path = open_store("s3a://bucket/out", settings)
    assert isinstance(store, S3Store) and path == "/out"
    assert (store.endpoint_url, store.path_style) == ("http://127.0.0.1:9", True)
    assert store._credentials["aws_access_key_id"] == "AK"
    local, local_path = open_store(str(tmp_path), settings)
    assert isinstance(local, LocalStore) and local_path == str(tmp_path)
    with pytest.raises(InvalidInput, match=r"fs\.s3a\.endpoint: a client setting of s3:// "):
        open_store(str(tmp_path), settings, strict=True)
    with pytest.raises(InvalidInput, match="str keys and values"):
        open_store("s3a://bucket/out", {"fs.s3a.endpoint": 1})  # type: ignore[dict-item]


def test_only_the_innermost_store_decides_multipart_support() -> None:
    from aiocommit.stores.faulty import FaultyStore
    from aiocommit.stores.local import LocalStore
    from aiocommit.stores.multipart import as_multipart, supports_multipart

    assert supports_multipart(FaultyStore(S3Store("bucket")))
    wrapped_local = FaultyStore(LocalStore())
    assert not supports_multipart(wrapped_local)  # the wrapper has the methods, not the store
    with pytest.raises(TypeError, match="no multipart uploads"):
        as_multipart(wrapped_local)
