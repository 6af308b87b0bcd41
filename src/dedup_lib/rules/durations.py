"""Durations as people and Azure write them, read and written in one place.

Read: a ``timedelta``, seconds, ISO 8601 (``PT10M``), shorthand (``10m``, ``1h30m``) or a .NET
TimeSpan (``0:10:00``, ``7.00:00:00``); from Azure's files, only the forms Azure writes
(:func:`parse_azure_window`). Written: the shortest readable form (``10m``, ``1d2h``, ``1.5s``,
``250ms``).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Literal

from dedup_lib.errors import InputError, InputTypeError

_ISO_DURATION = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)
_SHORTHAND = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|hr|d|w)", re.IGNORECASE)
_SHORTHAND_UNITS = {
    "ms": 0.001,
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hr": 3600,
    "d": 86400,
    "w": 604800,
}
_TIMESPAN = re.compile(r"^(?:(?P<d>\d+)[.:])?(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2}(?:\.\d+)?)$")
#: ``str(timedelta)``, as older ``az`` versions print windows of a day or more.
_PY_TIMEDELTA = re.compile(r"^(\d+) days?, (\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)$")


def parse_window(value: timedelta | int | float | str) -> timedelta:
    """Read a window from a timedelta, seconds, ISO 8601 (``PT10M``), shorthand (``10m``,
    ``1h30m``) or a .NET TimeSpan (``0:10:00``, ``7.00:00:00``, as older ``az`` prints)."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise InputTypeError(f"window: expected a duration, got the boolean {value!r}")
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if not isinstance(value, str):
        raise InputTypeError(f"window: expected a timedelta, seconds or a string, got {value!r}")
    text = value.strip()
    found = _iso_or_timespan(text)
    if found is not None:
        return found
    pieces = _SHORTHAND.findall(text)
    if pieces and _SHORTHAND.sub("", text).strip() == "":
        return timedelta(seconds=sum(float(n) * _SHORTHAND_UNITS[u.lower()] for n, u in pieces))
    try:
        return timedelta(seconds=float(text))
    except ValueError:
        raise InputError(
            f"window: cannot read {value!r}; expected an ISO 8601 duration (PT10M, P7D), "
            "shorthand (90s, 10m, 2h, 7d), a TimeSpan (0:10:00) or seconds"
        ) from None


def parse_azure_window(text: str) -> timedelta:
    """Read a window in a form Azure writes it: ISO 8601 (``PT10M``, ``P7D``), a .NET TimeSpan
    (``0:10:00``, ``7.00:00:00``) or Python's ``str(timedelta)`` (``1 day, 0:10:00``) as older
    ``az`` versions print. Unlike :func:`parse_window`, no shorthand or bare seconds: in a
    configuration file those are a mistake, not a window."""
    text = text.strip()
    days = _PY_TIMEDELTA.match(text)
    found = _iso_or_timespan(f"{days[1]}.{days[2]}" if days else text)
    if found is None:
        raise InputError(
            f"window: cannot read {text!r}; expected an ISO 8601 duration (PT10M, P7D), "
            "a TimeSpan (0:10:00, 7.00:00:00) or '1 day, 0:10:00'"
        )
    return found


def _iso_or_timespan(text: str) -> timedelta | None:
    """An ISO 8601 duration or a .NET TimeSpan; ``None`` for any other text."""
    iso = _ISO_DURATION.match(text)
    if iso and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        parts = {k: float(v) for k, v in iso.groupdict().items() if v is not None}
        return timedelta(
            weeks=parts.get("w", 0),
            days=parts.get("d", 0),
            hours=parts.get("h", 0),
            minutes=parts.get("m", 0),
            seconds=parts.get("s", 0),
        )
    span = _TIMESPAN.match(text)
    if span:
        return timedelta(
            days=int(span["d"] or 0),
            hours=int(span["h"]),
            minutes=int(span["m"]),
            seconds=float(span["s"]),
        )
    return None


def format_window(window: timedelta) -> str:
    """Shortest exact form of a window, such as ``10m``, ``1d2h`` or ``1.5s``."""
    micros = window // timedelta(microseconds=1)
    if micros % 1_000_000:
        return f"{micros / 1_000_000:g}s"
    seconds, out = micros // 1_000_000, []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            out.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(out) or "0s"


def format_duration(seconds: float, rounding: Literal["nearest", "up"] = "nearest") -> str:
    """A measured duration, short: ``250ms``, ``4.5s``, then whole seconds from a minute up
    (``1m27s``, ``10m``), rounded to the nearest second or ``up`` (a window that must reach
    at least that far). ``-`` for a missing value; a negative duration keeps its sign."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds < 0:
        return "-" + format_duration(-seconds, rounding)
    if 0 < seconds < 1:
        return f"{seconds * 1000:.3g}ms"
    if float(f"{seconds:.3g}") < 60:
        return f"{float(f'{seconds:.3g}'):g}s"
    whole = math.ceil(seconds) if rounding == "up" else round(seconds)
    return format_window(timedelta(seconds=whole))
