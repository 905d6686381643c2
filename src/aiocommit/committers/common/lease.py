"""The destination's publish lease: one job at a time changes a destination.

Jobs writing into one destination load and check their tasks' records in parallel; the
steps that change the destination (resolve conflicts -> renames or upload completions ->
``_SUCCESS``) run while the job holds this lease, so concurrent commits land as if one
after another. A file at the destination root, hidden from readers that skip ``_`` names::

    DEST/_aiocommit.lease                 {"version": 1, "job_id": ..., "token": ...,
                                           "expires": <epoch seconds>, "state": ...,
                                           "recover": [job IDs]}
    DEST/_aiocommit.lease.claim-TOKEN     a waiter taking over the lease TOKEN (a moment)

* **acquire**: create the lease with the store's create-if-absent (``write_bytes`` without
  overwrite: ``O_EXCL`` locally, ``If-None-Match: *`` on S3 and ADLS,
  ``ifGenerationMatch=0`` on GCS, atomic in memory). A waiter polls with backoff. Where a
  write is a temporary file renamed into place (ADLS), that file is in the writer's job
  attempt directory: a writer killed before the rename leaves nothing at the root.
* **renew**: the holder rewrites ``expires`` every third of ``lease_seconds``, after
  reading that the lease still carries its token; a lease found taken raises
  ``LeaseError`` in the holder (its publish stops).
* **take over**: a lease whose ``expires`` passed (its holder died), or whose holder gave
  it up ``abandoned`` (a commit that failed after changing the destination), or that
  names the waiter's own job (its re-run), is taken by the waiter that creates the claim
  file of its token; it writes its own record naming the holder in ``recover`` and
  settles each such job's unfinished commit (``register_recovery``) before publishing:
  aborts it where an abort is exact, else finishes it (a replace that deleted old files
  on a store without atomic rename). A job whose commit cannot be settled gets the
  lease back (``abandoned``): no job publishes over its half-done commit.
* **release**: the holder deletes the lease; a holder that failed after changing the
  destination leaves it ``abandoned`` instead, so the next job settles that change first
  (or the job's own re-run finishes it).

A holder stalled for longer than ``lease_seconds`` (no renewal) may find its lease taken;
clocks of the jobs' hosts must agree to well within ``lease_seconds``.
"""

from __future__ import annotations

import contextvars
import random
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Literal

import anyio
import anyio.lowlevel
import msgspec

from aiocommit.committers.common.context import StageContext, run_to_end
from aiocommit.errors import (
    AlreadyExists,
    LeaseError,
    ManifestError,
    NotFound,
    StoreError,
    first_error,
)
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import LEASE
from aiocommit.stores.base import join, parent_of

#: the lease's name at the destination root (``_``: readers skip it, as Hadoop's do)
LEASE_NAME = LEASE
CLAIM_INFIX = ".claim-"
#: first and longest wait between two looks at a held lease
FIRST_POLL_SECONDS = 0.02
MAX_POLL_SECONDS = 0.1

LeaseState = Literal["publishing", "abandoned"]

#: settles (aborts, or finishes) the unfinished commit of the job ID it is given, in the
#: destination of the context (the destination's lease held by the caller)
Recovery = Callable[[StageContext, str], Awaitable[None]]

_recovery: list[Recovery] = []
#: per event loop: an event per destination, set when a job of this loop releases its
#: lease there, so this loop's waiters look again at once (others poll)
_RELEASED: anyio.lowlevel.RunVar[dict[str, anyio.Event]] = anyio.lowlevel.RunVar(
    "aiocommit_released_leases"
)
#: the destinations (store URL) whose lease the current task holds: nested job calls
#: (a take-over settling the dead holder's commit) do not wait for themselves
_HELD: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "aiocommit_held_leases", default=frozenset()
)


class LeaseRecord(msgspec.Struct, forbid_unknown_fields=False):
    job_id: str
    token: str
    expires: float
    state: LeaseState = "publishing"
    recover: list[str] = msgspec.field(default_factory=list)
    version: int = 1
    #: the token of the lease this one took over: its claim file's name
    claimed: str = ""


