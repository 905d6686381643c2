"""Developer alias for :mod:`aiocommit.stress`: ``python -m stress …`` and
``python -m stress.spark_bench`` run the packaged harness's modules."""

import aiocommit.stress as _harness

__path__ = list(_harness.__path__)
