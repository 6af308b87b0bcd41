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
from dedup_lib.columns import CAPACITY, count_where
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
    """Every send judged twice with the same window and mode: by its MessageId and by its
    content, as a broker that keyed on content would (SQS-style content deduplication).

    Parameters
    ----------
    df : DataFrame
        Sends (``LoadedTelemetry.valid``).
    policy : DedupPolicy or Mapping[str, DedupPolicy | None], optional
        As :func:`dedup_lib.detect_duplicates` takes it.
    content : str or sequence of str, optional
        The column(s) of a send's content; default ``payload_hash`` (see
        :func:`dedup_lib.analysis.diagnostics.content_key`). A send without content is
        judged like one without MessageId.

    Returns
    -------
    DataFrame
        Every input row once; sends refused for their MessageId stay refused:

        - the input's other columns
        - ``verdict``: by MessageId, as :func:`dedup_lib.detect_duplicates` gives it, and
          so the next four
        - ``reason``
        - ``dedup_key``
        - ``original_send_time``
        - ``original_event_id``
        - ``content_verdict``: by content, and so the next three
        - ``content_reason``
        - ``content_original_send_time``
        - ``content_original_event_id``

    Examples
    --------
    A retry, a resend under a new MessageId (3) and a new message under a reused one (4):

    >>> from datetime import datetime, timezone
    >>> from dedup_lib import DedupPolicy, by_content, get_spark
    >>> def at(minute, second=0):
    ...     return datetime(2026, 11, 3, 20, minute, second, tzinfo=timezone.utc)
    >>> sends = get_spark().createDataFrame(
    ...     [(1, "orders", "order-1", at(0), "a"), (2, "orders", "order-1", at(0, 30), "a"),
    ...      (3, "orders", "order-2", at(5), "a"), (4, "orders", "order-1", at(6), "b")],
    ...     "event_id long, entity string, message_id string, send_time timestamp, "
    ...     "payload_hash string")
    >>> judged = by_content(sends, DedupPolicy("PT10M"))
    >>> judged.orderBy("event_id").select("event_id", "verdict", "content_verdict").show()
    +--------+---------+---------------+
    |event_id|  verdict|content_verdict|
    +--------+---------+---------------+
    |       1| accepted|       accepted|
    |       2|duplicate|      duplicate|
    |       3| accepted|      duplicate|
    |       4|duplicate|       accepted|
    +--------+---------+---------------+
    <BLANKLINE>
    """
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
    """What an id-count history (ActiveMQ Artemis style: the last N ids per entity) would
    have caught, at each capacity.

    One ordering of the sends and one pass of the kernel for every capacity
    (:func:`dedup_lib.replay.by_count.by_counts`), held while all capacities are counted in
    one job (two with ground truth). Compare with the time windows' peak ids held in
    :meth:`dedup_lib.ReplayCache.sweep`.

    Parameters
    ----------
    df : DataFrame
        Sends (``LoadedTelemetry.valid``).
    capacities : sequence of int, default (1000, 5000, 20000, 100000)
        The numbers of ids held per entity to try.
    partitioning : bool, default False
        Whether the key is the partition key and the MessageId.

    Returns
    -------
    pandas.DataFrame
        One row per capacity:

        - ``capacity``
        - ``ids_held``: at the peak, summed over entities
        - ``duplicates``: dropped
        - ``resends_caught``: with ground truth only, as the next two
        - ``extra_deliveries``
        - ``messages_lost``

    Examples
    --------
    ``order-1`` sent again after ``order-2``: a history of one id has forgotten it, one
    of two has not:

    >>> from datetime import datetime, timezone
    >>> from dedup_lib import count_sweep, get_spark
    >>> def at(minute):
    ...     return datetime(2026, 11, 3, 20, minute, tzinfo=timezone.utc)
    >>> sends = get_spark().createDataFrame(
    ...     [(1, "orders", "order-1", at(0)), (2, "orders", "order-1", at(1)),
    ...      (3, "orders", "order-2", at(2)), (4, "orders", "order-1", at(3))],
    ...     "event_id long, entity string, message_id string, send_time timestamp")
    >>> print(count_sweep(sends, capacities=(1, 2)).to_string(index=False))
     capacity  ids_held  duplicates
            1         1           1
            2         2           2
    """
    answers = by_counts(df, capacities, partitioning)
    judged = answers.judged.persist()
    try:
        stacked = functools.reduce(
            lambda one, other: one.unionByName(other),
            (answers.result(c).withColumn(CAPACITY, F.lit(c)) for c in answers.capacities),
        )
        counts = summary_counts(stacked, CAPACITY)
        truth = truth_counts(stacked, CAPACITY) if has_ground_truth(stacked) else None
    finally:
        judged.unpersist()
    return pd.DataFrame([_count_row(counts, truth, c) for c in answers.capacities])


def _count_row(
    counts: pd.DataFrame, truth: pd.DataFrame | None, capacity: int
) -> dict[str, object]:
    """One capacity's row of :func:`count_sweep`, from its counts per entity."""
    entities = counts[counts[CAPACITY] == capacity]
    row: dict[str, object] = {
        "capacity": capacity,
        "ids_held": int(
            (entities["accepted"] - entities["without_message_id"]).clip(upper=capacity).sum()
        ),
        "duplicates": int(entities["duplicates"].sum()),
    }
    if truth is not None:
        totals = truth[truth[CAPACITY] == capacity]
        for name in ("resends_caught", "extra_deliveries", "messages_lost"):
            row[name] = int(totals[name].sum())
    return row
