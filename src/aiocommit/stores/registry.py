"""``open_store(url, settings)``: pick the adapter from the URL scheme; hand it the client
settings of the options tree (``StoreSettings``) where it takes them."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

from aiocommit.errors import InvalidInput, MissingExtra
from aiocommit.stores.base import Store


class StoreSettings(Protocol):
    """A store client's settings (``aiocommit.options.StoreSettings``): false when none
    is set; ``as_s3a`` gives those set, by their ``fs.s3a.*`` names."""

    def __bool__(self) -> bool: ...

    def as_s3a(self) -> dict[str, str]: ...


#: scheme -> "module:function"; the function takes the URL and returns (store, path).
#: Cloud adapters register here lazily so their SDKs are imported only when used.
OPENERS: dict[str, str] = {
    "file": "aiocommit.stores.registry:_open_local",
    "memory": "aiocommit.stores.registry:_open_memory",
    "abfs": "aiocommit.stores.adls:open_adls",
    "abfss": "aiocommit.stores.adls:open_adls",
    "gs": "aiocommit.stores.gcs:open_gcs",
    "s3": "aiocommit.stores.s3:open_s3",
    "s3a": "aiocommit.stores.s3:open_s3",
}

#: scheme -> the pip extra that installs its adapter's packages
EXTRAS: dict[str, str] = {"abfs": "azure", "abfss": "azure", "gs": "gcs", "s3": "s3", "s3a": "s3"}

#: schemes whose opener takes client settings: ``opener(url, settings)``
SETTINGS_SCHEMES = frozenset({"s3", "s3a"})


def _scheme(url: str) -> str:
    return urlsplit(url).scheme if "://" in url or url.startswith("file:") else "file"


def takes_settings(url: str) -> bool:
    """Whether the store of ``url`` takes client settings (``StoreSettings``)."""
    return _scheme(url).lower() in SETTINGS_SCHEMES


def register_scheme(scheme: str, opener: str) -> None:
    """Register ``"module:function"`` as the opener for URLs of ``scheme``."""
    OPENERS[scheme] = opener


def _open_local(url: str) -> tuple[Store, str]:
    from aiocommit.stores.local import LocalStore

    store = LocalStore()
    path = url if "://" not in url and not url.startswith("file:") else store.unqualify(url)
    return store, os.path.abspath(path)


def _open_memory(url: str) -> tuple[Store, str]:
    from aiocommit.stores.memory import MemoryStore

    parts = urlsplit(url)
    return MemoryStore.named(parts.netloc or "default"), url[
        len(f"memory://{parts.netloc}") :
    ] or "/"


def open_store(url: str, settings: StoreSettings | None = None) -> tuple[Store, str]:
    """Return ``(store, path)`` for a URL: ``file:///abs``, a plain path, ``memory://name/p``,
    or any scheme a cloud adapter registered (``abfs``, ``abfss``, ``gs``, ``s3``, ``s3a``).
    ``settings``: the client's (endpoint, path style ...), for a store that takes them
    (``takes_settings``); other stores have none to take.

    Raises ``InvalidInput`` for a URL no adapter serves or one its adapter refuses, and
    ``MissingExtra`` (naming the pip extra) when the adapter's packages are not installed.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput(f"not a store URL or path: {url!r}")
    scheme = _scheme(url)
    target = OPENERS.get(scheme)
    if target is None:
        known = ", ".join(f"{name}://" for name in sorted(OPENERS))
        raise InvalidInput(f"no store adapter for URL scheme {scheme!r} in {url!r} ({known})")
    module_name, _, function_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        extra = EXTRAS.get(scheme)
        if extra is None or (error.name or "").startswith("aiocommit"):
            raise
        raise MissingExtra(f"the {scheme}:// store", extra, error.name) from error
    opener: Callable[..., tuple[Store, str]] = getattr(module, function_name)
    try:
        if settings and scheme.lower() in SETTINGS_SCHEMES:
            return opener(url, settings.as_s3a())
        return opener(url)
    except InvalidInput:
        raise
    except ValueError as error:
        raise InvalidInput(f"{url!r}: {error}") from error


def reopen_url(url: str) -> Store:
    """The store of ``url``, opened again (in another process): a picklable opener."""
    return open_store(url)[0]
