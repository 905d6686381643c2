"""Spark's ``dateFormat``/``timestampFormat``/``timestampNTZFormat`` patterns for writing:
the pattern letters of Java's ``DateTimeFormatter`` (US locale) as Spark 3+ uses them,
``y`` printed as ``u`` (proleptic year: year 0 and negative years, ``+`` above 9999).

``compile_pattern`` turns a pattern into a function of ``(year, wall clock, UTC offset)``
(``values.local_time``'s answer) or raises ``ValueError`` naming what it does not
support: the week-based letters Spark refuses, zone names (``z``, ``zzzz``), localized
offsets (``O``, ``ZZZZ``) and other letters. Fractions of a second print the
microseconds Spark's timestamps hold (``SSSSSSSSS`` pads with zeros).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

Part = Callable[[int, datetime.datetime, datetime.timedelta | None], str]
Formatter = Callable[[int, datetime.datetime, datetime.timedelta | None], str]

MONTHS: tuple[str, ...] = ("January", "February", "March", "April", "May", "June", "July")
MONTHS += ("August", "September", "October", "November", "December")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

#: letters Spark refuses in datetime patterns (week-based fields and a few others)
_SPARK_REFUSED = set("YWwuecAnNp")


def _number(value: int, width: int) -> str:
    return f"-{-value:0{width}d}" if value < 0 else f"{value:0{width}d}"


def _year(count: int) -> Part:
    def part(year: int, wall: datetime.datetime, offset: datetime.timedelta | None) -> str:
        if count == 2:
            return f"{year % 100:02d}"
        if count >= 4:
            text = _number(year, count)
            return f"+{text}" if year >= 0 and len(text) > count else text
        return _number(year, count)

    return part


def _offset(text_for_zero: str | None, *, colon: bool, minutes: str, seconds: bool) -> Part:
    """``minutes``: ``always``, ``nonzero`` (``+HHmm``) or ``never`` (``+HH``);
    ``seconds``: printed when not zero."""

    def part(year: int, wall: datetime.datetime, offset: datetime.timedelta | None) -> str:
        if offset is None:
            raise ValueError("an offset pattern letter (X, x, Z) needs a timestamp with a zone")
        total = int(offset.total_seconds())
        if total == 0 and text_for_zero is not None:
            return text_for_zero
        sign = "-" if total < 0 else "+"
        hours, rest = divmod(abs(total), 3600)
        mins, secs = divmod(rest, 60)
        sep = ":" if colon else ""
        text = f"{sign}{hours:02d}"
        if minutes == "always" or (minutes == "nonzero" and (mins or (seconds and secs))):
            text += f"{sep}{mins:02d}"
            if seconds and secs:
                text += f"{sep}{secs:02d}"
        return text

    return part


def _field(letter: str, count: int) -> Part:
    def fixed(get: Callable[[datetime.datetime], int], most: int = 2) -> Part:
        if count > most:
            raise ValueError(f"too many pattern letters: {letter * count}")
        return lambda year, wall, offset: _number(get(wall), count)

    if letter == "y":
        return _year(count)
    if letter in "ML":
        if count <= 2:
            return fixed(lambda w: w.month)
        if count == 3:
            return lambda year, wall, offset: MONTHS[wall.month - 1][:3]
        if count == 4:
            return lambda year, wall, offset: MONTHS[wall.month - 1]
        raise ValueError(f"too many pattern letters: {letter * count}")
    if letter == "d":
        return fixed(lambda w: w.day)
    if letter == "D":
        return fixed(lambda w: w.timetuple().tm_yday, most=3)
    if letter in "Qq":
        if count <= 2:
            return fixed(lambda w: (w.month - 1) // 3 + 1)
        if count == 3:
            return lambda year, wall, offset: f"Q{(wall.month - 1) // 3 + 1}"
        raise ValueError(f"pattern {letter * count} is not supported by aiocommit")
    if letter == "E":
        if count <= 3:
            return lambda year, wall, offset: DAYS[wall.weekday()][:3]
        if count == 4:
            return lambda year, wall, offset: DAYS[wall.weekday()]
        raise ValueError(f"too many pattern letters: {letter * count}")
    if letter == "G":
        if count > 4:
            raise ValueError(f"too many pattern letters: {letter * count}")
        names = ("AD", "BC") if count <= 3 else ("Anno Domini", "Before Christ")
        return lambda year, wall, offset: names[0] if year > 0 else names[1]
    if letter == "a":
        if count > 1:
            raise ValueError(f"too many pattern letters: {letter * count}")
        return lambda year, wall, offset: "AM" if wall.hour < 12 else "PM"
    if letter == "H":
        return fixed(lambda w: w.hour)
    if letter == "k":
        return fixed(lambda w: w.hour or 24)
    if letter == "K":
        return fixed(lambda w: w.hour % 12)
    if letter == "h":
        return fixed(lambda w: w.hour % 12 or 12)
    if letter == "m":
        return fixed(lambda w: w.minute)
    if letter == "s":
        return fixed(lambda w: w.second)
    if letter == "S":
        if count > 9:
            raise ValueError(f"too many pattern letters: {letter * count}")
        return lambda year, wall, offset: f"{wall.microsecond:06d}{'000'}"[:count]
    if letter in "Xx":
        zero = "Z" if letter == "X" else None
        if count == 1:
            return _offset(zero or "+00", colon=False, minutes="nonzero", seconds=False)
        if count in (2, 4):
            return _offset(zero or "+0000", colon=False, minutes="always", seconds=count == 4)
        if count in (3, 5):  # XXX: +HH:MM (seconds cut off, as Java); XXXXX: +HH:MM:ss
            return _offset(zero or "+00:00", colon=True, minutes="always", seconds=count == 5)
        raise ValueError(f"too many pattern letters: {letter * count}")
    if letter == "Z":
        if count <= 3:
            return _offset("+0000", colon=False, minutes="always", seconds=False)
        if count == 5:
            return _offset("Z", colon=True, minutes="always", seconds=True)
        raise ValueError(f"pattern {letter * count} (localized offset) is not supported")
    if letter in _SPARK_REFUSED:
        raise ValueError(f"pattern letter {letter!r} is not supported (Spark refuses it too)")
    raise ValueError(
        f"pattern letter {letter!r} ({letter * count}) is not supported by aiocommit: zone "
        "names and localized forms are not written; use X, x or Z for the offset"
    )


def compile_pattern(pattern: str) -> Formatter:
    """A formatter of ``(year, wall clock, offset)``; ``ValueError`` names what it cannot do."""
    parts: list[Part] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            end = i + 1
            text = ""
            while True:
                close = pattern.find("'", end)
                if close < 0:
                    raise ValueError(f"pattern {pattern!r}: unclosed quote")
                text += pattern[end:close]
                if close + 1 < n and pattern[close + 1] == "'":  # '' inside quotes
                    text += "'"
                    end = close + 2
                    continue
                end = close + 1
                break
            if end == i + 2:  # '' outside quotes: one quote
                text = "'"
            parts.append(_literal(text))
            i = end
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            parts.append(_field(c, j - i))
            i = j
        elif c in "[]":  # optional sections: every field is available when writing
            i += 1
        elif c in "#{}":
            raise ValueError(f"pattern {pattern!r}: {c!r} is reserved")
        else:
            parts.append(_literal(c))
            i += 1

    def format_value(year: int, wall: datetime.datetime, offset: datetime.timedelta | None) -> str:
        return "".join(part(year, wall, offset) for part in parts)

    return format_value


def _literal(text: str) -> Part:
    return lambda year, wall, offset: text