def register_recovery(recovery: Recovery) -> None:
    """Set how a take-over settles a dead holder's commit (the committer factory does, as
    only it knows every committer)."""
    _recovery[:] = [recovery]


def lease_path(dest: str) -> str:
    return join(dest, LEASE_NAME)


def is_lease_file(dest: str, path: str) -> bool:
    """``path`` is the lease or a claim of it: never output, never in a conflict scope."""
    return parent_of(path) == (dest.rstrip("/") or "/") and path.rsplit("/", 1)[-1].startswith(
        LEASE_NAME
    )


class HeldLease:
    """The lease while held. ``refused()``: the commit failed before changing anything
    (its lease is released, not left ``abandoned``) — unless the lease was this job's own
    from an earlier run (``resumed``), which may have changed the destination part-way:
    that lease stays ``abandoned``, so no other job publishes over the half-done commit
    before settling it."""

    def __init__(self, record: LeaseRecord, *, resumed: bool = False) -> None:
        self.record = record
        self.resumed = resumed
        self.changed = True

    def refused(self) -> None:
        if not self.resumed:
            self.changed = False


@asynccontextmanager
async def destination_lease(context: StageContext) -> AsyncIterator[HeldLease | None]:
    """Hold the destination's lease for the block.

    pre:  the caller's job is set up; its commit plan (if any) is saved.
    post: in the block, no other job holds the lease, and every job a take-over found
          unfinished (a dead or failed holder) was settled first (aborted, or finished
          where an abort would not be exact). On a normal exit the
          lease is deleted; on an error after ``HeldLease.refused`` too; on any other
          error (cancellation included) it is left ``abandoned`` for the next job or this
          job's re-run. Yields None when this task already holds it (nested calls).
    fail: ``LeaseError`` when the lease was taken over while held (a renewal missed for
          ``lease_seconds``) or is unreadable; ``UnfinishedCommit`` (from the recovery)
          when a dead holder's commit can be neither finished nor undone exactly, the
          lease handed back to that job; store errors of acquiring surface as such.
    """
    key = _key(context)
    if key in _HELD.get():
        yield None
        return
    record, resumed = await _acquire(context)
    held = HeldLease(record, resumed=resumed)
    reset = _HELD.set(_HELD.get() | {key})
    try:
        renewal = anyio.CancelScope()  # stops the renewal only, never the block

        async def renew() -> None:
            with renewal:
                await _renew(context, held)

        async with anyio.create_task_group() as group:
            group.start_soon(renew)
            try:
                if held.record.recover:
                    await _recover(context, held)
                yield held
            except BaseException:
                renewal.cancel()
                await run_to_end(lambda: _give_up(context, held))
                raise
            renewal.cancel()
    except BaseExceptionGroup as group_error:
        # the block's own error (or the renewal's), not the group the renewal task adds
        error = first_error(group_error)
        raise error from error.__cause__  # itself, its cause kept
    finally:
        _HELD.reset(reset)
    await run_to_end(lambda: _release(context, held.record))


def _key(context: StageContext) -> str:
    return context.qualify(context.layout.dest)


def _released_events() -> dict[str, anyio.Event]:
    try:
        return _RELEASED.get()
    except LookupError:
        events: dict[str, anyio.Event] = {}
        _RELEASED.set(events)
        return events


def _wake_waiters(context: StageContext) -> None:
    event = _released_events().pop(_key(context), None)
    if event is not None:
        event.set()


def _expiry(context: StageContext) -> float:
    return time.time() + context.options.conflicts.lease_seconds


async def _read(context: StageContext, path: str) -> LeaseRecord | None:
    try:
        data = await context.ops.read_bytes(path, statistic=S.OP_LOAD_LEASE)
    except NotFound:
        return None
    try:
        return msgspec.json.decode(data, type=LeaseRecord)
    except msgspec.DecodeError as error:
        raise LeaseError(
            f"the lease file is unreadable ({error}); if no job is committing into this "
            "destination, delete it",
            path=context.qualify(path),
        ) from None


