"""A CreateMultipartUpload whose answer was lost leaves an upload no answer named: the
retried create records that it was retried, and the job's abort and cleanup (after a
commit too) abort the uploads of exactly that key that no job names, never
a neighbour job's upload of the same key."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import pytest

from aiocommit import (
    CommitOptions,
    Transient,
    abort_job,
    commit_job,
    commit_task,
    setup_job,
    setup_task,
)
from aiocommit.committers.s3a import abort_uploads
from aiocommit.stores.base import Store, join
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.multipart import MultipartStore, as_multipart
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import output

T = TypeVar("T")

FAST = CommitOptions(retry_base_delay=0.001, retry_max_delay=0.01)


class LostCreateAnswers(StoreWrapper):
    """Every create of an upload is applied, but the first two answers are lost."""

    def __init__(self, inner: Store, losses: int = 2):
        super().__init__(inner)
        self.losses = losses

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        result = await call()
        if operation == "create_upload" and self.losses:
            self.losses -= 1
            raise Transient("the answer was lost", path=path, operation=operation)
        return result


async def uploads(store: Store, dest: str) -> dict[str, str]:
    """The outstanding uploads under ``dest``: ID → path."""
    multipart = as_multipart(store)
    return {
        u.upload_id: u.path async for page in multipart.list_uploads(join(dest, "")) for u in page
    }


async def neighbour_job(store: Store, dest: str, committer: str) -> str:
    """A live job with a committed task (``same.csv``, the key the other job writes too)
    and an attempt that has started its upload (``theirs.csv``: magic) or not committed."""
    options = CommitOptions(committer=committer)
    job_id = await setup_job(dest, store=store, options=options)
    done = await setup_task(dest, job_id, 0, store=store)
    await done.write_bytes("same.csv", b"theirs", store=store)
    await commit_task(done, store=store)
    live = await setup_task(dest, job_id, 1, store=store)
    await live.write_bytes("theirs.csv", b"theirs", store=store)
    return job_id


@pytest.mark.parametrize("committer", ["staging", "magic"])
@pytest.mark.parametrize("ending", ["abort", "commit"])
async def test_uploads_whose_create_answer_was_lost_are_ended(
    s3_root: tuple[MultipartStore, str], committer: str, ending: str
) -> None:
    store, root = s3_root
    dest = join(root, "out")
    neighbour = await neighbour_job(store, dest, committer)
    theirs = await uploads(store, dest)
    assert sorted(theirs.values()) == (
        [join(dest, "same.csv"), join(dest, "theirs.csv")]
        if committer == "magic"
        else [join(dest, "same.csv")]
    )
    options = CommitOptions(committer=committer, retry_base_delay=0.001, retry_max_delay=0.01)
    mine = await setup_job(dest, store=store, options=options)
    lossy = LostCreateAnswers(store)
    attempt = await setup_task(dest, mine, 0, store=lossy)
    await attempt.write_bytes("same.csv", b"mine", store=lossy)
    await commit_task(attempt, store=lossy, options=FAST)
    assert lossy.losses == 0
    started = await uploads(store, dest)
    own = {i: p for i, p in started.items() if i not in theirs}
    assert len(own) == 3 and set(own.values()) == {join(dest, "same.csv")}  # 2 unanswered
    if ending == "abort":
        await abort_job(dest, mine, store=store)
    else:
        await commit_job(dest, mine, store=store, options=CommitOptions(delete_target_files=True))
        assert (await output(store, dest))["same.csv"] == b"mine"
    assert await uploads(store, dest) == theirs, "a lost create's upload left, or theirs ended"
    live = await setup_task(dest, neighbour, 1, store=store)
    await live.write_bytes("theirs.csv", b"theirs", store=store)
    await commit_task(live, store=store)
    summary = await commit_job(
        dest, neighbour, store=store, options=CommitOptions(delete_target_files=True)
    )
    assert summary.success
    assert await output(store, dest) == {"same.csv": b"theirs", "theirs.csv": b"theirs"}
    assert await uploads(store, dest) == {}


async def test_an_unnamed_upload_of_the_key_from_before_the_create_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only uploads started while the create was sent are the lost answers' (an older
    one of the same key, of a writer that keeps no records, is not the job's)."""
    monkeypatch.setattr(abort_uploads, "CLOCK_MARGIN_MS", 0)
    store = MemoryStore("lost-creates-window")
    dest = "/root/out"
    stray = await store.create_upload(join(dest, "same.csv"))
    await anyio.sleep(0.05)
    job_id = await setup_job(dest, store=store, options=CommitOptions(committer="staging"))
    lossy = LostCreateAnswers(store)
    attempt = await setup_task(dest, job_id, 0, store=lossy)
    await attempt.write_bytes("same.csv", b"mine", store=lossy)
    await commit_task(attempt, store=lossy, options=FAST)
    assert len(await uploads(store, dest)) == 4  # the stray, two unanswered, the job's
    await abort_job(dest, job_id, store=store)
    assert await uploads(store, dest) == {stray: join(dest, "same.csv")}
