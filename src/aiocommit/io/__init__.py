"""The I/O door: every store call of a stage goes through :class:`StoreOperations`.

A thin door composing one layer per concern: ``admission`` (the in-flight limit, the
configured rates, the adaptive pace), ``metering`` (IOStatistics), ``retrying`` (backoff
per call, retries per request), and ``atomic`` (whole-file writes over the door).
Below ``stages/``; imports only ``stores/``, ``protocol/``, ``errors`` and ``options``.
"""
