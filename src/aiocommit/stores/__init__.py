"""Store adapters and the store contract."""

from aiocommit.stores.base import FileStatus, Store, StoreCapabilities
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from aiocommit.stores.registry import open_store, register_scheme

__all__ = [
    "FileStatus",
    "LocalStore",
    "MemoryStore",
    "Store",
    "StoreCapabilities",
    "open_store",
    "register_scheme",
]
