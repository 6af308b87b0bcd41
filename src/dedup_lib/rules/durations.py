"""Durations as people and Azure write them, read and written in one place.

Read: a ``timedelta``, seconds, ISO 8601 (``PT10M``), shorthand (``10m``, ``1h30m``) or a .NET
TimeSpan (``0:10:00``, ``7.00:00:00``); from Azure's files, only the forms Azure writes
(:func:`parse_azure_window`). Written: the shortest readable form (``10m``, ``1d2h``, ``1.5s``,
``250ms``). Whatever the form, a value that is not a finite, non-negative duration a .NET
TimeSpan can hold is an :class:`~dedup_lib.errors.InputError` that quotes it.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Literal

from dedup_lib.errors import InputError, InputTypeError, excerpt

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
_TIMESPAN = re.compile(
    r"^(?:(?P<d>\d+)[.:])?(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2})(?:\.(?P<f>\d+))?$"
)
#: ``str(timedelta)``, as older ``az`` versions print windows of a day or more.
_PY_TIMEDELTA = re.compile(r"^(\d+) days?, (\d{1,2}:\d{2}:\d{2}(?:\.\d+)?)$")

#: The longest window any of these forms can hold: .NET's ``TimeSpan.MaxValue`` (2**63 - 1
#: ticks of 100 ns, 10675199 days), cut to whole microseconds. Service Bus keeps its windows
#: as TimeSpans, and a window this long still adds to any timestamp in 64-bit microseconds.
MAX_WINDOW = timedelta(microseconds=(2**63 - 1) // 10)
#: No window in any form needs more characters; longer text is refused before any pattern
#: looks at it (the shorthand pattern takes quadratic time on a long run of digits).
MAX_WINDOW_TEXT = 100
_SERVICE_MAX = "7 days (P7D) is the longest window Service Bus allows"
_FORMS = (
    "expected an ISO 8601 duration (PT10M, P7D), shorthand (90s, 10m, 2h, 7d), "
    "a TimeSpan (0:10:00) or seconds"
)
_AZURE_FORMS = (
    "expected an ISO 8601 duration (PT10M, P7D), a TimeSpan (0:10:00, 7.00:00:00) "
    "or '1 day, 0:10:00'"
)


def parse_window(value: timedelta | int | float | str) -> timedelta:
    """Read a window from a timedelta, seconds, ISO 8601 (``PT10M``), shorthand (``10m``,
    ``1h30m``) or a .NET TimeSpan (``0:10:00``, ``7.00:00:00``, as older ``az`` prints).

    Every window must be a finite, non-negative duration of at most :data:`MAX_WINDOW` (what
    a .NET TimeSpan holds, about 29,000 years), whatever bounds the caller applies later:
    NaN, infinity, negative values and anything longer raise :class:`InputError` naming
    the value, as does text longer than :data:`MAX_WINDOW_TEXT` characters.
    """
    if isinstance(value, timedelta):
        return _checked(value, str(value))
    if isinstance(value, bool):
        raise InputTypeError(f"window: expected a duration, got the boolean {value!r}")
    if isinstance(value, int) and value.bit_length() > 128:
        digits = int(value.bit_length() * math.log10(2)) + 1
        sign = "a negative" if value < 0 else "an"
        return _from_seconds(value, f"{sign} integer of ~{digits:,} digits")
    if isinstance(value, int | float):
        return _from_seconds(value, value)
    if not isinstance(value, str):
        raise InputTypeError(
            f"window: expected a timedelta, seconds or a string, got {type(value).__name__} "
            f"{excerpt(value)}"
        )
    text = _short_text(value, _FORMS)
    found = _iso_or_timespan(text, value)
    if found is not None:
        return found
    pieces = _SHORTHAND.findall(text)
    if pieces and _SHORTHAND.sub("", text).strip() == "":
        return _from_seconds(
            math.fsum(float(n) * _SHORTHAND_UNITS[u.lower()] for n, u in pieces), value
        )
    try:
        seconds = float(text)
    except ValueError:
        raise InputError(f"window: cannot read {excerpt(value)}; {_FORMS}") from None
    return _from_seconds(seconds, value)


def parse_azure_window(text: str) -> timedelta:
    """Read a window in a form Azure writes it: ISO 8601 (``PT10M``, ``P7D``), a .NET TimeSpan
    (``0:10:00``, ``7.00:00:00``) or Python's ``str(timedelta)`` (``1 day, 0:10:00``) as older
    ``az`` versions print. Unlike :func:`parse_window`, no shorthand or bare seconds: in a
    configuration file those are a mistake, not a window. The same limits apply."""
    if not isinstance(text, str):
        raise InputTypeError(
            f"window: expected text, got {type(text).__name__} {excerpt(text)}; {_AZURE_FORMS}"
        )
    stripped = _short_text(text, _AZURE_FORMS)
    days = _PY_TIMEDELTA.match(stripped)
    found = _iso_or_timespan(f"{days[1]}.{days[2]}" if days else stripped, text)
    if found is None:
        raise InputError(f"window: cannot read {excerpt(text)}; {_AZURE_FORMS}")
    return found


def _short_text(value: str, forms: str) -> str:
    """``value`` without surrounding blanks, refused when longer than any window's text."""
    text = value.strip()
    if len(text) > MAX_WINDOW_TEXT:
        raise InputError(
            f"window: cannot read {excerpt(value)}: longer than any window "
            f"({MAX_WINDOW_TEXT} characters at most); {forms}"
        )
    return text


