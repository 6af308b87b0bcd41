"""Spark's road of :func:`dedup_lib.sweep.collect.collect`: independent passes run at once
(every send counted, the repeated sends, the messages), bounded by what the driver can
hold (:mod:`dedup_lib.sweep.footprint`)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.analysis.totals import NO_ENTITY
from dedup_lib.columns import NEXT, POS, RANK
from dedup_lib.rules.policy import REJECTED
from dedup_lib.spark import hashed, spark_errors, to_pandas
from dedup_lib.sweep import counts, footprint
from dedup_lib.sweep.collected import (
    Collected,
    carried_columns,
    entity_of,
    finish,
    in_replay_order,
    judged_sends,
    time_us,
    with_rules,
)
from dedup_lib.sweep.frames import frame_of, texts_of
from dedup_lib.sweep.truth import less_rejected

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import DataFrame


#: Rows of the input judged to learn the bytes per row, when the driver's road did not run.
_SAMPLE_ROWS = 20_000


def collect_in_spark(
    df: DataFrame,
    partitioning: bool,
    carry: Sequence[str],
    bucket_us: int,
    allowed: footprint.Budget | None,
    *,
    truth: bool,
    arrow: bool,
) -> Collected:
    """:func:`collect`'s Spark passes over ``df`` (positioned); ``truth``: it has ground
    truth; ``arrow``: its columns convert through Arrow alone (:func:`rows_of`).

    The passes are independent and run at once, one planning or waiting on a result while
    another computes: the rows judged for their size (a small job, mostly planning) while
    every send is counted, then the repeated sends while
    the messages are. Where the count finds no rejected send, the later passes leave the
    rejection checks out; where it finds few, the messages' pass counts every send and the
    driver takes the rejected ones off (:func:`_message_groups`). Where every send might not
    fit, :func:`dedup_lib.sweep.footprint.bounded` decides."""
    sample = df.limit(_SAMPLE_ROWS)
    time = time_us(df)
    positioned, (df, rules) = df, with_rules(df, partitioning)
    entity = entity_of(df)
    named = F.coalesce(entity, F.lit(NO_ENTITY))
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="dedup-collect") as pool:
        judged_done = pool.submit(
            lambda: judged_sends(sample, partitioning, truth, carry, bucket_us).toArrow()
        )
        counted = counts.counted(df, named, rules.verdict, time, bucket_us, truth)
        judged = judged_done.result()
        columns = [c for c in judged.column_names if c not in ("kind", "bucket_us")]
        size = footprint.per_row(judged, columns, truth)
        if not (counted.table["kind"] == "rejected").any():
            df, rules = with_rules(positioned, partitioning, rejections=False)
        limits = allowed or footprint.budget(df.sparkSession)
        sends = df.select(named.alias("entity"), rules.key.alias("key"), F.col(POS).alias("pos"))
        needed, persisted = footprint.bounded(
            sends, counted.table, size, bucket_us, limits, truth=truth
        )
        repeated = _repeated_sends(df, entity, rules.key, time, truth, carry)
        judge = counted.rejected is None
        grouped = _message_groups(df, named, rules.verdict, judge=judge) if truth else None
        try:
            if persisted:
                needed = footprint.persist_and_count(
                    repeated, grouped, counted.table, size, bucket_us
                )
                footprint.refuse_over(needed, limits)
            rows_done = pool.submit(rows_of, repeated, arrow)
            messages_done = pool.submit(grouped.toArrow) if grouped is not None else None
            rows = rows_done.result()
            messages = _less_rejected(messages_done, counted.rejected)
            return finish(rows, counted.table, messages, bucket_us, truth)
        except spark_errors() as exc:
            refused = footprint.too_large(exc, needed, limits)
            if refused is None:
                raise
            raise refused from None
        finally:
            if persisted:
                footprint.release(repeated, grouped)


def rows_of(repeated: DataFrame, arrow: bool) -> pd.DataFrame:
    """The repeated sends in pandas, in replay order (:func:`in_replay_order`): through Arrow
    alone where each column's type converts as Spark's ``toPandas`` converts it
    (:data:`_LOCAL_TYPES`), in half the time (docs/decisions/query-shapes.md), the
    table handed to :func:`~dedup_lib.sweep.frames.frame_of` alone, so that its batches are
    let go as they are converted; the order is checked after, on the frame. Texts are
    pandas' ``str`` columns either way."""
    if not arrow:
        texts = [f.name for f in repeated.schema.fields if isinstance(f.dataType, T.StringType)]
        return in_replay_order(texts_of(to_pandas(repeated), texts))
    return in_replay_order(frame_of(repeated.toArrow()))


