"""The writer options of Spark's own CSV and JSON sources, parsed once on the driver.

Names, defaults and checks are Spark's (``CSVOptions``, ``JSONOptions``, pyspark 4.3):
an option one of Spark's text writers takes is honoured; a read-only option (``inferSchema``,
``multiLine``...), the other format's option or one aiocommit cannot honour (JSON
``writeNonAsciiCharacterAsCodePoint``) is refused, never silently ignored. Compression codecs are in
``text_compression``, date and time patterns in ``datetime_patterns``.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from dataclasses import dataclass

from aiocommit.integrations.spark.datetime_patterns import compile_pattern

DEFAULT_DATE_FORMAT = "yyyy-MM-dd"
DEFAULT_TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
DEFAULT_TIMESTAMP_NTZ_FORMAT = "yyyy-MM-dd'T'HH:mm:ss[.SSS]"

#: options both writers take (lower-cased, as Spark hands them over)
COMMON_OPTIONS = (
    "dateformat",
    "timestampformat",
    "timestampntzformat",
    "linesep",
    "encoding",
    "charset",
    "codec",
    "locale",
)
CSV_OPTIONS = (
    "sep",
    "delimiter",
    "quote",
    "escape",
    "chartoescapequoteescaping",
    "comment",
    "header",
    "nullvalue",
    "emptyvalue",
    "quoteall",
    "escapequotes",
    "ignoreleadingwhitespace",
    "ignoretrailingwhitespace",
)
JSON_OPTIONS = ("ignorenullfields", "pretty")
#: Spark's text readers' options, which its writers ignore: refused here, with the reason
READ_ONLY_OPTIONS = (
    "inferschema",
    "multiline",
    "mode",
    "samplingratio",
    "enforceschema",
    "columnnameofcorruptrecord",
    "nanvalue",
    "positiveinf",
    "negativeinf",
    "maxcolumns",
    "maxcharspercolumn",
    "unescapedquotehandling",
    "preferdate",
    "primitivesasstring",
    "prefersdecimal",
    "allowcomments",
    "allowunquotedfieldnames",
    "allowsinglequotes",
    "allownumericleadingzeros",
    "allowbackslashescapingAnyCharacter".lower(),
    "allowunquotedcontrolchars",
    "dropfieldifallnull",
)
#: options of Spark's text writers that aiocommit does not write (refused)
UNSUPPORTED_WRITE_OPTIONS = ("writenonasciicharacterascodepoint",)
TEXT_OPTIONS = (
    *COMMON_OPTIONS,
    *CSV_OPTIONS,
    *JSON_OPTIONS,
    *READ_ONLY_OPTIONS,
    *UNSUPPORTED_WRITE_OPTIONS,
)


@dataclass(frozen=True)
class TextOptions:
    """How CSV and JSON values and lines are written (Spark's defaults)."""

    # CSV (univocity's writer settings as Spark sets them)
    sep: str = ","
    quote: str = '"'  # "\0" when the option is empty: Spark then "quotes" with NUL
    escape: str = "\\"
    escape_escape: str = "\\"  # charToEscapeQuoteEscaping: escape, as quote differs
    comment: str = "#"  # univocity's default: first-column values starting with it are quoted
    header: bool = False
    null_value: str = ""
    empty_value: str = '""'
    quote_all: bool = False
    escape_quotes: bool = True
    ignore_leading: bool = True
    ignore_trailing: bool = True
    # both
    line_sep: str = "\n"
    encoding: str = "utf-8"  # Python's codec name
    bom: bytes = b""  # Java's UTF-16 writes a big-endian byte order mark first
    date_format: str = DEFAULT_DATE_FORMAT
    #: empty: Spark's default, which prints an offset's seconds (``+05:21:10``); the same
    #: text given as the option (``...SSSXXX``) cuts them off (``+05:21``), as Java's ``XXX``
    timestamp_format: str = ""
    timestamp_ntz_format: str = DEFAULT_TIMESTAMP_NTZ_FORMAT
    #: the ``timeZone`` option (else the session's, carried by Spark's Arrow batches)
    time_zone: str | None = None
    # JSON
    ignore_null_fields: bool = True
    #: Jackson's pretty printer, as Spark's ``pretty`` option
    pretty: bool = False
    #: (column, start field, end field) of the top-level day-time interval columns, set by
    #: ``writer()`` from the Spark schema: written as Spark writes them (``INTERVAL '...'``)
    intervals: tuple[tuple[str, int, int], ...] = ()
    #: the JVM runs Java 8-18, whose ``Double.toString`` differs from later Javas'
    #: (``values.java_float_string``); set from the ``aiocommit.javaVersion`` option
    java_before_19: bool = False

    @classmethod
    def from_options(cls, fmt: str, lowered: Mapping[str, str]) -> TextOptions:
        """``ValueError`` for an option Spark's ``fmt`` writer does not take or a bad value."""
        own = CSV_OPTIONS if fmt == "csv" else JSON_OPTIONS if fmt == "json" else ()
        for key in sorted(k for k in lowered if k in TEXT_OPTIONS and k not in own):
            if key in COMMON_OPTIONS and fmt in ("csv", "json"):
                continue
            if key in UNSUPPORTED_WRITE_OPTIONS:
                reason = f"an option of Spark's {fmt} writer that aiocommit does not honour"
            elif key in READ_ONLY_OPTIONS:
                reason = "an option of Spark's readers, which its writers ignore"
            else:
                reason = f"not an option of Spark's {fmt} writer"
            raise ValueError(f"option {key!r} is {reason}: remove it")
        if fmt not in ("csv", "json"):
            return cls()

        def text(*keys: str, default: str) -> str:
            for key in keys:
                if key in lowered:
                    return lowered[key]
            return default

        quote = _char("quote", text("quote", default='"'))
        escape = _char("escape", text("escape", default="\\"))
        escape_escape_text = lowered.get("chartoescapequoteescaping", "")
        if len(escape_escape_text) > 1:
            raise ValueError("charToEscapeQuoteEscaping: one character at most")
        escape_escape = escape_escape_text or ("\0" if quote == escape else escape)
        comment = lowered.get("comment", "")
        if len(comment) > 1:
            raise ValueError("comment: one character at most")
        sep = _delimiter(text("sep", "delimiter", default=","))
        line_sep = lowered.get("linesep", "\n")
        if not line_sep or len(line_sep) > 2:
            raise ValueError("lineSep: one character (or \\r\\n)")
        encoding, bom = python_encoding(text("encoding", "charset", default="UTF-8"))
        locale = lowered.get("locale", "en-US")
        if locale.replace("_", "-").lower() not in ("en-us", "en"):
            raise ValueError(
                f"locale {locale!r}: aiocommit writes month and day names as Spark's default "
                "locale (en-US) does; format them yourself or leave locale out"
            )
        options = cls(
            sep=sep,
            quote=quote,
            escape=escape,
            escape_escape=escape_escape,
            comment=comment or "#",
            header=_bool("header", lowered.get("header", "false")),
            null_value=lowered.get("nullvalue", ""),
            empty_value=lowered.get("emptyvalue", '""'),
            quote_all=_bool("quoteAll", lowered.get("quoteall", "false")),
            escape_quotes=_bool("escapeQuotes", lowered.get("escapequotes", "true")),
            ignore_leading=_bool(
                "ignoreLeadingWhiteSpace", lowered.get("ignoreleadingwhitespace", "true")
            ),
            ignore_trailing=_bool(
                "ignoreTrailingWhiteSpace", lowered.get("ignoretrailingwhitespace", "true")
            ),
            line_sep=line_sep,
            encoding=encoding,
            bom=bom,
            date_format=lowered.get("dateformat", DEFAULT_DATE_FORMAT),
            timestamp_format=lowered.get("timestampformat", ""),
            timestamp_ntz_format=lowered.get("timestampntzformat", DEFAULT_TIMESTAMP_NTZ_FORMAT),
            time_zone=lowered.get("timezone") or None,
            ignore_null_fields=_bool("ignoreNullFields", lowered.get("ignorenullfields", "true")),
            pretty=_bool("pretty", lowered.get("pretty", "false")),
        )
        for name, pattern in (
            ("dateFormat", options.date_format),
            ("timestampFormat", options.timestamp_format or DEFAULT_TIMESTAMP_FORMAT),
            ("timestampNTZFormat", options.timestamp_ntz_format),
        ):
            try:
                compile_pattern(pattern)
            except ValueError as error:
                raise ValueError(f"{name} {pattern!r}: {error}") from None
        return options


def python_encoding(name: str) -> tuple[str, bytes]:
    """(Python codec, byte order mark) writing what Java's charset ``name`` writes."""
    normalized = name.strip().lower().replace("_", "-")
    if normalized in ("utf-16", "utf16"):
        return "utf-16-be", codecs.BOM_UTF16_BE  # Java: big-endian with a BOM
    if normalized in ("utf-32", "utf32"):
        return "utf-32-be", b""  # Java: big-endian, no BOM
    try:
        return codecs.lookup(normalized).name, b""
    except LookupError:
        raise ValueError(f"encoding {name!r}: unknown charset") from None


def _char(name: str, value: str) -> str:
    """Spark's ``getChar``: empty means NUL; more than one character is an error."""
    if len(value) > 1:
        raise ValueError(f"{name}: one character at most, not {value!r}")
    return value or "\0"


def _delimiter(value: str) -> str:
    """Spark's ``CSVExprUtils.toDelimiterStr``: ``\\t`` and friends as escapes."""
    if value == "":
        raise ValueError("sep: the delimiter cannot be empty")
    escapes = {"\\t": "\t", "\\n": "\n", "\\r": "\r", "\\b": "\b", "\\f": "\f", '\\"': '"'}
    escapes.update({"\\'": "'", "\\\\": "\\", "\\u0000": "\0"})
    out, i = "", 0
    while i < len(value):
        pair = value[i : i + 2]
        if value.startswith("\\u0000", i):
            out, i = out + "\0", i + 6
        elif pair in escapes:
            out, i = out + escapes[pair], i + 2
        elif pair[0] == "\\" and len(pair) == 2:
            raise ValueError(f"sep: unsupported special character {pair!r}")
        elif value[i:] == "\\":
            raise ValueError("sep: a single backslash is not a delimiter")
        else:
            out, i = out + value[i], i + 1
    return out


def _bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    raise ValueError(f"{name} must be true or false, not {text!r}")
