"""The S3 store's requests on the moto server: what each rename sends, the copy's
preconditions as moto honours them (``aiocommit_testing.moto_main``), one service model
for every store of a thread, the client's fixed User-Agent and its timestamp parser."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.utils import parse_timestamp

from aiocommit.errors import AlreadyExists, PreconditionFailed
from aiocommit.stores.s3 import S3Store, parse_time, shared_session, user_agent
from tests.stores.s3_fixtures import s3_store_factory


class Sent:
    """The operations and headers of every request a store's client sends."""

    def __init__(self) -> None:
        self.operations: list[str] = []
        self.agents: list[str] = []

    def created(self, operation_name: str, **kwargs: Any) -> None:
        self.operations.append(operation_name)

    def sending(self, request: Any, **kwargs: Any) -> None:
        agent = request.headers.get("User-Agent", b"")
        self.agents.append(agent.decode() if isinstance(agent, bytes) else str(agent))

    async def watch(self, store: S3Store) -> Sent:
        events = (await store.client()).meta.events
        events.register("request-created.s3", self.created)
        events.register("before-send.s3", self.sending)
        return self


@pytest.fixture
async def counted(s3_endpoint: str) -> AsyncIterator[tuple[S3Store, str, Sent]]:
    async with s3_store_factory(s3_endpoint) as (store, root):
        yield store, root, await Sent().watch(store)


async def test_a_rename_is_list_copy_delete(counted: tuple[S3Store, str, Sent]) -> None:
    """The engine's rename (source etag, no overwrite): three requests, no HEAD."""
    store, root, sent = counted
    written = await store.write_bytes(f"{root}/a", b"x")
    sent.operations.clear()
    await store.rename(f"{root}/a", f"{root}/b", source_etag=written.etag)
    assert sent.operations == ["ListObjectsV2", "CopyObject", "DeleteObject"]
    assert await store.read_bytes(f"{root}/b") == b"x"
    assert await store._head(f"{root}/a", "test") is None


async def test_a_rename_onto_a_file_moves_nothing(counted: tuple[S3Store, str, Sent]) -> None:
    store, root, sent = counted
    written = await store.write_bytes(f"{root}/a", b"new")
    await store.write_bytes(f"{root}/b", b"old")
    sent.operations.clear()
    with pytest.raises(AlreadyExists):
        await store.rename(f"{root}/a", f"{root}/b", source_etag=written.etag)
    assert sent.operations == ["ListObjectsV2", "CopyObject", "HeadObject"]
    assert await store.read_bytes(f"{root}/b") == b"old"
    assert await store.read_bytes(f"{root}/a") == b"new"


async def test_without_conditional_copy_the_destination_is_probed(s3_endpoint: str) -> None:
    async with s3_store_factory(s3_endpoint, conditional_copy=False) as (store, root):
        sent = await Sent().watch(store)
        await store.write_bytes(f"{root}/a", b"x")
        await store.write_bytes(f"{root}/b", b"old")
        sent.operations.clear()
        with pytest.raises(AlreadyExists):
            await store.rename(f"{root}/a", f"{root}/b")
        assert sent.operations == ["HeadObject"]
        sent.operations.clear()
        await store.rename(f"{root}/a", f"{root}/c")
        assert sent.operations == ["HeadObject", "ListObjectsV2", "CopyObject", "DeleteObject"]


async def test_moto_refuses_a_copy_whose_preconditions_fail(
    counted: tuple[S3Store, str, Sent],
) -> None:
    """moto 5.x ignores both headers; the patched server answers 412 as S3 does."""
    store, root, _ = counted
    client = await store.client()
    await store.write_bytes(f"{root}/a", b"x")
    await store.write_bytes(f"{root}/b", b"old")
    source = f"{store.bucket}/{root[1:]}/a"
    extras: list[dict[str, Any]] = [{"CopySourceIfMatch": '"0000"'}, {"IfNoneMatch": "*"}]
    for extra in extras:
        with pytest.raises(ClientError) as caught:
            await client.copy_object(
                Bucket=store.bucket, Key=f"{root[1:]}/b", CopySource=source, **extra
            )
        assert caught.value.response["Error"]["Code"] == "PreconditionFailed"
    assert await store.read_bytes(f"{root}/b") == b"old"
    with pytest.raises(PreconditionFailed):
        await store.rename(f"{root}/a", f"{root}/c", source_etag="0000")
    assert await store.read_bytes(f"{root}/a") == b"x"


async def test_stores_share_one_service_model_and_a_fixed_user_agent(
    s3_endpoint: str,
) -> None:
    async with (
        s3_store_factory(s3_endpoint) as (first, root),
        s3_store_factory(s3_endpoint) as (second, _),
    ):
        one, two = await first.client(), await second.client()
        assert one is not two
        assert shared_session() is shared_session()
        described = [
            c.meta.service_model._service_description  # type: ignore[attr-defined]
            for c in (one, two)
        ]
        assert described[0] is described[1], "one parsed S3 model for both clients"
        sent = await Sent().watch(first)
        await first.stat(root)
        await first.write_bytes(f"{root}/f", b"x")
        assert len(sent.agents) >= 2
        assert all(agent.startswith(user_agent()) for agent in sent.agents), sent.agents
        assert user_agent().startswith("aiocommit/")


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-27T22:16:46.000Z",
        "2026-11-27T22:16:46Z",
        "2026-11-27T22:16:46.123+01:00",
        "Fri, 27 Nov 2026 22:16:46 GMT",
        "1764281806",
        "1764281806.5",
    ],
)
def test_parse_time_answers_as_botocore_does(text: str) -> None:
    assert parse_time(text) == parse_timestamp(text)
    assert parse_time(text).utcoffset() is not None


async def test_the_client_parses_s3_times_with_parse_time(
    counted: tuple[S3Store, str, Sent],
) -> None:
    """Every HEAD's ``Last-Modified`` and every listed key's ``LastModified`` go through
    ``parse_time`` (botocore's default parser costs a hundred times more per value)."""
    store, root, _ = counted
    client = await store.client()
    factory = client._endpoint._response_parser_factory  # type: ignore[attr-defined]
    assert factory.create_parser("rest-xml")._timestamp_parser is parse_time
    await store.write_bytes(f"{root}/a", b"x")
    head = await client.head_object(Bucket=store.bucket, Key=f"{root[1:]}/a")
    listed = await client.list_objects_v2(Bucket=store.bucket, Prefix=f"{root[1:]}/a")
    assert head["LastModified"] == listed["Contents"][0]["LastModified"]
    assert head["LastModified"].utcoffset() is not None
