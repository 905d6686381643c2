"""``open_store(url, settings)``: pick the adapter from the URL scheme, and hand it the
client settings it reads (endpoint, path style, credentials ...), so no caller forks on
the scheme."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from aiocommit.errors import InvalidInput, MissingExtra
from aiocommit.stores.base import Store

#: scheme -> "module:function"; the function takes the URL (and, when the scheme reads
#: client settings, ``SETTINGS``, those settings) and returns (store, path). Cloud
#: adapters register here lazily so their SDKs are imported only when used.
_LOCAL_OPENER = "aiocommit.stores.registry:_open_local"
OPENERS: dict[str, str] = {
    "file": _LOCAL_OPENER,
    "memory": "aiocommit.stores.registry:_open_memory",
    "abfs": "aiocommit.stores.adls:open_adls",
    "abfss": "aiocommit.stores.adls:open_adls",
    "gs": "aiocommit.stores.gcs:open_gcs",
    "s3": "aiocommit.stores.s3:open_s3",
    "s3a": "aiocommit.stores.s3:open_s3",
}

#: scheme -> the prefix of the client settings its adapter reads (Hadoop's names): the
#: S3 client's ``fs.s3a.endpoint``, ``fs.s3a.path.style.access``, ``fs.s3a.access.key`` ...
#: (``stores.s3_settings.CLIENT_KEYS``); a scheme not listed reads none
SETTINGS: dict[str, str] = {"s3": "fs.s3a.", "s3a": "fs.s3a."}

#: scheme -> the pip extra that installs its adapter's packages
EXTRAS: dict[str, str] = {"abfs": "azure", "abfss": "azure", "gs": "gcs", "s3": "s3", "s3a": "s3"}


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


def url_scheme(url: str) -> str:
    """The scheme ``url`` names, as written (``file`` for a plain path); no I/O."""
    return urlsplit(url).scheme if "://" in url or url.startswith("file:") else "file"


def open_store(
    url: str, settings: Mapping[str, str] | None = None, *, strict: bool = False
) -> tuple[Store, str]:
    """Return ``(store, path)`` for a URL: ``file:///abs``, a plain path, ``memory://name/p``,
    or any scheme a cloud adapter registered (``abfs``, ``abfss``, ``gs``, ``s3``, ``s3a``).

    ``settings``: client settings by Hadoop's names (``spark.hadoop.`` dropped); the
    adapter gets those it reads (``SETTINGS``: on S3 ``fs.s3a.endpoint``,
    ``fs.s3a.path.style.access``, credentials ...), the rest are ignored, or with
    ``strict`` refused (``InvalidInput``: settings for another store's client).

    Raises ``InvalidInput`` for a URL no adapter serves or one its adapter refuses, and
    ``MissingExtra`` (naming the pip extra) when the adapter's packages are not installed.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput(f"not a store URL or path: {url!r}")
    scheme = url_scheme(url).lower()
    own = _settings_of(scheme, url, settings or {}, strict=strict)
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
        return opener(url, own) if own else opener(url)
    except InvalidInput:
        raise
    except ValueError as error:
        raise InvalidInput(f"{url!r}: {error}") from error


def is_local_url(url: str) -> bool:
    """Whether ``open_store`` opens ``url`` on the local filesystem (a plain path or a
    ``file:`` URL, while no other adapter is registered for ``file``); no I/O."""
    if not isinstance(url, str):
        return False
    return url_scheme(url).lower() == "file" and OPENERS.get("file") == _LOCAL_OPENER


def check_directory_url(url: str) -> None:
    """Check, without any I/O but a local ``stat``, that ``url`` can name a directory to
    write into: a scheme some adapter serves, a bucket/filesystem for a cloud URL, and for
    a local path a directory, or a path whose nearest existing parent is a writable
    directory. ``InvalidInput`` saying what is wrong."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput(f"not a store URL or path: {url!r}")
    scheme = url_scheme(url)
    if scheme not in OPENERS:
        known = ", ".join(f"{name}://" for name in sorted(OPENERS))
        raise InvalidInput(f"no store adapter for URL scheme {scheme!r} in {url!r} ({known})")
    if scheme == "memory":
        return
    if scheme != "file":
        if not urlsplit(url).netloc:
            raise InvalidInput(f"{url!r} names no bucket or filesystem")
        return
    from aiocommit.stores.local import LocalStore

    path = os.path.abspath(LocalStore().unqualify(url))
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise InvalidInput(f"{url!r}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InvalidInput(f"{url!r}: {probe} is not writable")


def _settings_of(
    scheme: str, url: str, settings: Mapping[str, str], *, strict: bool
) -> dict[str, str]:
    """The settings ``scheme``'s adapter reads (``spark.hadoop.`` dropped)."""
    prefix = SETTINGS.get(scheme)
    own: dict[str, str] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidInput(f"store settings are str keys and values, not {key!r}: {value!r}")
        name = key.removeprefix("spark.hadoop.")
        if prefix is not None and name.lower().startswith(prefix):
            own[name] = value
        elif strict:
            readers = sorted(f"{s}://" for s, p in SETTINGS.items() if name.startswith(p))
            where = " and ".join(readers) + " destinations only" if readers else "no store"
            raise InvalidInput(f"{key}: a client setting of {where}, not of {url!r}")
    return own


def reopen_url(url: str, settings: Mapping[str, str] | None = None) -> Store:
    """The store of ``url`` (with its client ``settings``), opened again (in another
    process): a picklable opener."""
    return open_store(url, settings)[0]
