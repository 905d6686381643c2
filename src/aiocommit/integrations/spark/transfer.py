"""The JVM -> Python Arrow transfer of an aiocommit write: session confs that make it cheaper.

Spark (4.0+) checks ``spark.sql.execution.arrow.maxBytesPerBatch`` (64 MB by default)
after every row it appends to an Arrow batch for a Python worker, and that check walks
every column vector of the batch (``ArrowWriter.sizeInBytes``): a JFR profile of a flat
10 M-row write spent 27 % of the JVM's samples there. The check is skipped only when the
conf is ``Int.MaxValue``. So while ``df.write.format("aiocommit")`` runs, an unset conf is
set to ``Int.MaxValue`` (batches are then cut by ``maxRecordsPerBatch`` rows alone, as
before Spark 4.0) and unset again when the last concurrent aiocommit write of the session
ends. A value the user set is left alone: set it to bound batches of very wide rows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ARROW_MAX_BYTES_CONF = "spark.sql.execution.arrow.maxBytesPerBatch"
#: the one value that makes Spark skip the per-row batch size check
NO_BYTE_CAP = str(2**31 - 1)

_lock = threading.Lock()
#: per session (by id): aiocommit writes in flight that rely on the lifted cap
_in_flight: dict[int, int] = {}


@contextmanager
def lifted_arrow_byte_cap(spark: Any) -> Iterator[bool]:
    """Within the block, the session's Arrow batches are cut by row count only, unless
    the user set ``maxBytesPerBatch``. Yields whether the cap is lifted. Safe for
    concurrent writes from several threads of one session (counted per session)."""
    key = id(spark)
    with _lock:
        count = _in_flight.get(key, 0)
        if count == 0 and ARROW_MAX_BYTES_CONF in spark.conf.getAll:
            lifted = False  # the user's own value
        else:
            if count == 0:
                spark.conf.set(ARROW_MAX_BYTES_CONF, NO_BYTE_CAP)
            _in_flight[key] = count + 1
            lifted = True
    try:
        yield lifted
    finally:
        if lifted:
            with _lock:
                left = _in_flight.pop(key) - 1
                if left:
                    _in_flight[key] = left
                else:
                    spark.conf.unset(ARROW_MAX_BYTES_CONF)
