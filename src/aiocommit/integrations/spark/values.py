"""Single values as Spark writes them as text: partition directory values
(``CAST(value AS STRING)``) and the fields of its JSON and CSV writers.

Checked against pyspark 4.3.0's own writers (``tests/spark/test_parity.py``):

* floats: Java's ``Double.toString``/``Float.toString`` (``1.0E20``, ``-0.0``, ``NaN``) of
  the JVM Spark runs on: Java 19 and later differ from Java 17 (``java_float_string``);
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
import fractions
import math
import struct
import zoneinfo
from collections.abc import Callable
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


def java_float_string(value: float, *, single: bool = False, before_java_19: bool = False) -> str:
    """Java's ``Double.toString``/``Float.toString`` (``single``), plain between 1e-3 and
    1e7 (``2.5``, ``100.0``), else computerised scientific notation (``1.0E20``).

    Java 19 and later print the shortest digits that read back the same value, and at
    least two when the shortest has one, picking the closest (``4.9E-324``, not
    ``5.0E-324``; ``9.9E-324``). Earlier Javas (``before_java_19``: Spark on Java 17)
    print the exact digits of an integer below 2^63 (``1.61304845894623136E17``) and
    develop other values digit by digit with their own stopping rule, which is not always
    the shortest (``9.999999999999999E22`` for 1e23): ``_digits_before_java_19``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if before_java_19:
        digits, point = _digits_before_java_19(magnitude, single)
    else:
        digits, point = _shortest_digits(magnitude, single)
    return ("-" if value < 0 else "") + _java_layout(digits, point)


def _java_layout(digits: str, point: int) -> str:
    """``0.DIGITS x 10^point`` as Java lays it out."""
    if 0 < point <= 7:
        if len(digits) <= point:
            return digits + "0" * (point - len(digits)) + ".0"
        return digits[:point] + "." + digits[point:]
    if -3 < point <= 0:
        return "0." + "0" * -point + digits
    return f"{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _round_trips(candidate: fractions.Fraction, value: float, single: bool) -> bool:
    if not single:
        return float(candidate) == value
    return _nearest_float32(candidate) == value


def _nearest_float32(exact: fractions.Fraction) -> float:
    """``exact`` rounded once to the nearest float (ties to even)."""
    near: float = struct.unpack("<f", struct.pack("<f", float(exact)))[0]
    bits = struct.unpack("<I", struct.pack("<f", near))[0]
    candidates: list[float] = [near]
    for neighbour in (bits - 1, bits + 1):
        if 0 <= neighbour < 0x7F800000:
            candidates.append(struct.unpack("<f", struct.pack("<I", neighbour))[0])
    return min(
        candidates,
        key=lambda c: (
            abs(fractions.Fraction(c) - exact),
            struct.unpack("<I", struct.pack("<f", c))[0] & 1,
        ),
    )


def _shortest_digits(magnitude: float, single: bool) -> tuple[str, int]:
    """(digits, point) of Java 19+: the shortest round-tripping digits, closest to the
    value among them; when that is one digit, the closest of one or two digits."""
    text = _shortest(magnitude, single)
    mantissa, _, exponent_text = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    number = int(whole + fraction)
    exponent = int(exponent_text or 0) - len(fraction)
    while number % 10 == 0:
        number //= 10
        exponent += 1
    if number >= 10:
        return str(number), exponent + len(str(number))
    exact = fractions.Fraction(magnitude)
    best = (abs(number * fractions.Fraction(10) ** exponent - exact), number, exponent)
    for scale in (exponent - 1, exponent - 2):
        unit = fractions.Fraction(10) ** scale
        middle = round(exact / unit)
        for two in (middle - 1, middle, middle + 1):
            if 10 <= two <= 99 and _round_trips(two * unit, magnitude, single):
                distance = abs(two * unit - exact)
                if distance < best[0] or (distance == best[0] and two % 2 < best[1] % 2):
                    best = (distance, two, scale)
    _, number, exponent = best
    digits = str(number).rstrip("0")
    return digits, exponent + len(str(number))


