"""Collect from Spark what the cache needs to answer any window: a few arrays in memory.

Only keys sent more than once can ever see a duplicate. One shuffle by key collects the
eligible sends of those keys (entity, key, time, tie order, ground truth) in replay order;
small aggregations count everything else per entity and time bucket: sends to keys used once
(always accepted), sends without a MessageId (accepted, unprotected) and rejected sends (never
judged; with partitioning, mixed batches too, refused whatever the window), and with ground
truth the sends of each message. Neither aggregation needs to know which keys repeat: the
driver takes off the repeated sends it holds.

An input of at most :data:`LOCAL_ROWS` sends (counted first, reading no column) takes a shorter
road: one Spark job judges every send (the same rules, keys and time buckets) and brings back
one narrow row per send, and the driver groups them with Arrow. On a small input most of a
Spark pass is planning and compiling it (seconds in a fresh JVM), and three passes cost more
than the rows they move.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.analysis.totals import NO_ENTITY
from dedup_lib.columns import NEXT, NO_EVENT_ID, POS, RANK, utc_wall_clock
from dedup_lib.errors import InputError
from dedup_lib.memory import release_freed
from dedup_lib.replay.passes import with_position
from dedup_lib.replay.sql_rules import Rules, sql_rules, validate, with_batches
from dedup_lib.rules.policy import REJECTED, DedupPolicy
from dedup_lib.spark import hashed, spark_errors, to_pandas
from dedup_lib.sweep import counts, footprint
from dedup_lib.sweep.frames import frame_of, texts_of
from dedup_lib.sweep.grid import to_micros
from dedup_lib.sweep.truth import accepted_elsewhere, held_messages, less_rejected

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import DataFrame

#: Inputs of at most this many sends are grouped in the driver, from one narrow Spark job.
LOCAL_ROWS = 1_000_000
#: Rows of the input judged to learn the bytes per row, when the driver's road did not run.
_SAMPLE_ROWS = 20_000
#: Types whose values Arrow gives pandas as Spark's ``toPandas`` does, and orders and groups
#: as Spark does: the driver's road takes only these for ``event_id``, ``logical_id`` and
#: carried columns.
_LOCAL_TYPES = (T.StringType, T.IntegralType, T.BooleanType)


@dataclass(frozen=True)
class Collected:
    """What :func:`collect` brings back: ``repeated`` (the sends of repeated keys, numbered
    by key in ``segment``, in replay order), ``fixed`` (the other sends counted per entity,
    kind and time bucket), ``truth_fixed`` (per entity message counts, None without ground
    truth) and ``bucket_us``, the width of the time buckets."""

    repeated: pd.DataFrame
    fixed: pd.DataFrame
    truth_fixed: pd.DataFrame | None
    bucket_us: int


def collect(
    df: DataFrame,
    partitioning: bool = False,
    carry: Sequence[str] = (),
    bucket: timedelta | float | str = "PT1M",
    local_rows: int | None = None,
    allowed: footprint.Budget | None = None,
) -> Collected:
    """Spark passes over ``df`` (the input of ``detect_duplicates``) for one partitioning
    mode; ``carry`` names input columns to keep in ``repeated``. ``df`` is read once per
    pass, so it must give the same rows each time (files, or a persisted frame).

    Up to ``local_rows`` sends (default :data:`LOCAL_ROWS`; 0: never) are grouped in the
    driver instead, from one narrow job, once a job that reads no column has counted at most
    ``local_rows + 1`` of them. The first pass counts every send; when all of them would not
    fit in ``allowed`` (default: this session's ``spark.driver.maxResultSize`` and the memory
    available here), what the driver would hold is computed and stored where Spark runs and
    counted there (:func:`dedup_lib.sweep.footprint.persist_and_count`), and over
    ``allowed`` the build is refused, before any of it is brought back, with an
    :class:`InputError` that says how much it needs and what to narrow; where samples of the
    keys and sends already say so (:func:`dedup_lib.sweep.footprint.at_least`), before they
    are gathered at all."""
    validate(df)
    bucket_us = to_micros(bucket)
    _check_carry(list(df.columns), carry)
    limit = LOCAL_ROWS if local_rows is None else local_rows
    given, df = df, with_position(df)
    truth = all(c in df.columns for c in ("logical_id", "attempt"))
    # Counted before any column is read (and only where the driver's road is open): bringing
    # back the first million judged sends only to learn that there are more costs a tenth of
    # a large build.
    arrow = _local_types(df, truth, carry)
    if limit > 0 and arrow and given.limit(limit + 1).count() <= limit:
        judged = _judged(df, partitioning, truth, carry, bucket_us).toArrow()
        return _collected_locally(judged, truth, bucket_us)
    return _collected(df, partitioning, carry, bucket_us, allowed, truth=truth, arrow=arrow)


def _collected(
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
    truth; ``arrow``: its columns convert through Arrow alone (:func:`_rows`).

    The passes are independent and run at once, one planning or waiting on a result while
    another computes: the rows judged for their size (a small job, mostly planning) while
    every send is counted, then the repeated sends while
    the messages are. Where the count finds no rejected send, the later passes leave the
    rejection checks out; where it finds few, the messages' pass counts every send and the
    driver takes the rejected ones off (:func:`_message_groups`). Where every send might not
    fit, :func:`dedup_lib.sweep.footprint.bounded` decides."""
    sample = df.limit(_SAMPLE_ROWS)
    time = _time_us(df)
    positioned, (df, rules) = df, _with_rules(df, partitioning)
    entity = _entity(df)
    named = F.coalesce(entity, F.lit(NO_ENTITY))
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="dedup-collect") as pool:
        judged_done = pool.submit(
            lambda: _judged(sample, partitioning, truth, carry, bucket_us).toArrow()
        )
        counted = counts.counted(df, named, rules.verdict, time, bucket_us, truth)
        judged = judged_done.result()
        held = [c for c in judged.column_names if c not in ("kind", "bucket_us")]
        size = footprint.per_row(judged, held, truth)
        if not (counted.table["kind"] == "rejected").any():
            df, rules = _with_rules(positioned, partitioning, rejections=False)
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
            rows_done = pool.submit(_rows, repeated, arrow)
            messages_done = pool.submit(grouped.toArrow) if grouped is not None else None
            rows = rows_done.result()
            messages = _less_rejected(messages_done, counted.rejected)
            return _finished(rows, counted.table, messages, bucket_us, truth)
        except spark_errors() as exc:
            refused = footprint.too_large(exc, needed, limits)
            if refused is None:
                raise
            raise refused from None
        finally:
            if persisted:
                footprint.release(repeated, grouped)


