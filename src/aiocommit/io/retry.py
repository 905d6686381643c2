"""The retry policy for every store operation: decorrelated-jitter backoff that honours
Retry-After, bounded by attempts and by a time budget. Clock and random are injectable."""

from __future__ import annotations

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
        self, error: BaseException, attempt: int, previous_delay: float, started: float
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None to give up.

        Args:
            error: what attempt ``attempt`` (1-based) raised.
            previous_delay: the delay before that attempt (0 for the first).
            started: the clock reading at the first attempt.
        """
        if not self.should_retry(error) or attempt >= self.max_attempts:
            return None
        upper = max(self.base_delay, previous_delay * 3)
        delay = min(self.max_delay, self.rng.uniform(self.base_delay, upper))
        if isinstance(error, Throttled) and error.retry_after is not None:
            delay = max(delay, error.retry_after)
        if self.clock() - started + delay > self.budget_seconds:
            return None
        return delay