def _from_seconds(seconds: float, shown: object) -> timedelta:
    """A window of ``seconds``, refused when not a number, negative or too long."""
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise InputError(f"window: {excerpt(shown)} is not a finite number of seconds; {_FORMS}")
    if seconds < 0:
        raise InputError(f"window: {excerpt(shown)} is negative; expected a positive duration")
    if seconds > MAX_WINDOW.total_seconds():
        raise _too_long(shown)
    return _checked(timedelta(seconds=seconds), shown)


def _checked(window: timedelta, shown: object) -> timedelta:
    """``window`` itself, refused when negative or longer than :data:`MAX_WINDOW`."""
    if window < timedelta(0):
        raise InputError(f"window: {excerpt(shown)} is negative; expected a positive duration")
    if window > MAX_WINDOW:
        raise _too_long(shown)
    return window


def _too_long(shown: object) -> InputError:
    return InputError(
        f"window: {excerpt(shown)} is too long: at most {MAX_WINDOW.days:,} days (the longest "
        f".NET TimeSpan) for any window; {_SERVICE_MAX}"
    )


def _iso_or_timespan(text: str, shown: object) -> timedelta | None:
    """An ISO 8601 duration or a .NET TimeSpan; ``None`` for any other text. ``shown`` is
    the value as the user gave it, for messages.

    A TimeSpan follows ``TimeSpan.Parse``'s documented ranges (learn.microsoft.com,
    "System.TimeSpan.Parse method": ``[d.]hh:mm[:ss[.ff]]`` with days 0 to 10675199, hours
    0 to 23, minutes and seconds 0 to 59, a fraction of one to seven digits; out of range
    is an OverflowException). ``0:99:99`` is refused rather than read as 1:40:39, and
    ``25:00:00`` is refused too: Azure writes a day or more as ``1.01:00:00``, and .NET
    itself would not read it as 25 hours (it falls back to ``d.hh:mm`` and reads 25 days).
    """
    iso = _ISO_DURATION.match(text)
    if iso and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        parts = {k: float(v) for k, v in iso.groupdict().items() if v is not None}
        seconds = math.fsum(parts[k] * _SHORTHAND_UNITS[k] for k in parts)
        if seconds > MAX_WINDOW.total_seconds():
            raise _too_long(shown)
        return _checked(
            timedelta(
                weeks=parts.get("w", 0),
                days=parts.get("d", 0),
                hours=parts.get("h", 0),
                minutes=parts.get("m", 0),
                seconds=parts.get("s", 0),
            ),
            shown,
        )
    span = _TIMESPAN.match(text)
    if span is None:
        return None
    days, hours, minutes, seconds = (int(span[k] or 0) for k in ("d", "h", "m", "s"))
    if days > MAX_WINDOW.days or hours > 23 or minutes > 59 or seconds > 59:
        raise InputError(
            f"window: {excerpt(shown)} is not a TimeSpan: days must be 0-{MAX_WINDOW.days}, "
            "hours 0-23, minutes 0-59, seconds 0-59 (a day or more is written d.hh:mm:ss, "
            "such as 1.01:00:00)"
        )
    fraction = span["f"] or ""
    if len(fraction) > 7:
        raise InputError(
            f"window: {excerpt(shown)} is not a TimeSpan: a fraction of a second has at "
            "most 7 digits (100 ns)"
        )
    return _checked(
        timedelta(
            days=days,
            hours=hours,
            minutes=minutes,
            seconds=seconds,
            microseconds=(int(fraction.ljust(7, "0")) + 5) // 10,
        ),
        shown,
    )


def format_window(window: timedelta, form: Literal["short", "iso", "words"] = "short") -> str:
    """A window, exactly: ``short`` is the shortest form (``10m``, ``1d2h``, ``1.5s``), ``iso``
    how Azure's settings write it (``PT13H30M``, ``P1DT2H``), ``words`` for a sentence
    (``13 hours 30 minutes``). A negative one keeps its sign (``-5s``), so that an error about
    it shows what was given."""
    if window < timedelta(0):
        return "-" + format_window(-window, form)
    micros = window // timedelta(microseconds=1)
    seconds, fraction = divmod(micros, 1_000_000)
    if form == "short" and fraction:
        return f"{micros / 1_000_000:g}s"
    parts: dict[str, int] = {}
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts[unit] = seconds // size
            seconds %= size
    if form == "iso":
        return _iso(parts, fraction)
    if form == "words":
        return _words(parts, fraction)
    return "".join(f"{n}{unit}" for unit, n in parts.items()) or "0s"


def _iso(parts: dict[str, int], fraction: int) -> str:
    """ISO 8601 duration from whole days, hours, minutes, seconds and microseconds."""
    seconds = parts.get("s", 0) + fraction / 1_000_000
    clock = "".join(f"{parts[u]}{u.upper()}" for u in ("h", "m") if u in parts)
    if seconds:
        clock += f"{seconds:.6f}".rstrip("0").rstrip(".") + "S"
    days = f"{parts['d']}D" if "d" in parts else ""
    if not clock:
        return f"P{days}" if days else "PT0S"
    return f"P{days}T{clock}"


_UNIT_WORDS = {"d": "day", "h": "hour", "m": "minute", "s": "second"}


def _words(parts: dict[str, int], fraction: int) -> str:
    """``1 day 2 hours``, ``1.5 seconds``: the units spelt out."""
    if fraction:
        parts = {**parts, "s": parts.get("s", 0)}
    words = []
    for unit, n in parts.items():
        value = f"{n + fraction / 1_000_000:g}" if unit == "s" and fraction else str(n)
        words.append(f"{value} {_UNIT_WORDS[unit]}{'' if value == '1' else 's'}")
    return " ".join(words) or "0 seconds"


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