def _check_carry(columns: list[str], carry: Sequence[str]) -> None:
    missing = [c for c in carry if c not in columns]
    if missing:
        raise InputError(
            f"ReplayCache.build: carry names column(s) {', '.join(missing)}, which the "
            f"input does not have; it has {', '.join(columns)}"
        )


def _rows(repeated: DataFrame, arrow: bool) -> pd.DataFrame:
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


def _arrow_ordered(table: pa.Table) -> bool:
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


def _finished(
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
    held = held_messages(rows, entity, entities) if truth else None
    table = messages()
    truth_fixed = None
    if held is not None and table is not None:
        rows["accepted_elsewhere"], truth_fixed = accepted_elsewhere(held, table)
    release_freed()
    return Collected(rows, fixed, truth_fixed, bucket_us)


def _with_rules(
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


def _entity(df: DataFrame) -> Column:
    return (F.col("entity") if "entity" in df.columns else F.lit(None)).cast("string")


def _kept(truth: bool, carry: Sequence[str]) -> list[Column]:
    """The ground truth and carried columns that a repeated send keeps."""
    truth_columns = (
        [F.col("logical_id"), F.col("attempt").cast("int").alias("attempt")] if truth else []
    )
    carried = [F.col(c) for c in carry if c not in ("logical_id", "attempt", "event_id")]
    return truth_columns + carried


def _local_types(df: DataFrame, truth: bool, carry: Sequence[str]) -> bool:
    fields = {f.name: f.dataType for f in df.schema.fields}
    names = ["event_id", *(["logical_id"] if truth else []), *carry]
    return all(isinstance(fields[n], _LOCAL_TYPES) for n in names)


def _judged(
    df: DataFrame, partitioning: bool, truth: bool, carry: Sequence[str], bucket_us: int
) -> DataFrame:
    """Every send of ``df`` (positioned) as one narrow row: the columns of a repeated send,
    its ``kind`` and its time ``bucket_us``; ``key`` is null for the sends no window judges."""
    time = _time_us(df)
    df, rules = _with_rules(df, partitioning)
    return df.select(
        _entity(df).alias("entity"),
        rules.key.alias("key"),
        time.alias("time_us"),
        F.col("event_id"),
        F.col(POS).alias("pos"),
        *_kept(truth, carry),
        counts.kind(rules.verdict).alias("kind"),
        counts.bucket_start(time, bucket_us).alias("bucket_us"),
    )


def _collected_locally(judged: pa.Table, truth: bool, bucket_us: int) -> Collected:
    """What the Spark passes give, from every send judged (:func:`_judged`), grouped with
    Arrow: the same columns, and the same types once in pandas."""
    named = pc.fill_null(judged["entity"].cast(pa.string()), NO_ENTITY)
    keys = judged.select(["kind", "bucket_us"]).append_column("entity", named)
    sums: list[tuple[str | list[str], str]] = [([], "count_all")]
    if truth:
        resend = pc.fill_null(pc.greater(judged["attempt"], 1), False).cast(pa.int64())
        keys = keys.append_column("resend", resend)
        sums.append(("resend", "sum"))
    counted = keys.group_by(["entity", "kind", "bucket_us"], use_threads=False).aggregate(sums)
    names = ["entity", "kind", "bucket_us", "sends", *(["resends"] if truth else [])]
    counted = counted.select(
        ["entity", "kind", "bucket_us", "count_all"] + (["resend_sum"] if truth else [])
    ).rename_columns(names)
    rows = in_replay_order(_repeated_locally(judged))
    messages = _messages_locally(judged, named) if truth else None
    return _finished(
        rows, counts.kind_names(counted.to_pandas()), lambda: messages, bucket_us, truth
    )


def _repeated_locally(judged: pa.Table) -> pd.DataFrame:
    """The sends of keys judged more than once, each key's together in replay order, with
    their rank in the key: as :func:`_repeated_sends` returns them."""
    eligible = judged.filter(pc.is_valid(judged["key"]))
    # Spark's order: event_id nulls last (said as a column: pyarrow's option moved in 25).
    no_event_id = eligible["event_id"].is_null()
    order = pc.sort_indices(
        eligible.append_column(NO_EVENT_ID, no_event_id),
        sort_keys=[
            (c, "ascending") for c in ("entity", "key", "time_us", NO_EVENT_ID, "event_id", "pos")
        ],
    )
    eligible = eligible.take(order)
    entity = eligible["entity"].to_numpy(zero_copy_only=False)
    key = eligible["key"].to_numpy(zero_copy_only=False)
    same = (entity[1:] == entity[:-1]) & (key[1:] == key[:-1])
    starts = np.flatnonzero(np.r_[True, ~same])
    sizes = np.diff(np.r_[starts, len(key)])
    rank = np.arange(len(key)) - np.repeat(starts, sizes) + 1
    repeated = np.repeat(sizes > 1, sizes)
    held = eligible.filter(pa.array(repeated)).drop_columns(["kind", "bucket_us"])
    rows = frame_of(held)
    rows[RANK] = rank[repeated].astype(np.int32)
    return rows


def _messages_locally(judged: pa.Table, named: pa.ChunkedArray) -> pa.Table:
    """:func:`_message_groups` from every send judged."""
    unrejected = pc.not_equal(judged["kind"], counts.REJECTED_KIND).cast(pa.int64())
    per_message = (
        pa.table({"entity": named, "logical_id": judged["logical_id"], "unrejected": unrejected})
        .group_by(["entity", "logical_id"], use_threads=False)
        .aggregate([("unrejected", "sum")])
    )
    count = per_message["unrejected_sum"]
    several = pc.greater_equal(count, 2)
    null_id = pa.nulls(len(several), per_message["logical_id"].type)
    grouped = pa.table(
        {
            "entity": per_message["entity"],
            "several": several,
            "logical_id": pc.if_else(several, per_message["logical_id"], null_id),
            "none": pc.equal(count, 0).cast(pa.int64()),
            "unrejected": count,
        }
    ).group_by(["entity", "several", "logical_id"], use_threads=False)
    table = grouped.aggregate([([], "count_all"), ("none", "sum"), ("unrejected", "max")])
    return table.select(
        ["entity", "several", "logical_id", "count_all", "none_sum", "unrejected_max"]
    ).rename_columns(
        ["entity", "several", "logical_id", "messages", "messages_rejected", "unrejected"]
    )


def _time_us(df: DataFrame) -> Column:
    """``send_time`` in microseconds since the epoch; a timestamp without time zone is
    read as UTC."""
    if isinstance(df.schema["send_time"].dataType, T.TimestampNTZType):
        return F.unix_micros(utc_wall_clock(F.col("send_time")))
    return F.unix_micros(F.col("send_time"))


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
            *_kept(truth, carry),
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


def in_replay_order(rows: pd.DataFrame) -> pd.DataFrame:
    """The repeated sends numbered by key (``segment``), in replay order.

    Spark returns each key's sends together and in order, with their rank in the key: checked
    here (:func:`_arrow_ordered`, over the texts' Arrow buffers as they are). Should the rows
    come back in another order, they are sorted by key and rank instead."""
    rank = rows.pop(RANK).to_numpy(dtype=np.int64)
    first = rank == 1
    texts = {c: pa.array(rows[c], from_pandas=True) for c in ("entity", "key")}
    if not _arrow_ordered(pa.table({RANK: rank, **texts})):
        entity = rows["entity"]
        pairs = pd.MultiIndex.from_arrays([entity.isna(), entity.fillna(""), rows["key"]])
        order = np.lexsort((rank, pd.factorize(pairs)[0]))
        rows = rows.take(order).reset_index(drop=True)
        first = rank[order] == 1
    rows["segment"] = np.cumsum(first) - 1
    return rows
