"""Part of a result: one entity and a time range, on a Spark frame or on a small pandas table.

Verdicts must be computed over all the data first, as the broker saw it; this only chooses
what to look at. One function for both, so the explorer, the postmortem and a user's own
cell cut the same rows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import pandas as pd
from pyspark.sql import functions as F

from dedup_lib.analysis.totals import ALL_ENTITIES
from dedup_lib.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Frame = TypeVar("Frame", "DataFrame", pd.DataFrame)


def parse_moment(value: str | datetime | pd.Timestamp, name: str) -> datetime:
    """A point in time, UTC when it carries no offset (ISO 8601 text, a datetime, a Timestamp)."""
    if isinstance(value, datetime):
        found = value
    else:
        try:
            found = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                f"{name}: cannot read {value!r}; expected ISO 8601, e.g. 2026-11-03T21:00"
            ) from None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def narrow(
    table: Frame,
    entity: str | None = ALL_ENTITIES,
    start: str | datetime | None = None,
    end: str | datetime | None = None,
    *,
    time: str = "send_time",
) -> Frame:
    """Rows of one ``entity`` (``(all)`` or None: every entity) whose ``time`` column lies in
    ``[start, end]`` (ISO 8601, UTC when no offset is given; None: open). Takes a Spark frame
    (a result, missed resends, collisions) or a pandas table (the explorer's views, whose
    time column is ``time``); rows without a time stay only when no range is given. With
    nothing to cut, ``table`` itself."""
    if entity not in (None, ALL_ENTITIES) and "entity" not in table.columns:
        raise InputError(f"entity {entity!r}: the data has no entity column")
    low = None if start is None else parse_moment(start, "start")
    high = None if end is None else parse_moment(end, "end")
    if entity in (None, ALL_ENTITIES) and low is None and high is None:
        return table
    if isinstance(table, pd.DataFrame):
        keep = pd.Series(True, index=table.index)
        if entity not in (None, ALL_ENTITIES):
            keep &= table["entity"] == entity
        if low is not None and time in table:
            keep &= table[time] >= pd.Timestamp(low)
        if high is not None and time in table:
            keep &= table[time] <= pd.Timestamp(high)
        return table[keep]
    if entity not in (None, ALL_ENTITIES):
        table = table.where(F.col("entity") == entity)
    if low is not None:
        table = table.where(F.col(time) >= F.lit(low))
    if high is not None:
        table = table.where(F.col(time) <= F.lit(high))
    return table
