"""Why a row of telemetry cannot take part in the replay: each row given its reason, its times
parsed, with a ``reason`` (null when valid) that the quarantine keeps.

The first reason that applies is given: a malformed line, a missing, "never" or unparseable
send time, an unparseable scheduled time. A "never" scheduled time means not scheduled: it
becomes null. Reasons quote the value at most :data:`EXCERPT` characters long; a reason's
category is its text up to the first ``:``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import CORRUPT, NEVER, NUMBER, PARSED, TEXT, column
from dedup_lib.telemetry.schema import TIME_COLUMNS
from dedup_lib.telemetry.times import epoch_number, never, parse_time, time_text

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

REASON = "reason"
_MALFORMED = {"csv": "malformed CSV line", "json": "malformed JSON line"}
#: The characters of a value that a reason or a message quotes.
EXCERPT = 60


def category(reason: Column) -> Column:
    """A reason's category: the reason up to its first ':'."""
    return F.substring_index(reason, ":", 1)


def categories(fmt: str) -> tuple[str, ...]:
    """Every reason category :func:`with_reasons` can give, for files of ``fmt``."""
    return (
        _MALFORMED.get(fmt, f"malformed {fmt} line"),
        "missing send_time",
        "send_time is a 'never' sentinel",
        "unparseable send_time",
        "unparseable scheduled_enqueue_time",
    )


def _is_missing(value: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, T.StringType):
        return value.isNull() | value.rlike(r"^\s*$")
    return value.isNull()


def _cut(value: Column) -> Column:
    """A value as a reason quotes it: as text, at most :data:`EXCERPT` characters then
    ``...``."""
    text = value.cast("string")
    cut = F.when(F.length(text) > EXCERPT, F.concat(F.substring(text, 1, EXCERPT), F.lit("...")))
    return F.coalesce(cut, text)


def _unparseable(name: str, value: Column) -> Column:
    return F.concat(F.lit(f"unparseable {name}: '"), _cut(value), F.lit("'"))


def _reason(
    fields: dict[str, T.DataType], fmt: str, data_columns: list[str], has_corrupt: bool
) -> Column:
    """Why a row is quarantined (null when it is valid): the first reason that applies."""
    send = column("send_time")
    rules: list[tuple[Column, Column]] = []
    if has_corrupt:
        malformed = _MALFORMED.get(fmt, f"malformed {fmt} line")
        rules.append((column(CORRUPT).isNotNull(), F.lit(malformed)))
    if fmt == "csv":
        # With column pruning, Spark flags a CSV line as malformed only when the query reads
        # every column; so the reason reads them all (a row of empty cells has no send_time).
        everything = F.coalesce(*(column(c).cast("string") for c in data_columns))
        rules.append((everything.isNull(), F.lit("missing send_time")))
    rules.append((_is_missing(send, fields["send_time"]), F.lit("missing send_time")))
    rules.append(
        (
            column(NEVER + "send_time").isNotNull(),
            F.concat(
                F.lit("send_time is a 'never' sentinel: "),
                column(NEVER + "send_time"),
                F.lit(" ('"),
                _cut(send),
                F.lit("')"),
            ),
        )
    )
    rules.append((column(PARSED + "send_time").isNull(), _unparseable("send_time", send)))
    if "scheduled_enqueue_time" in fields:
        scheduled = column("scheduled_enqueue_time")
        rules.append(
            (
                ~_is_missing(scheduled, fields["scheduled_enqueue_time"])
                & column(NEVER + "scheduled_enqueue_time").isNull()
                & column(PARSED + "scheduled_enqueue_time").isNull(),
                _unparseable("scheduled_enqueue_time", scheduled),
            )
        )
    reason = F.when(*rules[0])
    for condition, value in rules[1:]:
        reason = reason.when(condition, value)
    return reason


def with_reasons(
    raw: DataFrame,
    fields: dict[str, T.DataType],
    fmt: str,
    data_columns: list[str],
    has_corrupt: bool,
) -> DataFrame:
    """``raw`` with its times parsed, "never" sentinels named, and each row's ``reason``
    (null when valid). A "never" scheduled time means not scheduled: it becomes null."""
    times = [c for c in TIME_COLUMNS if c in fields]
    numeric = [c for c in times if isinstance(fields[c], T.NumericType | T.StringType)]
    textual = [c for c in times if isinstance(fields[c], T.StringType)]
    staged = raw.select(
        "*",
        *(epoch_number(column(c), fields[c]).alias(NUMBER + c) for c in numeric),
        *(time_text(column(c)).alias(TEXT + c) for c in textual),
    )

    def number(name: str) -> Column | None:
        return column(NUMBER + name) if name in numeric else None

    def text(name: str) -> Column | None:
        return column(TEXT + name) if name in textual else None

    parsed = staged.select(
        "*",
        *(parse_time(column(c), fields[c], number(c), text(c)).alias(PARSED + c) for c in times),
    )
    sentinels = parsed.select(
        "*",
        *(
            never(column(c), fields[c], column(PARSED + c), number(c)).alias(NEVER + c)
            for c in times
        ),
    )

    def cleared(name: str) -> Column:
        parsed_time = column(PARSED + name)
        if name == "scheduled_enqueue_time":
            parsed_time = F.when(column(NEVER + name).isNull(), parsed_time)
        return parsed_time.alias(PARSED + name)

    return sentinels.select(
        *(column(c) for c in raw.columns),
        *(cleared(c) for c in times),
        _reason(fields, fmt, data_columns, has_corrupt).alias(REASON),
    )
