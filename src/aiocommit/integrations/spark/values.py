"""Single values as Spark writes them as text: partition directory values
(``CAST(value AS STRING)``) and the fields of its JSON and CSV writers.

Checked against pyspark 4.3.0's own writers (``tests/spark/test_parity.py``):

* floats: Java's ``Double.toString``/``Float.toString`` (``1.0E20``, ``-0.0``, ``NaN``);
* decimals: plain with the column's scale in partition names (``0.000000100000000000``),
  Java's ``BigDecimal.toString`` in JSON and CSV (``1.00000000000E-7``, ``0E-18``);
* timestamps: in the session time zone; partition names ``2024-03-09 18:30:00.0005``
  (fraction without trailing zeros), JSON/CSV ``2024-03-09T18:30:00.000-08:00`` (milliseconds,
  offset with seconds where the zone had them, e.g. ``-07:52:58`` before 1883 in Los Angeles);
* years: four digits, ``+`` above 9999, so year 0 (``0000-12-31``) and later than 9999
  work, which Python's ``datetime`` cannot hold: such values are shifted by whole 400-year
  Gregorian cycles (146,097 days, identical calendars) to format them.
"""

from __future__ import annotations

import datetime
import decimal
import math
import struct
import zoneinfo
from functools import lru_cache

_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_CYCLE_DAYS = 146_097  # days in 400 Gregorian years
_CYCLE_YEARS = 400
MICROS_PER_DAY = 86_400 * 1_000_000


@lru_cache(maxsize=64)
def zone(name: str) -> datetime.tzinfo:
    """A time zone by Spark's name for it: a region (``America/Los_Angeles``) or an offset."""
    if name.upper() in ("UTC", "Z", "GMT"):
        return datetime.UTC
    if name[:1] in "+-" and ":" in name:
        hours, _, minutes = name[1:].partition(":")
        delta = datetime.timedelta(hours=int(hours), minutes=int(minutes))
        return datetime.timezone(-delta if name[0] == "-" else delta)
    return zoneinfo.ZoneInfo(name)


def _year(year: int) -> str:
    if year > 9999:
        return f"+{year}"
    return f"{year:04d}" if year >= 0 else f"-{-year:04d}"


def local_time(
    micros: int, tz: datetime.tzinfo | None
) -> tuple[int, datetime.datetime, datetime.timedelta | None]:
    """(year, wall clock time with its year possibly shifted, UTC offset) of a timestamp
    in microseconds since the epoch; ``tz`` None for ``timestamp_ntz``."""
    shift = 0
    while True:
        try:
            wall = _EPOCH + datetime.timedelta(microseconds=micros + shift * MICROS_PER_DAY)
            if tz is None:
                return wall.year - _years(shift), wall, None
            aware = wall.replace(tzinfo=datetime.UTC).astimezone(tz)
            return aware.year - _years(shift), aware.replace(tzinfo=None), aware.utcoffset()
        except OverflowError:
            if abs(shift) > 100 * _CYCLE_DAYS:
                raise
            shift += _CYCLE_DAYS if micros < 0 else -_CYCLE_DAYS


def _years(shift_days: int) -> int:
    return shift_days // _CYCLE_DAYS * _CYCLE_YEARS


def date_string(days: int) -> str:
    """A ``date`` (days since the epoch) as ``yyyy-MM-dd``."""
    shift = 0
    while True:
        try:
            value = _EPOCH_DATE + datetime.timedelta(days=days + shift)
            return f"{_year(value.year - _years(shift))}-{value.month:02d}-{value.day:02d}"
        except OverflowError:
            if abs(shift) > 100 * _CYCLE_DAYS:
                raise
            shift += _CYCLE_DAYS if days < 0 else -_CYCLE_DAYS


def _clock(year: int, wall: datetime.datetime, separator: str) -> str:
    return (
        f"{_year(year)}-{wall.month:02d}-{wall.day:02d}{separator}"
        f"{wall.hour:02d}:{wall.minute:02d}:{wall.second:02d}"
    )


