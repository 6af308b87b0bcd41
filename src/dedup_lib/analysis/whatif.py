"""What other brokers' rules would have done with the same sends, beside Service Bus's.

- **By content** (Amazon SQS FIFO's content-based deduplication): the key is the content
  instead of the MessageId, so a fresh id per retry no longer defeats detection and a reused
  id no longer destroys different messages.
- **By count** (ActiveMQ Artemis): the history holds the last N accepted ids instead of a time
  window, so its memory is fixed and its reach in time depends on the traffic.

docs/rules.md, section 7, lists these neighbours.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import functions as F

from dedup_lib.analysis.diagnostics import content_key
from dedup_lib.analysis.summaries import has_ground_truth, summary_counts, truth_counts
from dedup_lib.analysis.totals import entity_column, with_total
from dedup_lib.columns import count_where
from dedup_lib.replay.by_count import by_counts
from dedup_lib.replay.engine import detect_duplicates
from dedup_lib.replay.sql_rules import OUTPUT_COLUMNS
from dedup_lib.rules.policy import DUPLICATE, MAX_PROPERTY_LENGTH, Policies
from dedup_lib.spark import to_pandas

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CONTENT_PREFIX = "content_"
#: Artemis's default id cache size.
ARTEMIS_CACHE = 20_000


def by_content(
    df: DataFrame,
    policy: Policies | None = None,
    content: str | Sequence[str] | None = None,
) -> DataFrame:
    """Every send judged twice with the same window and mode: by its MessageId (the usual
    ``verdict``, ``reason``, ``dedup_key``, ``original_*`` columns) and by its content
    (``content_verdict``, ``content_reason``, ``content_original_send_time``,
    ``content_original_event_id``). Content is ``payload_hash`` by default, or the columns
    named (see :func:`dedup_lib.analysis.diagnostics.content_key`); a send without content is judged
    like one without MessageId. Sends refused for their MessageId stay refused."""
    by_id = detect_duplicates(df, policy)
    saved = {c: f"__byid_{c}" for c in (*OUTPUT_COLUMNS, "message_id")}
    mid = F.col("message_id").cast("string")
    content_id = F.when(F.length(mid) > MAX_PROPERTY_LENGTH, mid).otherwise(
        content_key(df, content)
    )
    keyed = (
        by_id.withColumn("__content_id", content_id)
        .withColumnsRenamed(saved)
        .withColumnRenamed("__content_id", "message_id")
    )
    again = detect_duplicates(keyed, policy)
    return again.select(
        *(F.col(saved.get(c, c)).alias(c) for c in df.columns),
        *(F.col(saved[c]).alias(c) for c in OUTPUT_COLUMNS if c not in df.columns),
        *(
            F.col(c).alias(CONTENT_PREFIX + c)
            for c in ("verdict", "reason", "original_send_time", "original_event_id")
        ),
    )


KEY_COMPARISON_COLUMNS = (
    "entity",
    "sends",
    "dropped_by_id",
    "dropped_by_content",
    "dropped_by_both",
    "only_by_id",
    "only_by_content",
)


def compare_keys(result: DataFrame) -> pd.DataFrame:
    """:func:`by_content`'s two verdicts side by side, per entity plus ``(all)``: sends dropped
    by MessageId, by content, by both, and by one only. Dropped by id only are mostly
    collisions (different messages under one id); dropped by content only are resends under a
    new id, which Service Bus lets through."""
    by_id = F.col("verdict") == DUPLICATE
    by_content_ = F.col(CONTENT_PREFIX + "verdict") == DUPLICATE
    counted = to_pandas(
        result.groupBy(entity_column(result)).agg(
            F.count(F.lit(1)).alias("sends"),
            count_where(by_id).alias("dropped_by_id"),
            count_where(by_content_).alias("dropped_by_content"),
            count_where(by_id & by_content_).alias("dropped_by_both"),
            count_where(by_id & ~by_content_).alias("only_by_id"),
            count_where(~by_id & by_content_).alias("only_by_content"),
        )
    )
    return with_total(counted, list(KEY_COMPARISON_COLUMNS[1:]))[list(KEY_COMPARISON_COLUMNS)]


def count_sweep(
    df: DataFrame,
    capacities: Sequence[int] = (1_000, 5_000, ARTEMIS_CACHE, 100_000),
    partitioning: bool = False,
) -> pd.DataFrame:
    """The id-count history at each capacity, over all entities: ``capacity``, the ``ids_held``
    at the peak (the capacity, or fewer where fewer ids were ever accepted in an entity,
    summed over entities), ``duplicates`` dropped, and with ground truth ``resends_caught``,
    ``extra_deliveries`` and ``messages_lost``. Compare with the time windows' peak ids held
    in :meth:`dedup_lib.ReplayCache.sweep`. One ordering of the sends and one pass of the
    kernel for every capacity (:func:`dedup_lib.replay.by_count.by_counts`), held while all
    capacities are counted in one job (two with ground truth)."""
    answers = by_counts(df, capacities, partitioning)
    judged = answers.judged.persist()
    try:
        stacked = functools.reduce(
            lambda one, other: one.unionByName(other),
            (answers.result(c).withColumn(_CAPACITY, F.lit(c)) for c in answers.capacities),
        )
        counts = summary_counts(stacked, _CAPACITY)
        truth = truth_counts(stacked, _CAPACITY) if has_ground_truth(stacked) else None
    finally:
        judged.unpersist()
    return pd.DataFrame([_count_row(counts, truth, c) for c in answers.capacities])


#: Which capacity a row of :func:`count_sweep`'s stacked results was judged at.
_CAPACITY = "__dedup_capacity"


def _count_row(
    counts: pd.DataFrame, truth: pd.DataFrame | None, capacity: int
) -> dict[str, object]:
    """One capacity's row of :func:`count_sweep`, from its counts per entity."""
    entities = counts[counts[_CAPACITY] == capacity]
    row: dict[str, object] = {
        "capacity": capacity,
        "ids_held": int(
            (entities["accepted"] - entities["without_message_id"]).clip(upper=capacity).sum()
        ),
        "duplicates": int(entities["duplicates"].sum()),
    }
    if truth is not None:
        totals = truth[truth[_CAPACITY] == capacity]
        for name in ("resends_caught", "extra_deliveries", "messages_lost"):
            row[name] = int(totals[name].sum())
    return row
