"""Hive-style partition directories, escaped exactly as Spark escapes them.

Spark's ``ExternalCatalogUtils.escapePathName`` (copied from Hive's ``FileUtils``)
percent-escapes, as ``%XX`` with upper-case hex, the characters 0x01-0x1F, ``"``, ``#``,
``%``, ``'``, ``*``, ``/``, ``:``, ``=``, ``?``, ``\\``, 0x7F, ``{``, ``[``, ``]`` and
``^`` (plus space, ``<``, ``>`` and ``|`` on Windows only, which we do not copy). Every
other character, unicode included, is kept as it is. A null or empty value becomes
``__HIVE_DEFAULT_PARTITION__``; the column name is escaped the same way. NUL (0x00),
which Spark would keep, is escaped here too: no store accepts it in a path.

``spark.read`` unescapes these names, so ``col=value`` directories read back as the
original values.
"""

from __future__ import annotations

DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"

_ESCAPED = frozenset(
    [chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"),
)


def needs_escaping(char: str) -> bool:
    return char in _ESCAPED


def escape_path_name(name: str) -> str:
    """Spark's ``escapePathName``: ``a/b`` -> ``a%2Fb``."""
    if not any(c in _ESCAPED for c in name):
        return name
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in name)


def unescape_path_name(name: str) -> str:
    """Spark's ``unescapePathName``: every ``%XX`` with two hex digits becomes the character."""
    out: list[str] = []
    i = 0
    while i < len(name):
        char = name[i]
        if char == "%" and i + 2 < len(name) and _is_hex(name[i + 1 : i + 3]):
            out.append(chr(int(name[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def partition_value_string(value: str | None) -> str:
    """The directory form of a value: escaped, or the default name for null and ``""``."""
    if value is None or value == "":
        return DEFAULT_PARTITION_NAME
    return escape_path_name(value)


def partition_path_string(column: str, value: str | None) -> str:
    """``column=value`` as Spark's ``getPartitionPathString`` writes it."""
    return escape_path_name(column) + "=" + partition_value_string(value)


def partition_path(columns: list[str], values: list[str | None]) -> str:
    """The relative directory of one partition: ``a=1/b=x%2Fy``."""
    return "/".join(partition_path_string(c, v) for c, v in zip(columns, values, strict=True))
