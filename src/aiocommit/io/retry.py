"""The retry policy for every store operation: decorrelated-jitter backoff that honours
Retry-After, bounded by attempts and by a time budget. Clock and random are injectable."""

from __future__ import annotations

import enum
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiocommit.errors import StoreError, Throttled

#: the jitter source of every policy made without one: seeding a new ``random.Random``
#: reads the OS's entropy and costs more than a local store call, and a policy is made
#: per job operation and task attempt; a forked child reseeds it (its draws differ from
#: its parent's and siblings')
_process_rng = random.Random()
os.register_at_fork(after_in_child=_process_rng.seed)


class InLine(enum.Enum):
    """How a throttled call waits before its next attempt (``Admission.in_line``)."""

    #: its backoff grows (decorrelated jitter): nothing says the throttle is not a limit
    NO = "no"
    #: the base delay, then its turn at the adaptive rate, which spaces the calls
    PACED = "paced"
    #: as long as the throttle's answer took (at least ``QUICK_WAIT``, at most the base
    #: delay) ``IN_LINE_TRIES`` times, then the base delay: the store's throttles were
    #: judged not to follow the job's pace, so a longer wait makes the next one no rarer
    RANDOM = "random"
    #: the base delay ``IN_LINE_TRIES`` times, then a growing backoff: the job has at
    #: most one other call in flight (a serial stage), so waiting longer takes next to
    #: nothing off the store, but nothing says the throttles are not a limit
    ALONE = "alone"


#: throttles of one call retried after ``RANDOM``'s short wait or ``ALONE``'s base delay:
#: a share at random seldom throttles one request so often, and a store that throttles
#: everything (down, not sampling a share) is not sent twenty attempts in a moment
IN_LINE_TRIES = 3
#: the least wait of a ``RANDOM`` retry (a throttle answered from the client's own host)
QUICK_WAIT = 0.001


def process_rng() -> random.Random:
    """The process's shared jitter source (the default ``RetryPolicy.rng``)."""
    return _process_rng


@dataclass
class RetryPolicy:
    """Decides whether and when to retry a failed store call.

    Only errors whose class says ``retryable`` are retried (``Throttled``, ``Transient``);
    a not-found, conflict, precondition or permission error surfaces at once. Delays follow
    decorrelated jitter, ``uniform(base, previous * 3)`` capped at ``max_delay``, and are never
    shorter than the store's Retry-After. A retry that would end past ``budget_seconds``
    from the first attempt is not made.
    """

    max_attempts: int = 20
    budget_seconds: float = 300.0
    base_delay: float = 0.05
    max_delay: float = 20.0
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=process_rng)

    def should_retry(self, error: BaseException) -> bool:
        return isinstance(error, StoreError) and error.retryable

    def growth_bound(self, previous_delay: float) -> float:
        """The most the decorrelated jitter draws after ``previous_delay``: what a wait
        raised by a Retry-After counts as for the next draw's range."""
        return min(self.max_delay, max(self.base_delay, previous_delay * 3))

    def next_delay(
        self,
        error: BaseException,
        attempt: int,
        previous_delay: float,
        started: float,
        *,
        wait: float | None = None,
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None to give up.

        Args:
            error: what attempt ``attempt`` (1-based) raised.
            previous_delay: the delay before that attempt (0 for the first).
            started: the clock reading at the first attempt.
            wait: the delay to use instead of the jitter's draw (a retry in line).
        """
        if not self.should_retry(error) or attempt >= self.max_attempts:
            return None
        if wait is None:
            upper = max(self.base_delay, previous_delay * 3)
            delay = min(self.max_delay, self.rng.uniform(self.base_delay, upper))
        else:
            delay = wait
        if isinstance(error, Throttled) and error.retry_after is not None:
            delay = max(delay, error.retry_after)
        if self.clock() - started + delay > self.budget_seconds:
            return None
        return delay