def _repeated_sends(
    df: DataFrame, entity: Column, key: Column, time: Column, truth: bool, carry: Sequence[str]
) -> DataFrame:
    """The eligible sends of keys sent more than once, with their rank in the key (lazy).

    Sorted by the key's text first, as detect_duplicates sorts: ids that grow with time
    arrive nearly in order, and the rows are read where they lie, then in replay order
    (docs/decisions/query-shapes.md)."""
    by_key = Window.partitionBy("key", "entity").orderBy(
        "time_us", F.col("event_id").asc_nulls_last(), "pos"
    )
    rank = F.row_number().over(by_key)
    return (
        df.select(
            entity.alias("entity"),
            key.alias("key"),
            time.alias("time_us"),
            F.col("event_id"),
            F.col(POS).alias("pos"),
            *carried_columns(truth, carry),
        )
        .where(F.col("key").isNotNull())
        .select("*", rank.alias(RANK), F.lead("pos").over(by_key).alias(NEXT))
        .where((F.col(RANK) > 1) | F.col(NEXT).isNotNull())
        .drop(NEXT)
    )


def _less_rejected(
    done: Future[pa.Table] | None, rejected: pa.Table | None
) -> Callable[[], pa.Table | None]:
    """The messages' table when asked for, with the rejected sends taken off when the pass
    counted them (:func:`_message_groups`)."""
    if done is None:
        return lambda: None
    if rejected is None:
        return done.result
    return lambda: less_rejected(done.result(), rejected)


def _message_groups(
    df: DataFrame, named: Column, verdict: Column, *, judge: bool = True
) -> DataFrame:
    """Per message, the sends that are not rejected (lazy). Only messages with two or more
    of them can be delivered more than once: those come back one by one, the others as one
    count per entity (``several`` tells which). With ``judge=False``, where the count of
    every send has the rejected ones per message (:func:`dedup_lib.sweep.counts.counted`),
    every send is counted instead, without the
    rules (their columns and checks cost a sixth of the pass), and the driver takes the
    rejected ones off (:func:`dedup_lib.sweep.truth.less_rejected`).

    The sends are hashed to their message's partition before they are counted: nearly every
    message is sent once, so counting within each input partition first (Spark's partial
    aggregation) merges almost nothing and costs a fifth of the pass. Into as many partitions
    as the session shuffles to: merged into fewer by adaptive execution, they leave a core
    idle at the end (docs/decisions/query-shapes.md)."""
    unrejected = F.count(F.lit(1)) - F.count(F.when(F.col("rejected"), True))
    several = F.col("unrejected") >= 2
    return (
        df.select(
            named.alias("entity"),
            F.col("logical_id"),
            (verdict == REJECTED if judge else F.lit(False)).alias("rejected"),
        )
        .transform(hashed, "entity", "logical_id")
        .groupBy("entity", "logical_id")
        .agg(unrejected.alias("unrejected"))
        .groupBy(
            "entity",
            several.alias("several"),
            F.when(several, F.col("logical_id")).alias("logical_id"),
        )
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.count(F.when(F.col("unrejected") == 0, True)).alias("messages_rejected"),
            F.max("unrejected").alias("unrejected"),
        )
    )
