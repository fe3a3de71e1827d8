"""Quantities with units, as people write them in scenario files.

Internal units: hours, GiB, USD. A bare number means the field's documented unit.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z/$%]*)\s*$")

HOURS_PER_MONTH = 730.0
"""A month as the clouds bill storage by it (8,760 hours a year over 12)."""
HOURS_PER = {
    "ms": 1 / 3.6e6,
    "msec": 1 / 3.6e6,
    "millisecond": 1 / 3.6e6,
    "milliseconds": 1 / 3.6e6,
    "s": 1 / 3600,
    "sec": 1 / 3600,
    "secs": 1 / 3600,
    "second": 1 / 3600,
    "seconds": 1 / 3600,
    "m": 1 / 60,
    "min": 1 / 60,
    "mins": 1 / 60,
    "minute": 1 / 60,
    "minutes": 1 / 60,
    "h": 1.0,
    "hr": 1.0,
    "hrs": 1.0,
    "hour": 1.0,
    "hours": 1.0,
    "d": 24.0,
    "day": 24.0,
    "days": 24.0,
    "w": 168.0,
    "week": 168.0,
    "weeks": 168.0,
}
GIB_PER = {
    "b": 1 / 2**30,
    "kb": 1e3 / 2**30,
    "mb": 1e6 / 2**30,
    "gb": 1e9 / 2**30,
    "tb": 1e12 / 2**30,
    "pb": 1e15 / 2**30,
    "kib": 1 / 2**20,
    "mib": 1 / 2**10,
    "gib": 1.0,
    "tib": 2.0**10,
    "pib": 2.0**20,
}
COUNT_PER = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
MONEY_PER = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6}


def _split(value: object, what: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ValueError(f"expected {what}, got a boolean")
    if isinstance(value, (int, float)):
        if isinstance(value, int) and abs(value) > 1e300:  # float() would overflow
            raise ValueError(
                f"expected {what}, got a number with {len(str(abs(value)))} digits"
            )
        return float(value), ""
    if not isinstance(value, str):
        raise ValueError(f"expected {what}, got {type(value).__name__}")
    match = _QUANTITY.match(value.replace("_", "").replace(",", ""))
    if not match:
        raise ValueError(f"expected {what}, got {value!r}")
    return float(match.group(1)), match.group(2)


def _finite(number: float, original: object, what: str) -> float:
    if not math.isfinite(number):
        raise ValueError(f"expected {what}, got {original!r}")
    return number


def _scaled(
    value: object, per: dict[str, float], what: str, kind: str, hint: str
) -> float:
    """A number with an optional case-insensitive unit from `per`; bare numbers are in the base unit."""
    number, unit = _split(value, what)
    if unit and unit.lower() not in per:
        raise ValueError(f"unknown {kind} unit {unit!r} in {value!r} (use {hint})")
    return _finite(number * per.get(unit.lower(), 1.0), value, what)


def parse_hours(value: object) -> float:
    """'500ms', '90s', '30m', '2h', '3d', '1w' or a bare number of hours -> hours."""
    return _scaled(
        value,
        HOURS_PER,
        "a duration such as 90s, 30m, 2h or 3d",
        "time",
        "ms, s, m, h, d or w",
    )


def parse_seconds(value: object) -> float:
    """'500ms', '2s', '1m' -> seconds (latency targets). A bare number is an error: 500 would be read as
    milliseconds by some and as seconds by others, and durations elsewhere are bare hours."""
    what = "a latency with its unit, such as 500ms or 2s"
    number, unit = _split(value, what)
    if not unit:
        raise ValueError(
            f"a latency needs its unit: write {number:g}ms or {number:g}s, not {value!r}"
        )
    return _scaled(
        value, {k: v * 3600 for k, v in HOURS_PER.items()}, what, "time", "ms, s or m"
    )


MAX_GIB = 1e9
"""An exabyte: the bound on every size a file or option gives."""


def parse_gib(value: object) -> float:
    """'80GiB', '1.5TiB', '500GB' or a bare number of GiB -> GiB."""
    return _scaled(
        value,
        GIB_PER,
        "a size such as 80GiB, 1.5TiB or 500GB",
        "size",
        "GiB, TiB, GB, TB, MiB...",
    )


def parse_usd(value: object) -> float:
    """'$2.50', '$2.50/h', '50k', '$1.2M' or a bare number -> USD (per hour where the field says so)."""
    what = "an amount of money such as $2.50, $2.50/h or $50k"
    if isinstance(value, str):
        text = value.strip()
        sign = "-" if text.startswith("-") else ""
        text = text.lstrip("+-").strip()
        if text.startswith("$"):
            text = sign + text[1:]
        for suffix in ("/h", "/hr", "/hour"):
            if text.lower().endswith(suffix):
                text = text[: -len(suffix)]
        if text.upper().endswith("USD"):
            text = text[:-3]
        value_for_split: object = text
    else:
        value_for_split = value
    number, unit = _split(value_for_split, what)
    if unit not in MONEY_PER:
        raise ValueError(f"unknown money unit {unit!r} in {value!r} (use $, k or M)")
    return _finite(number * MONEY_PER[unit], value, what)


def parse_share(value: object) -> float:
    """'10%' or a bare fraction such as 0.1 -> 0.1 (a bare number above 1 is not read as a percentage: ask)."""
    what = "a share such as 10% or 0.1"
    number, unit = _split(value, what)
    if unit not in ("", "%"):
        raise ValueError(
            f"unknown unit {unit!r} in {value!r} (write a share as 10% or 0.1)"
        )
    if unit == "" and number > 1:
        raise ValueError(
            f"expected {what}, got {value!r} (a percentage needs its % sign)"
        )
    return _finite(number / 100 if unit else number, value, what)


def parse_count(value: object) -> float:
    """'7B', '70e9', '2T', '1.5M', '300k' -> a plain number (parameters, tokens, sequences)."""
    what = "a count such as 7B, 2T, 1.5M or 300k"
    number, unit = _split(value, what)
    if unit.lower() not in COUNT_PER:
        raise ValueError(
            f"unknown count suffix {unit!r} in {value!r} (use k, M, B or T)"
        )
    return _finite(number * COUNT_PER[unit.lower()], value, what)


def format_hours(hours: float) -> str:
    """Short human form: 45s, 12m, 3.5h, 2.1d."""
    if hours == math.inf:
        return "inf"
    seconds = hours * 3600
    if seconds < 90:
        return f"{seconds:.0f}s"
    if hours < 1.5:
        return f"{hours * 60:.0f}m"
    if hours < 48:
        return f"{hours:.1f}h"
    return f"{hours / 24:.1f}d"