async def _write(context: StageContext, path: str, record: LeaseRecord, *, create: bool) -> None:
    """Write the lease or a claim; on a store that writes by rename its temporary file is
    in the writer's own job attempt directory, so a writer killed before the rename
    leaves nothing at the destination's root (it goes with the job's directory)."""
    await context.ops.write_bytes(
        path,
        msgspec.json.encode(record),
        overwrite=not create,
        temporary_dir=context.layout.job_attempt_dir,
    )


async def _acquire(context: StageContext) -> tuple[LeaseRecord, bool]:
    """The lease, created or taken over; and whether it was this job's own from an
    earlier run (killed, failed or cancelled while holding it)."""
    job_id = context.layout.job_id
    path = lease_path(context.layout.dest)
    wait = FIRST_POLL_SECONDS
    longest = min(MAX_POLL_SECONDS, context.options.conflicts.lease_seconds / 4)
    holder_seen: str | None = None
    while True:
        mine = LeaseRecord(job_id=job_id, token=secrets.token_hex(8), expires=_expiry(context))
        try:
            await _write(context, path, mine, create=True)
            return mine, False
        except AlreadyExists:
            pass
        current = await _read(context, path)
        if current is None:
            continue  # released meanwhile
        if current.token == mine.token:
            return mine, False  # our create succeeded; its answer was lost and retried
        if (
            current.job_id == job_id
            or current.state == "abandoned"
            or current.expires < time.time()
        ) and await _take_over(context, current, mine):
            return mine, current.job_id == job_id
        if current.job_id != holder_seen:
            holder_seen = current.job_id
            context.log.info("waiting for job %s's lease on the destination", current.job_id)
        with anyio.move_on_after(wait * (0.5 + random.random())):
            await _released_events().setdefault(_key(context), anyio.Event()).wait()
        wait = min(wait * 1.6, longest)


async def _take_over(context: StageContext, current: LeaseRecord, mine: LeaseRecord) -> bool:
    """Claim the lease ``current`` (one claimant per token), then write ``mine`` over it,
    inheriting the jobs to recover. False when another waiter claimed it first."""
    path = lease_path(context.layout.dest)
    claim = path + CLAIM_INFIX + current.token
    try:
        await _write(context, claim, mine, create=True)
    except AlreadyExists:
        stale = await _read(context, claim)
        if stale is None or stale.token != mine.token:  # another claimant's
            if stale is not None and (stale.expires < time.time() or stale.job_id == mine.job_id):
                # its claimant died (or was this job's earlier run): the next look may claim
                await context.ops.delete(claim)
            return False
        # our own create went through, its answer was lost and the retry found it
    try:
        again = await _read(context, path)
        if again is None or again.token != current.token:
            return False
        inherited = [*current.recover]
        if current.job_id != mine.job_id:
            inherited.append(current.job_id)
        mine.recover = sorted(set(inherited) - {mine.job_id})
        mine.claimed = current.token
        await _write(context, path, mine, create=False)
        if current.claimed:  # its taker's claim, left if that taker was killed holding it
            await context.ops.delete(path + CLAIM_INFIX + current.claimed)
        state = "abandoned" if current.state == "abandoned" else "expired"
        if current.job_id == mine.job_id:  # a re-run or abort of the job that left it
            context.log.info("resuming this job's own %s lease on the destination", state)
        else:
            context.log.warning(
                "took over job %s's %s lease on the destination", current.job_id, state
            )
        return True
    finally:
        await context.ops.delete(claim)


