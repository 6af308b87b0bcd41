"""The :class:`Collected` tables both roads of :func:`dedup_lib.sweep.collect.collect` end
in, and what they share to make them: the rules of a mode on the input, every send as one
narrow row, the replay order and its check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import POS, RANK, utc_wall_clock
from dedup_lib.memory import release_freed
from dedup_lib.replay.sql_rules import Rules, sql_rules, with_batches
from dedup_lib.rules.policy import DedupPolicy
from dedup_lib.sweep import counts
from dedup_lib.sweep.truth import accepted_elsewhere, repeated_messages

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Collected:
    """What :func:`collect` brings back: ``repeated`` (the sends of repeated keys, numbered
    by key in ``key_number``, in replay order), ``fixed`` (the other sends counted per entity,
    kind and time bucket), ``truth_fixed`` (per entity message counts, None without ground
    truth) and ``bucket_us``, the width of the time buckets."""

    repeated: pd.DataFrame
    fixed: pd.DataFrame
    truth_fixed: pd.DataFrame | None
    bucket_us: int


def arrow_ordered(table: pa.Table) -> bool:
    """:func:`in_replay_order`'s check in Arrow's kernels rather than over Python strings,
    on the columns' chunks as they are: no copy of the texts."""
    if table.num_rows == 0:
        return True
    rank = table[RANK]
    first = pc.equal(rank, 1)
    if not first[0].as_py():
        return False
    before, after = slice(0, len(rank) - 1), slice(1, None)

    def same(values: pa.ChunkedArray) -> pa.ChunkedArray:
        earlier, later = values[before], values[after]
        equal = pc.fill_null(pc.equal(earlier, later), False)
        return pc.or_(equal, pc.and_(pc.is_null(earlier), pc.is_null(later)))

    step = pc.equal(rank[after], pc.add(rank[before], 1))
    follows = pc.and_(pc.and_(step, same(table["entity"])), same(table["key"]))
    return bool(pc.all(pc.or_(first[after], follows)).as_py())


def finish(
    rows: pd.DataFrame,
    counted: pd.DataFrame,
    messages: Callable[[], pa.Table | None],
    bucket_us: int,
    truth: bool,
) -> Collected:
    """The tables from the repeated sends, the counts of all sends and, with ground truth,
    the messages: asked for last, so that the Spark passes still counting them run beside
    the driver's numbering."""
    entity, entities = counts.entity_codes(rows["entity"])
    fixed = counts.fixed(counted, rows, entity, entities, bucket_us, truth)
    numbered = repeated_messages(rows, entity, entities) if truth else None
    table = messages()
    truth_fixed = None
    if numbered is not None and table is not None:
        rows["accepted_elsewhere"], truth_fixed = accepted_elsewhere(numbered, table)
    release_freed()
    return Collected(rows, fixed, truth_fixed, bucket_us)


def with_rules(
    df: DataFrame, partitioning: bool, rejections: bool = True
) -> tuple[DataFrame, Rules]:
    """``df`` (positioned) with what the rules read, and the rules of the mode. With
    partitioning, sends in mixed batches are rejected (never judged by any window).
    ``rejections=False`` where all sends were counted and none is rejected: the rules
    without their checks, which read columns (and, for batches, group sends) for nothing."""
    policy = DedupPolicy(partitioning=partitioning)
    if not rejections:
        return df, sql_rules(df, policy, rejections=False)
    df = with_batches(df, policy, F.col(POS))
    return df, sql_rules(df, policy)


def entity_of(df: DataFrame) -> Column:
    return (F.col("entity") if "entity" in df.columns else F.lit(None)).cast("string")


def carried_columns(truth: bool, carry: Sequence[str]) -> list[Column]:
    """The ground truth and carried columns that a repeated send brings along."""
    truth_columns = (
        [F.col("logical_id"), F.col("attempt").cast("int").alias("attempt")] if truth else []
    )
    carried = [F.col(c) for c in carry if c not in ("logical_id", "attempt", "event_id")]
    return truth_columns + carried


def judged_sends(
    df: DataFrame, partitioning: bool, truth: bool, carry: Sequence[str], bucket_us: int
) -> DataFrame:
    """Every send of ``df`` (positioned) as one narrow row: the columns of a repeated send,
    its ``kind`` and its time ``bucket_us``; ``key`` is null for the sends no window judges."""
    time = time_us(df)
    df, rules = with_rules(df, partitioning)
    return df.select(
        entity_of(df).alias("entity"),
        rules.key.alias("key"),
        time.alias("time_us"),
        F.col("event_id"),
        F.col(POS).alias("pos"),
        *carried_columns(truth, carry),
        counts.kind(rules.verdict).alias("kind"),
        counts.bucket_start(time, bucket_us).alias("bucket_us"),
    )


def time_us(df: DataFrame) -> Column:
    """``send_time`` in microseconds since the epoch; a timestamp without time zone is
    read as UTC."""
    if isinstance(df.schema["send_time"].dataType, T.TimestampNTZType):
        return F.unix_micros(utc_wall_clock(F.col("send_time")))
    return F.unix_micros(F.col("send_time"))


def in_replay_order(rows: pd.DataFrame) -> pd.DataFrame:
    """The repeated sends numbered by key (``key_number``), in replay order.

    Spark returns each key's sends together and in order, with their rank in the key: checked
    here (:func:`arrow_ordered`, over the texts' Arrow buffers as they are). Should the rows
    come back in another order, they are sorted by key and rank instead."""
    rank = rows.pop(RANK).to_numpy(dtype=np.int64)
    first = rank == 1
    texts = {c: pa.array(rows[c], from_pandas=True) for c in ("entity", "key")}
    if not arrow_ordered(pa.table({RANK: rank, **texts})):
        entity = rows["entity"]
        pairs = pd.MultiIndex.from_arrays([entity.isna(), entity.fillna(""), rows["key"]])
        order = np.lexsort((rank, pd.factorize(pairs)[0]))
        rows = rows.take(order).reset_index(drop=True)
        first = rank[order] == 1
    rows["key_number"] = np.cumsum(first) - 1
    return rows
