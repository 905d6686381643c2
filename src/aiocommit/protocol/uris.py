"""Paths in manifests and ``_SUCCESS`` as Hadoop writes them: ``Path.toUri().toString()``.

A store names a file by its plain path (``/dest/part=a b/f.csv``) and ``Store.qualify``
adds the scheme and authority without escaping anything (``file:/dest/part=a b/f.csv``,
the form of Hadoop's ``Path.toString()`` and of URLs people type). Manifests hold the URI
form instead, which ``java.net.URI``'s multi-argument constructor produces: every ASCII
character that is not legal in a URI path is percent-encoded (space ``%20``, ``%`` ``%25``,
``#`` ``%23``, ``?`` ``%3F``, ``"<>[\\]^`{|}`` and controls), as is every non-ASCII space or
control character (as UTF-8 octets); other non-ASCII characters stay as they are, and so do
``:``, ``+``, ``@``, ``&``, ``=``, ``$``, ``,`` and ``;``. Hadoop reads a path back with
``new Path(new URI(text))``, so an unescaped space is a syntax error and ``%3A`` is a colon.

``manifest_uri`` and ``manifest_path`` are the one conversion in both directions; they work
on the whole qualified string, so every scheme (``file:``, ``abfs[s]:``, ``gs:``, ``s3a:``,
``memory:``) is handled alike. Both are on the per-file hot path: a name that needs no
escaping costs one regular-expression search.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from aiocommit.errors import InvalidInput

#: Unicode space separators (categories Zs, Zl, Zp: Java's ``Character.isSpaceChar``)
#: beyond ASCII; ``tests/protocol/test_uris.py`` checks the list against ``unicodedata``.
UNICODE_SPACES = "\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

#: what ``java.net.URI`` leaves as it is in a path: unreserved, punctuation, ``/`` and ``@``
_LEGAL_ASCII = r"A-Za-z0-9\-_.!~*'():@&=+$,;/"

#: one ASCII character the URI form escapes (the fast path: most names are ASCII)
_ASCII_TO_ESCAPE = re.compile(f"[^{_LEGAL_ASCII}]")

#: one character the URI form escapes: illegal ASCII, ISO controls, non-ASCII spaces, and
#: lone surrogates (a local file name that is not UTF-8, decoded with ``surrogateescape``)
_TO_ESCAPE = re.compile(
    f"[^{_LEGAL_ASCII}\\x80-\\U0010ffff]|[\\x80-\\x9f{UNICODE_SPACES}]|[\\ud800-\\udfff]"
)

#: one character that cannot appear unescaped in the URI form, or a ``%`` not followed by
#: two hex digits
_ILLEGAL = re.compile(
    f"[^{_LEGAL_ASCII}%\\x80-\\U0010ffff]|[\\x80-\\x9f{UNICODE_SPACES}]|%(?![0-9A-Fa-f]{{2}})"
)


def _escape(match: re.Match[str]) -> str:
    octets = match.group().encode("utf-8", "surrogateescape")
    return "".join(f"%{octet:02X}" for octet in octets)


def manifest_uri(qualified: str) -> str:
    """The URI form of a qualified store path (``Store.qualify``), as Hadoop's
    ``Path.toUri().toString()`` writes it: ``file:/d/a b`` -> ``file:/d/a%20b``."""
    if qualified.isascii():
        if _ASCII_TO_ESCAPE.search(qualified) is None:
            return qualified
        return _ASCII_TO_ESCAPE.sub(_escape, qualified)
    return _TO_ESCAPE.sub(_escape, qualified)


def plain_suffix(uri: str, prefix: str) -> str | None:
    """What follows ``prefix`` in ``uri`` when it is a clean relative store path needing
    no unescaping (ASCII, nothing escaped or illegal, no empty, ``.`` or ``..`` segment,
    no trailing ``/``); else None, and the caller takes the general path. The fast path
    of reading a manifest's entries, which nearly all share their directory's prefix."""
    if not uri.startswith(prefix):
        return None
    rest = uri[len(prefix) :]
    if (
        not rest
        or not rest.isascii()
        or _ASCII_TO_ESCAPE.search(rest) is not None
        or rest[0] in "./"
        or "//" in rest
        or "/." in rest
        or rest[-1] == "/"
    ):
        return None
    return rest


def manifest_path(uri: str) -> str:
    """The qualified store path (for ``Store.unqualify``) of a path in Hadoop's URI form:
    ``file:/d/a%20b`` -> ``file:/d/a b``. ``ValueError`` names the first character that
    ``java.net.URI`` would refuse (an unescaped space, ``#``, ``?``, a bad ``%`` escape)."""
    if uri.isascii() and _ASCII_TO_ESCAPE.search(uri) is None:
        return uri  # nothing escaped, nothing illegal: no % either
    bad = _ILLEGAL.search(uri)
    if bad is not None:
        where = bad.start()
        raise InvalidInput(
            f"not a URI as Hadoop writes it: {uri[where : where + 3]!r} at index {where} "
            "(a space, '#', '?', '%' and similar must be %-escaped)"
        )
    return unquote(uri, errors="surrogateescape") if "%" in uri else uri
