"""The conventions of the small per-entity tables: how a missing entity and the total row are
named, and the total row itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import functions as F

from dedup_lib.analysis import ALL_ENTITIES as ALL_ENTITIES
from dedup_lib.analysis import NO_ENTITY as NO_ENTITY
from dedup_lib.errors import InputError, excerpt
from dedup_lib.rules.durations import parse_window

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def entity_column(df: DataFrame) -> Column:
    """``entity`` as text, ``(none)`` where a send names no entity or the data has no column."""
    if "entity" not in df.columns:
        return F.lit(NO_ENTITY).alias("entity")
    return F.coalesce(F.col("entity").cast("string"), F.lit(NO_ENTITY)).alias("entity")


def with_total(table: pd.DataFrame, counts: list[str]) -> pd.DataFrame:
    """Entities in name order, counts as int64, and an ``(all)`` row when there are several."""
    table = table.sort_values("entity", kind="stable")
    table[counts] = table[counts].fillna(0).astype("int64")
    if len(table) != 1:
        total = table[counts].sum().to_frame().T
        total.insert(0, "entity", ALL_ENTITIES)
        table = pd.concat([table, total], ignore_index=True)
    return table.reset_index(drop=True)


def bucket_seconds(bucket: str) -> int:
    """A time bucket in whole seconds: at least one, and no longer than a timestamp spans
    (a bucket of ``0`` would reach Spark as a division by zero)."""
    try:
        seconds = int(parse_window(bucket).total_seconds())
    except InputError as exc:
        raise InputError("bucket: " + str(exc).removeprefix("window: ")) from exc
    if seconds < 1:
        raise InputError(f"bucket: expected at least a second, got {excerpt(bucket)}")
    return seconds
