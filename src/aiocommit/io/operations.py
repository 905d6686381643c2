"""Store operations as the stages see them: a thin door composing the layers every call
goes through (admission, statistics, retries) with the store's calls."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from time import perf_counter
from typing import TypeVar

import anyio

from aiocommit.errors import NotFound, StoreError
from aiocommit.io import atomic
from aiocommit.io.admission import Admission
from aiocommit.io.limits import AdaptiveLimiter, AdaptiveRate, Limits
from aiocommit.io.metering import CallMeter
from aiocommit.io.retry import RetryPolicy
from aiocommit.io.retrying import RequestRetry, Retrying, Tries
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import (
    REQUEST_RETRY,
    FileStatus,
    RenameBatch,
    Store,
    StoreCapabilities,
    rename_batcher,
    tree_lister,
)

T = TypeVar("T")
P = TypeVar("P")


class StoreOperations:
    """The one door from stages to a store.

    Each call is admitted (``Admission``: its turn at the rates, a slot of the job's
    in-flight limit), calls the store, is timed under a Hadoop statistic name
    (``CallMeter``), and on a retryable error backs off and is tried again
    (``Retrying``); the store's requests of a call made of several are retried each on
    its own (``RequestRetry``). Throttles feed the adaptive pace and concurrency.
    """

    def __init__(
        self,
        store: Store,
        options: CommitOptions,
        stats: IOStatistics,
        *,
        retry: RetryPolicy | None = None,
        limiter: AdaptiveLimiter | None = None,
        limits: Limits | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        host_loop: bool = True,
    ):
        self.store = store
        self.options = options
        self.stats = stats
        self.retry = retry or RetryPolicy(
            max_attempts=options.max_attempts,
            budget_seconds=options.retry_budget_seconds,
            base_delay=options.retry_base_delay,
            max_delay=options.retry_max_delay,
        )
        self.meter = CallMeter(stats)
        self.admission = Admission(
            store,
            options,
            self.meter,
            limiter=limiter,
            limits=limits,
            sleep=sleep,
            host_loop=host_loop,
        )
        #: the in-flight limit and the configured rates: the client's, shared by its jobs
        #: (``limits``), else this door's own
        self.limits = self.admission.limits
        self.retrying = Retrying(self.retry, self.meter, sleep)
        self.limiter = self.admission.limiter
        #: the job's adaptive pace (``Admission.pace``)
        self.pace = self.admission.pace
        #: tasks worth making calls through this door at once (what stages pass to
        #: ``parallel``: ``Admission.workers``)
        self.workers = self.admission.workers
        #: asked once: stages consult it per file
        self.capabilities: StoreCapabilities = store.capabilities
        #: a rename that is not atomic is several requests (GCS: rewrite, then delete):
        #: each takes its turn at the rate and is retried on its own when throttled
        self._multi_request_rename = not self.capabilities.atomic_rename
        self._rename_batch = None if self._multi_request_rename else rename_batcher(store)

    def pace_for(self, path: str) -> AdaptiveRate:
        """The adaptive rate for a call on ``path`` (``Admission.pace_for``)."""
        return self.admission.pace_for(path)

    def _requests(self, *, transient: bool) -> RequestRetry:
        return RequestRetry(self.admission, self.retrying, transient=transient)

    async def _call(
        self,
        statistic: str,
        function: Callable[[], Awaitable[T]],
        path: str,
        *,
        probe: bool = False,
        requests: RequestRetry | None = None,
        tries: Tries | None = None,
    ) -> T:
        """Run ``function`` (a store call on ``path``) through the layers until it
        succeeds or ``Retrying`` gives up (continuing ``tries`` when given); the error
        that ends the retries carries ``attempts``. ``probe``: ``NotFound`` is an
        answer, not a failure. ``requests``: the call's requests run in
        ``REQUEST_RETRY``, each retried on its own (``RequestRetry``)."""
        admission = self.admission
        meter = self.meter
        pace = admission.pace_for(path)
        # the retry budget's start (``Tries``, made at the first failure)
        started = self.retry.clock() if tries is None else tries.started
        if requests is not None:
            requests.pace = pace
        while True:
            epoch = admission.try_enter(pace)
            if epoch is None:
                epoch, waited = await admission.enter(pace, statistic)
                started += waited  # a turn waited for is not time spent retrying
            begin = perf_counter()
            if requests is not None:
                requests.epoch, requests.first = epoch, True
                token = REQUEST_RETRY.set(requests)
            try:
                result = await function()
            except StoreError as error:
                admission.release(pace)
                answered = probe and isinstance(error, NotFound)
                meter.finished(statistic, begin, failed=not answered)
                if answered:
                    admission.answered(pace, begin)
                else:
                    admission.heard(error, epoch, begin, pace)
                if tries is None:
                    tries = Tries(started)
                tries.attempt += 1
                tries.started = started
                await self.retrying.backoff(
                    error, tries, in_line=admission.in_line(pace), took=perf_counter() - begin
                )
                continue
            except BaseException:
                admission.release(pace)
                raise
            finally:
                if requests is not None:
                    REQUEST_RETRY.reset(token)
            meter.finished(statistic, begin)
            admission.succeeded(pace, requests is None or requests.first, begin)
            return result

    async def _try(
        self, statistic: str, function: Callable[[], Awaitable[T]], requests: RequestRetry
    ) -> T:
        """One attempt of ``function`` through admission and statistics, its requests
        in ``requests``; a failure is heard and raised (the caller decides the retry)."""
        admission = self.admission
        pace = requests.pace
        epoch = admission.try_enter(pace)
        if epoch is None:
            epoch, _ = await admission.enter(pace, statistic)
        begin = perf_counter()
        requests.epoch, requests.first = epoch, True
        token = REQUEST_RETRY.set(requests)
        try:
            result = await function()
        except StoreError as error:
            admission.release(pace)
            self.meter.finished(statistic, begin, failed=True)
            admission.heard(error, epoch, begin, pace)
            raise
        except BaseException:
            admission.release(pace)
            raise
        finally:
            REQUEST_RETRY.reset(token)
        self.meter.finished(statistic, begin)
        admission.succeeded(pace, requests.first, begin)
        return result

    def rename_batcher(self) -> RenameBatch | None:
        """The store's batched renames when ``rename_batch`` may use them now: the store
        has them (``stores.base.rename_batcher``), each rename is one request, and no rate
        paces the calls (else each call takes its own turn: ``rename``)."""
        if self._rename_batch is None or not self.admission.admits_batches:
            return None
        return self._rename_batch

    async def rename_batch(
        self, batch: RenameBatch, renames: list[tuple[str, str, str | None]]
    ) -> list[StoreError | None]:
        """Renames (as ``rename``'s source, destination, source etag; never replacing a
        file) made as one ``batch`` call (from ``rename_batcher``): the first ones, as
        many as there are free slots of the in-flight limit (at least one, waited for),
        one slot each; the outcome of each made, in order, as ``rename`` would end: None,
        or the error that ended its retries. Each is counted as a rename call; one that
        fails is retried on its own, as ``rename`` retries."""
        admission = self.admission
        started = self.retry.clock()
        epoch, taken = await admission.enter_many(len(renames))
        if taken < len(renames):
            renames = renames[:taken]
        begin = perf_counter()
        try:
            outcomes = await batch(renames)
        finally:
            admission.release(admission.pace, taken)
        millis = (perf_counter() - begin) * 1000
        renamed = outcomes.count(None)
        self.meter.succeeded_many(S.OP_RENAME, millis, renamed)
        admission.succeeded_many(renamed)
        if renamed == taken:
            return outcomes
        pace = admission.pace
        for index, error in enumerate(outcomes):
            if error is None:
                continue
            source, dest, source_etag = renames[index]
            tries = Tries(started, attempt=1)
            try:
                self.meter.failed(S.OP_RENAME, millis)
                admission.heard(error, epoch, begin, pace)
                await self.retrying.backoff(
                    error, tries, in_line=admission.in_line(pace), took=millis / 1000
                )
                await self._call(
                    S.OP_RENAME,
                    partial(self.store.rename, source, dest, source_etag=source_etag),
                    dest,
                    tries=tries,
                )
            except StoreError as final:
                outcomes[index] = final
            else:
                outcomes[index] = None
        return outcomes

    def call(
        self,
        statistic: str,
        function: Callable[[], Awaitable[T]],
        *,
        probe: bool = False,
        path: str = "",
    ) -> Awaitable[T]:
        """Any other store call through this door, timed under ``statistic``: limits,
        statistics and retries as for the calls above (for capabilities beyond ``Store``,
        such as multipart uploads). ``probe``: ``NotFound`` is an answer, not a failure;
        ``path``: what the call is about (where the store limits each prefix's rate)."""
        return self._call(statistic, function, path, probe=probe)

    async def pages(
        self, statistic: str, listing: Callable[[], AsyncIterator[list[P]]]
    ) -> AsyncIterator[list[P]]:
        """The pages of a listing (``listing()`` starts it), each page timed under
        ``statistic``. A page's request that is throttled or fails transiently is retried
        on its own where the store fetches each page in ``REQUEST_RETRY`` (at its
        continuation: a long listing is not fetched again from the start). Any other
        retryable failure restarts the listing after a backoff and skips what was already
        yielded (listings are consistent on every supported store); the retries' count and
        budget start again at each page that brings something new."""
        yielded = 0
        retrying = self.retrying
        tries = retrying.start()
        requests = self._requests(transient=True)
        while True:
            tries.attempt += 1
            iterator = listing().__aiter__()
            skip = yielded
            try:
                while True:
                    try:
                        page = await self._try(statistic, iterator.__anext__, requests)
                    except StopAsyncIteration:
                        return
                    if skip:
                        dropped = min(skip, len(page))
                        page = page[dropped:]
                        skip -= dropped
                    if page:
                        yielded += len(page)
                        tries = retrying.start(attempt=1)  # progress: count and budget anew
                        yield page
            except StoreError as error:
                await retrying.backoff(error, tries)
            finally:
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()

    def list_dir(self, path: str) -> AsyncIterator[list[FileStatus]]:
        """Pages of a directory's listing, restarted on a retryable failure (``pages``)."""
        store = self.store
        return self.pages(S.OP_LIST_STATUS, lambda: store.list_dir(path))

    def list_tree(self, path: str) -> AsyncIterator[list[FileStatus]] | None:
        """Pages of everything below a directory, restarted on a retryable failure, where
        the store lists a tree in one call (``tree_lister``); None where it does not."""
        lister = tree_lister(self.store)
        if lister is None:
            return None
        return self.pages(S.OP_LIST_STATUS, lambda: lister(path))

    def stat(self, path: str) -> Awaitable[FileStatus]:
        """A path's status; ``NotFound`` (not counted as a failure) when nothing is there."""
        store = self.store
        return self._call(S.OP_GET_FILE_STATUS, lambda: store.stat(path), path, probe=True)

    async def stat_or_none(self, path: str) -> FileStatus | None:
        try:
            return await self.stat(path)
        except NotFound:
            return None

    async def mkdirs(self, path: str) -> None:
        """Make a directory and its parents. A store whose ``mkdirs`` is several requests
        (a prefix store's walk) has each paced and retried on its own (``REQUEST_RETRY``)."""
        await self._call(
            S.OP_MKDIRS,
            lambda: self.store.mkdirs(path),
            path,
            requests=self._requests(transient=True),
        )

    async def delete(self, path: str, *, recursive: bool = False) -> bool:
        """Delete a file (or a directory, ``recursive``, at the delete rate too). A store
        whose directory delete is several requests (a listing and a delete per object)
        has each paced and retried on its own (``REQUEST_RETRY``)."""
        return await self._call(
            S.OP_DELETE_DIR if recursive else S.OP_DELETE,
            lambda: self.store.delete(path, recursive=recursive),
            path,
            requests=self._requests(transient=True),
        )

    def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> Awaitable[None]:
        """Rename; an error after more than one attempt (``error.attempts``) may follow an
        earlier attempt that was applied although it reported failure. (A plain function
        returning the call's awaitable: one frame less per rename; a partial, not a
        closure: fewer objects per rename for the garbage collector.)"""
        return self._call(
            S.OP_RENAME,
            partial(self.store.rename, source, dest, overwrite=overwrite, source_etag=source_etag),
            dest,
            requests=self._requests(transient=False) if self._multi_request_rename else None,
        )

    async def publish_bytes(self, temporary: str, final: str, data: bytes) -> None:
        """Write ``data`` to ``temporary`` and rename it over ``final``, so readers see the
        old file or the new one, whole (``atomic.publish``). A rename retried after a lost
        response that finds its source gone is done when ``final`` holds what was
        written."""
        await atomic.publish(self, temporary, final, data)

    async def read_bytes(self, path: str, *, statistic: str) -> bytes:
        """A small file's bytes, timed under ``statistic`` (what is read:
        ``OP_LOAD_MANIFEST``, ``OP_LOAD_SUCCESS``, ...); ``NotFound``, not counted as a
        failure, when it is not there."""
        return await self._call(statistic, lambda: self.store.read_bytes(path), path, probe=True)

    async def write_bytes(
        self, path: str, data: bytes, *, overwrite: bool = True, temporary_dir: str | None = None
    ) -> FileStatus:
        """Write a small file whole or not at all, on every store (``atomic.write_whole``):
        a reader finds no file (or the one it replaces) or all of ``data``, never a part;
        every state file (the commit plan and its parts, manifests, pending sets,
        ``.pending`` records, ``_SUCCESS``) is written through here. ``temporary_dir``:
        where a store that writes by rename keeps the temporary file (default: beside
        ``path``)."""
        return await atomic.write_whole(
            self, path, data, overwrite=overwrite, temporary_dir=temporary_dir
        )

    def write_once(self, path: str, data: bytes, *, overwrite: bool) -> Awaitable[FileStatus]:
        """One store write, retried (on a store where one write is several requests, not
        whole on failure: ``write_bytes`` is)."""
        return self._call(
            S.OP_WRITE,
            lambda: self.store.write_bytes(path, data, overwrite=overwrite),
            path,
            requests=self._write_requests(),
        )

    async def upload_file(
        self, local_path: str, path: str, *, overwrite: bool = True
    ) -> FileStatus:
        """Upload a local file (re-read whole on each attempt)."""
        return await self._call(
            S.OP_UPLOAD,
            lambda: self.store.upload_file(local_path, path, overwrite=overwrite),
            path,
            requests=self._write_requests(),
        )

    def _write_requests(self) -> RequestRetry | None:
        """Where one write is several requests (ADLS: create, append, flush), each is
        paced and retried on its own when throttled (``REQUEST_RETRY``): a throttled one
        was not applied, and a write sent again whole meets the store's throttles once
        per request again."""
        return None if self.capabilities.atomic_write else self._requests(transient=False)
