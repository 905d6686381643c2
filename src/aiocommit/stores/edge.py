"""The adapter edge: where an SDK's or HTTP client's errors become store errors, once.

Every cloud adapter has one ``translate(error, ...) -> StoreError`` function that knows its
SDK; ``translating`` turns it into the context manager each store call runs in, so the
wrapping (pass store errors through, translate the rest, keep the cause) is written here
only. ``retry_after`` reads an HTTP ``Retry-After`` header (seconds or an HTTP date).
"""

from __future__ import annotations

import contextlib
import email.utils
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Concatenate, ParamSpec, TypeVar

from aiocommit.errors import StoreError

P = ParamSpec("P")
E = TypeVar("E", bound=Exception)


def translating(
    translate: Callable[Concatenate[E, P], StoreError],
    catch: type[E] | tuple[type[E], ...],
) -> Callable[P, AbstractContextManager[None]]:
    """A context manager factory: ``with edge(path, operation):`` runs the block and raises
    ``translate(error, path, operation)`` (``from error``) for an error of type ``catch``.
    A ``StoreError`` raised inside passes unchanged; other errors are not caught."""

    @contextlib.contextmanager
    def edge(*args: P.args, **kwargs: P.kwargs) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except catch as error:
            raise translate(error, *args, **kwargs) from error

    return edge


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (a number or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
