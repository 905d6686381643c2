"""Sharing the caller's event loop: CPU work in short slices (``turns``), requests
started per loop turn (``loop_turns``), blocking calls batched into a bounded set of
threads (``blocking``), the garbage-collection setting of worker processes
(``gc_freeze``) and the heap's free pages handed back (``heap``). Imports nothing of
aiocommit but ``aiocommit.errors``."""
