"""Spark column expressions every layer uses: a column by its exact name, a wall clock read as
UTC, a conditional count."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def column(name: str) -> Column:
    """A column by its exact name: ``payload.v`` is that column, not field ``v`` of a struct."""
    return F.col("`" + name.replace("`", "``") + "`")


def utc_wall_clock(value: Column) -> Column:
    """A ``timestamp_ntz`` (a wall clock without zone) read as UTC, whatever the session time
    zone; null where it does not parse."""
    return F.concat(value.cast("string"), F.lit("Z")).try_cast("timestamp")


def count_where(condition: Column) -> Column:
    """How many rows of a group meet ``condition`` (null counts as not)."""
    return F.count(F.when(condition, True))
