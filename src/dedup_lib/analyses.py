"""Small tables computed from a ``detect_duplicates`` result, for people and charts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F

from dedup_lib.policy import ACCEPTED, DUPLICATE, NO_MESSAGE_ID_WARNING, REJECTED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ALL_ENTITIES = "(all)"
NO_ENTITY = "(none)"
SUMMARY_COLUMNS = (
    "entity",
    "sends",
    "accepted",
    "duplicates",
    "rejected",
    "without_message_id",
    "share_caught",
)


def summarize(result: DataFrame) -> pd.DataFrame:
    """Per entity, plus a total row ``(all)``: sends, accepted, duplicates, rejected, sends
    without MessageId, and ``share_caught``, the share of judged sends (accepted or duplicate)
    that the broker dropped as duplicates. One Spark job; the table is small."""
    missing = [c for c in ("verdict", "reason") if c not in result.columns]
    if missing:
        raise ValueError(
            f"summarize: expected a detect_duplicates result, but column(s) {', '.join(missing)} "
            "are missing"
        )
    entity = (
        F.coalesce(F.col("entity").cast("string"), F.lit(NO_ENTITY))
        if "entity" in result.columns
        else F.lit(NO_ENTITY)
    )

    def count_where(condition: Column) -> Column:
        return F.count(F.when(condition, True))

    table = (
        result.groupBy(entity.alias("entity"))
        .agg(
            F.count(F.lit(1)).alias("sends"),
            count_where(F.col("verdict") == ACCEPTED).alias("accepted"),
            count_where(F.col("verdict") == DUPLICATE).alias("duplicates"),
            count_where(F.col("verdict") == REJECTED).alias("rejected"),
            count_where(F.col("reason") == NO_MESSAGE_ID_WARNING).alias("without_message_id"),
        )
        .toPandas()
        .sort_values("entity", kind="stable")
    )
    counts = ["sends", "accepted", "duplicates", "rejected", "without_message_id"]
    table[counts] = table[counts].astype("int64")
    if len(table) != 1:
        total = table[counts].sum().to_frame().T
        total.insert(0, "entity", ALL_ENTITIES)
        table = pd.concat([table, total], ignore_index=True)
    judged = table["accepted"] + table["duplicates"]
    table["share_caught"] = (table["duplicates"] / judged.where(judged > 0)).astype("float64")
    return table.reset_index(drop=True)[list(SUMMARY_COLUMNS)]