def partition_timestamp(micros: int, tz: datetime.tzinfo | None) -> str:
    """``CAST(ts AS STRING)``: ``2024-03-09 18:30:00.0005``."""
    year, wall, _ = local_time(micros, tz)
    text = _clock(year, wall, " ")
    if wall.microsecond:
        text += f".{wall.microsecond:06d}".rstrip("0")
    return text


def text_timestamp(micros: int, tz: datetime.tzinfo | None) -> str:
    """Spark's JSON/CSV ``timestampFormat`` (``yyyy-MM-dd'T'HH:mm:ss.SSSXXX``); without
    the offset for ``timestamp_ntz``."""
    year, wall, offset = local_time(micros, tz)
    text = _clock(year, wall, "T") + f".{wall.microsecond // 1000:03d}"
    if offset is None:
        return text
    return text + offset_string(offset)


def offset_string(offset: datetime.timedelta) -> str:
    """``XXX``: ``Z``, ``-08:00`` or ``-07:52:58``."""
    seconds = int(offset.total_seconds())
    if seconds == 0:
        return "Z"
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")


def plain_decimal(value: decimal.Decimal) -> str:
    """``BigDecimal.toPlainString``: the column's scale, never an exponent."""
    return format(value, "f")


def java_float_string(value: float, *, single: bool = False) -> str:
    """Java's ``Double.toString`` (``Float.toString`` when ``single``): the shortest digits
    that read back the same value, plain between 1e-3 and 1e7 (``2.5``, ``100.0``), else
    computerised scientific notation (``1.0E20``, ``1.5E-5``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    exact = decimal.Decimal(_shortest(value, single))
    if 1e-3 <= abs(value) < 1e7:
        plain = format(exact, "f")
        return plain if "." in plain else plain + ".0"
    sign, digits, _ = exact.as_tuple()
    significant = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = significant[0] + "." + (significant[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{exact.adjusted()}"


def _shortest(value: float, single: bool) -> str:
    if not single:
        return repr(value)
    packed = struct.pack("f", value)
    for precision in range(1, 10):
        text = f"{value:.{precision}g}"
        if struct.pack("f", float(text)) == packed:
            return text
    return repr(value)


_INTERVAL_FIELDS = ("DAY", "HOUR", "MINUTE", "SECOND")
_MICROS_PER_HOUR = 3_600_000_000
_MICROS_PER_MINUTE = 60_000_000
_MICROS_PER_SECOND = 1_000_000


def _seconds(rest: int) -> str:
    """``BigDecimal(rest, 6).stripTrailingZeros.toPlainString`` with a leading zero below 10."""
    text = format(decimal.Decimal(rest).scaleb(-6).normalize(), "f")
    return ("0" if rest < 10 * _MICROS_PER_SECOND else "") + text


def day_time_interval_string(micros: int, start: int, end: int) -> str:
    """A day-time interval as Spark's CSV/JSON writers write it (``CAST(i AS STRING)``, ANSI
    style): ``INTERVAL '1 00:00:00.000007' DAY TO SECOND``; ``start``/``end`` are
    ``DayTimeIntervalType``'s fields (0 DAY ... 3 SECOND)."""
    first, last = _INTERVAL_FIELDS[start], _INTERVAL_FIELDS[end]
    suffix = f"' {first if start == end else f'{first} TO {last}'}"
    sign, rest = ("-", -micros) if micros < 0 else ("", micros)
    if start == 0:
        text = f"{sign}{rest // MICROS_PER_DAY}"
        rest %= MICROS_PER_DAY
        if end >= 1:
            text += f" {rest // _MICROS_PER_HOUR:02d}"
            rest %= _MICROS_PER_HOUR
    elif start == 1:
        text = f"{sign}{rest // _MICROS_PER_HOUR:02d}"
        rest %= _MICROS_PER_HOUR
    elif start == 2:
        text = f"{sign}{rest // _MICROS_PER_MINUTE:02d}"
        rest %= _MICROS_PER_MINUTE
    else:
        return f"INTERVAL '{sign}{_seconds(rest)}{suffix}"
    if start <= 1 and end >= 2:
        text += f":{rest // _MICROS_PER_MINUTE:02d}"
        rest %= _MICROS_PER_MINUTE
    if end == 3:
        text += f":{_seconds(rest)}"
    return f"INTERVAL '{text}{suffix}"
