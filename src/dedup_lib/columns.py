"""Spark column expressions every layer uses: a column by its exact name, a wall clock read as
UTC, a conditional count; and Spark's ``xxhash64`` of a text, computed on the driver."""

from __future__ import annotations

import xxhash
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


def spark_xxhash64(text: str) -> int:
    """Spark's ``xxhash64`` of a string (XXH64 of its UTF-8 bytes, seed 42, as a signed long),
    without a Spark job: a collect of even a one-row local table is a job's planning."""
    value = xxhash.xxh64_intdigest(text.encode("utf-8"), seed=42)
    return value - (1 << 64) if value >= 1 << 63 else value