async def _recover(context: StageContext, held: HeldLease) -> None:
    """Settle every unfinished commit the lease names, then record that none is left.
    A job whose commit cannot be settled gets the lease back: the record names it
    (``abandoned`` once the block exits), so the next take-over, or its own re-run or
    abort, tries again; this job changed nothing and is not to be settled itself.

    Re-entrant: the recovery's own job calls find this task holding the lease and do
    not wait for it (``destination_lease`` yields None to them)."""
    if not _recovery:
        raise LeaseError(
            "cannot recover the jobs a taken-over lease names: no recovery registered",
            path=context.qualify(lease_path(context.layout.dest)),
        )
    for job_id in list(held.record.recover):
        context.log.warning("settling job %s's unfinished commit before publishing", job_id)
        try:
            await _recovery[0](context, job_id)
        except BaseException:
            held.record.recover.remove(job_id)
            held.record.job_id = job_id  # handed back; written when the block exits
            raise
        held.record.recover.remove(job_id)
        await _checked_write(context, held.record)


async def _checked_write(context: StageContext, record: LeaseRecord) -> None:
    """Rewrite the lease, after checking it still carries ``record``'s token."""
    path = lease_path(context.layout.dest)
    current = await _read(context, path)
    if current is None or current.token != record.token:
        holder = "nobody" if current is None else f"job {current.job_id}"
        raise LeaseError(
            f"this job's lease on the destination was taken over (now held by {holder}) "
            "while it published; commit it again",
            path=context.qualify(path),
        )
    await _write(context, path, record, create=False)


async def _renew(context: StageContext, held: HeldLease) -> None:
    interval = context.options.conflicts.lease_seconds / 3
    while True:
        await anyio.sleep(interval)
        record = held.record
        renewed = msgspec.structs.replace(record, expires=_expiry(context))
        try:
            # to its end: a write cut short may still land after the release's delete
            await run_to_end(lambda: _checked_write(context, renewed))  # noqa: B023
        except LeaseError:
            raise
        except StoreError as error:
            if time.time() > record.expires:
                raise LeaseError(
                    f"cannot renew this job's lease on the destination: {error}",
                    path=context.qualify(lease_path(context.layout.dest)),
                ) from error
            context.log.warning("lease renewal failed, retrying: %s", error)
            continue
        record.expires = renewed.expires


async def _give_up(context: StageContext, held: HeldLease) -> None:
    """After a failure: release the lease when nothing changed, else leave it
    ``abandoned`` (the next holder settles this job's commit; its re-run finishes it)."""
    if not held.changed:
        await _release(context, held.record)
        return
    record = held.record
    record.state = "abandoned"
    try:
        await _checked_write(context, record)
    except (LeaseError, StoreError) as error:
        context.log.warning("could not mark this job's lease abandoned: %s", error)
    finally:
        _wake_waiters(context)


async def release_stale_lease(context: StageContext) -> None:
    """Delete the lease if it names this job, which committed or is aborted: what a
    committed job's re-run, and every abort, does after a release that failed or was
    killed (nobody else holds it then).

    pre:  the job's commit reached its commit point, or the job is being aborted.
    post: no lease of this job, nor a claim of it on the lease it names, is left at the
          destination.
    """
    path = lease_path(context.layout.dest)
    current = await _read(context, path)
    if current is None:
        return
    job_id = context.layout.job_id
    # a claim this job's killed run left: on the lease it was taking over, or (once it
    # held the lease) on the one its lease took over
    for token in {current.token, current.claimed if current.job_id == job_id else ""} - {""}:
        claim = await _read(context, path + CLAIM_INFIX + token)
        if claim is not None and claim.job_id == job_id:
            await context.ops.delete(path + CLAIM_INFIX + token)
    if current.job_id == job_id:
        await context.ops.delete(path)


async def _release(context: StageContext, record: LeaseRecord) -> None:
    path = lease_path(context.layout.dest)
    try:
        current = await _read(context, path)
        if current is not None and current.token == record.token:
            await context.ops.delete(path)
    except (LeaseError, StoreError, ManifestError) as error:
        context.log.warning("could not release this job's lease: %s", error)
    finally:
        _wake_waiters(context)
