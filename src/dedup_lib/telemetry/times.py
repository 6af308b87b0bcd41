"""Times as telemetry writes them: timestamps, epoch numbers in any unit, ISO 8601 text, and
the "never" sentinels that must not pass for a real time.

Every expression is null where the value does not parse and never throws under ANSI mode.
Each input is referenced only a few times: Spark inlines these expressions into one tree (and
into the quarantine filter), so repeated references would multiply its size. Where a frame is
at hand, :func:`epoch_number` and :func:`time_text` go in columns of their own first:
:func:`parse_time` and :func:`never` then read those instead of matching and casting the
text again for each rule (Spark keeps a costly column that is read several
times in a projection of its own).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import utc_wall_clock

if TYPE_CHECKING:
    from pyspark.sql import Column

#: Possessive quantifiers: a long run of digits that does not end well fails in one pass
#: (with backtracking, a megabyte of digits took hours).
NUMBER = r"^\s*+[+-]?(\d++(\.\d*+)?|\.\d++)([eE][+-]?\d++)?\s*+$"
#: Longer text is no time: it is not matched at all.
_LONGEST_TIME = 64
_ISO_DATE = r"^\s*(?!0000)\d{4}-\d{2}-\d{2}([Tt ]|\s*$)"
_HAS_ZONE = r"\d:\d{2}(:\d{2}(\.\d*)?)?\s*[^\d\s.:]"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_MIN_MICROS = -62_135_596_800_000_000
_MAX_MICROS = 253_402_300_799_999_999

#: .NET ``DateTime.MaxValue`` and ``MinValue`` in whole epoch seconds: what a "never" (or
#: "not set") time becomes when a tool writes it as a number.
MAX_VALUE_SECONDS = 253_402_300_799
MIN_VALUE_SECONDS = -62_135_596_800
_UNITS = {"seconds": 1, "milliseconds": 10**3, "microseconds": 10**6, "nanoseconds": 10**9}


def epoch_number(value: Column, dtype: T.DataType) -> Column:
    """``value`` as a decimal where it is a number (or text that is one), else null: what
    :func:`parse_time` and :func:`never` read an epoch time from."""
    return _decimal(value, dtype)


def time_text(value: Column) -> Column:
    """Text ``value`` as :func:`parse_time` reads ISO 8601 from it (null when too long to be
    a time)."""
    return _short(value)


def _decimal(value: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, T.NumericType):
        return value.try_cast("decimal(38,9)")
    return F.when(_short(value).rlike(NUMBER), value.try_cast("decimal(38,9)"))


def _short(value: Column) -> Column:
    return F.when(F.length(value) <= _LONGEST_TIME, value)


def from_epoch(value: Column) -> Column:
    """Epoch seconds, milliseconds, microseconds or nanoseconds (a decimal), told apart by
    magnitude; null outside the years 1 to 9999."""
    size = F.abs(value)
    scale = (
        F.when(size < 10**11, F.lit(Decimal(10**6)))
        .when(size < 10**14, F.lit(Decimal(1000)))
        .when(size < 10**17, F.lit(Decimal(1)))
        .otherwise(F.lit(Decimal("0.001")))
    )
    micros = F.round(value * scale)
    return F.when(
        micros.between(_MIN_MICROS, _MAX_MICROS), F.timestamp_micros(micros.try_cast("long"))
    )


def parse_time(
    value: Column, dtype: T.DataType, number: Column | None = None, text: Column | None = None
) -> Column:
    """A UTC timestamp from a timestamp, an epoch number, or text: a number (epoch) or ISO 8601
    with a 4-digit year (no offset = UTC). ``number`` and ``text`` are :func:`epoch_number`
    and :func:`time_text` of ``value`` when already computed."""
    if number is None:
        number = _decimal(value, dtype)
    if isinstance(dtype, T.TimestampType):
        return value
    if isinstance(dtype, T.TimestampNTZType):
        return utc_wall_clock(value)
    if isinstance(dtype, T.NullType):
        return F.lit(None).cast("timestamp")
    if isinstance(dtype, T.NumericType):
        return from_epoch(number)
    iso = time_text(value) if text is None else text
    return F.coalesce(
        from_epoch(number),
        F.when(
            iso.rlike(_ISO_DATE),
            F.when(iso.rlike(_HAS_ZONE), _cast_any_case(iso, "timestamp")).otherwise(
                utc_wall_clock(_cast_any_case(iso, "timestamp_ntz"))
            ),
        ),
    )


def _cast_any_case(text: Column, to: str) -> Column:
    """``text`` cast as written, else with its ASCII letters in upper case: Spark reads only
    ``T`` and ``Z`` and zone names in upper case (``2024-01-01t10:00z``, ``... utc``), while
    a region (``America/Toronto``) must keep its case.

    Not ``upper``: Spark maps case with ICU, whose first use costs a cold JVM a second of class
    initialisation; and the second cast runs only where the first fails."""
    return F.coalesce(text.try_cast(to), F.translate(text, _LOWER, _LOWER.upper()).try_cast(to))


def never(value: Column, dtype: T.DataType, parsed: Column, number: Column | None = None) -> Column:
    """Why a time is a "never" sentinel rather than a time (null when it is a time).

    Sentinels: .NET ``DateTime.MaxValue`` or ``MinValue`` written as epoch seconds,
    milliseconds, microseconds or nanoseconds (read by magnitude alone, MaxValue in seconds
    would land in 1978), the epoch itself (``0``, an unset number), ``Int64.MaxValue`` (or
    ``MinValue``, as ``long.MaxValue`` ticks or nanoseconds), and the first or last day
    a timestamp can hold (``0001-01-01``, ``9999-12-31``) however written. ``number`` is
    :func:`epoch_number` of ``value`` when already computed."""
    rules: list[tuple[Column, str]] = []
    if isinstance(dtype, T.NumericType | T.StringType):
        if number is None:
            number = _decimal(value, dtype)
        for unit, size in _UNITS.items():
            whole = F.floor(number / F.lit(Decimal(size)))
            rules.append(
                (
                    whole.isin(MAX_VALUE_SECONDS, MAX_VALUE_SECONDS + 1),
                    f"DateTime.MaxValue in {unit}",
                )
            )
            rules.append((whole == MIN_VALUE_SECONDS, f"DateTime.MinValue in {unit}"))
        rules.append((number == 0, "the epoch itself (0), an unset time"))
        rules.append((number.isin(2**63 - 1, -(2**63)), "Int64.MaxValue or MinValue"))
    day = F.to_date(parsed)
    rules.append((day >= F.lit("9999-12-31").cast("date"), "the last day a time can hold"))
    rules.append((day <= F.lit("0001-01-01").cast("date"), "the first day a time can hold"))
    first, *rest = rules
    reason = F.when(first[0], F.lit(first[1]))
    for condition, text in rest:
        reason = reason.when(condition, F.lit(text))
    return reason
