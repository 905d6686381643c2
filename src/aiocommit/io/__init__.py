"""The I/O door: every store call of a stage goes through :class:`StoreOperations`.

It owns the concurrency limits, the rate limiter, retry with backoff and the IOStatistics.
Below ``stages/``; imports only ``stores/``, ``protocol/``, ``errors`` and ``options``.
"""