def _binary_parts(magnitude: float, single: bool) -> tuple[int, int, int]:
    """(significand with its leading bit at bit 52, the power of two of that bit, the
    number of significant bits the format holds for this value)."""
    if single:
        raw = struct.unpack("<I", struct.pack("<f", magnitude))[0]
        biased, fraction, width, bias = raw >> 23, raw & (1 << 23) - 1, 23, 127
    else:
        raw = struct.unpack("<Q", struct.pack("<d", magnitude))[0]
        biased, fraction, width, bias = raw >> 52, raw & (1 << 52) - 1, 52, 1023
    if biased:
        significand, power, precision = fraction | 1 << width, biased - bias, width + 1
    else:  # subnormal: fewer significant bits
        precision = fraction.bit_length()
        significand, power = fraction << (width + 1 - precision), precision - width - bias
    return significand << (52 - width), power, precision


def _wrapped(bits: int | None) -> Callable[[int], int]:
    """Two's complement overflow of Java's ``int`` (32) or ``long`` (64); None: none."""
    if bits is None:
        return lambda v: v
    top, size = 1 << (bits - 1), 1 << bits
    return lambda v: (v + top) % size - top


def _bits_of_five_power(n: int) -> int:
    return 0 if n == 0 else (5**n).bit_length() if n < 27 else 3 * n


def _digits_before_java_19(magnitude: float, single: bool) -> tuple[str, int]:
    """(digits, point) as Java 8-18's ``Double.toString``/``Float.toString`` develop them."""
    significand, power, precision = _binary_parts(magnitude, single)
    trailing = (significand & -significand).bit_length() - 1
    used_bits = 53 - trailing
    fraction_bits = max(0, used_bits - power - 1)
    if -21 <= power <= 62 and fraction_bits == 0:
        # an integer below 2^63: its digits, the last few rounded away when the format
        # cannot tell them apart
        whole = significand << (power - 52) if power >= 52 else significand >> (52 - power)
        dropped = len(str(2 ** (power - precision - 1))) - 1 if power - precision - 1 > 1 else 0
        if dropped:
            unit = 10**dropped
            whole, rest = divmod(whole, unit)
            whole += rest >= unit // 2
        return str(whole).rstrip("0"), len(str(whole)) + dropped
    # value = B/S x 10^estimate; M: half the gap to the neighbours, scaled alike
    mantissa = struct.unpack("<d", struct.pack("<Q", 1023 << 52 | significand & (1 << 52) - 1))[0]
    estimate = math.floor((mantissa - 1.5) * 0.289529654 + 0.176091259 + power * 0.301029995663981)
    b5, s5 = max(0, -estimate), max(0, estimate)
    b2, s2 = b5 + fraction_bits + power - (used_bits - 1), s5 + fraction_bits
    m2 = b5 + fraction_bits + power - precision
    common = min(b2, s2)
    b2, s2, m2 = b2 - common, s2 - common, m2 - common - (used_bits == 1)
    if m2 < 0:
        b2, s2, m2 = b2 - m2, s2 - m2, 0
    b_bits = used_bits + b2 + _bits_of_five_power(b5)
    ten_s_bits = s2 + 1 + _bits_of_five_power(s5 + 1)
    word = 32 if max(b_bits, ten_s_bits) < 32 else 64 if max(b_bits, ten_s_bits) < 64 else None
    wrap = _wrapped(word)
    b = wrap(wrap((significand >> trailing) * 5**b5) << b2)
    s = wrap(5**s5 << s2)
    m = wrap(5**b5 << m2)
    ten_s = wrap(s * 10)
    digits: list[int] = []
    first = True
    while True:
        q, b = b // s, wrap(10 * (b % s))
        m = wrap(m * 10)
        if word is not None and m <= 0 and not first:  # the product overflowed
            low = high = True
        else:
            low = b < m
            high = wrap(b + m) > ten_s if word is not None else b + m >= ten_s
        if first:
            first = False
            if q or high:
                digits.append(q)
            else:
                estimate -= 1  # the estimate was one too high: no leading zero
            if estimate < -3 or estimate >= 8:
                low = high = False  # scientific notation: at least two digits
        else:
            digits.append(q)
        if low or high:
            break
    point = estimate + 1
    if word is not None:
        difference = wrap(wrap(b << 1) - ten_s)
    else:
        difference = (b << 1) - ten_s if low and high else 0
    if high and (not low or difference > 0 or (difference == 0 and digits[-1] % 2)):
        i = len(digits) - 1
        while i > 0 and digits[i] == 9:
            digits[i] = 0
            i -= 1
        if digits[i] == 9:
            digits[i], point = 1, point + 1
        else:
            digits[i] += 1
    return "".join(map(str, digits)), point


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
