"""Sizes and durations as people read and write them."""

from __future__ import annotations

import re


def human_bytes(size: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def human_duration(seconds: float | None) -> str:
    """``93784`` -> ``"1d 2h"``; None -> ``"-"``."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``"2h"``, ``"3d"``, ``"1h30m"``, ``"90s"`` -> seconds; ``ValueError`` otherwise."""
    compact = text.strip().lower()
    parts = _DURATION_PART.findall(compact)
    if not compact or "".join(f"{n}{u}" for n, u in parts) != compact.replace(" ", ""):
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h, 3d, 1w, 1h30m)")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
