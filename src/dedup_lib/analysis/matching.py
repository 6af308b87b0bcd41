"""How :func:`dedup_lib.analysis.reconcile.reconcile` matches kept messages to sends, in Spark:
the inputs checked and scoped, each side's rows numbered and materialized, candidate pairs by
time bucket, the earliest free accepted send per kept message, the nearest other send for the
rest, the pairs of kept messages under one key, and the counts. The result and its words are
:mod:`dedup_lib.analysis.reconcile`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.analysis.totals import entity_column
from dedup_lib.columns import COVERED, INTERNAL, column, count_where, utc_wall_clock
from dedup_lib.errors import InputError, InputTypeError
from dedup_lib.replay.sql_rules import OUTPUT_COLUMNS, is_set, sql_rules
from dedup_lib.rules.policy import ACCEPTED, DUPLICATE, REJECTED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dedup_lib.rules.policy import DedupPolicy

EXPLAINED = "explained"
CONTRADICTION = "contradiction"
UNEXPLAINED = "unexplained"
#: The categories a kept message lands in, one each.
CATEGORIES = (EXPLAINED, CONTRADICTION, UNEXPLAINED)

#: Columns the rows of kept messages gain: the matched send as the replay judged it.
ADDED = (
    "category",
    "replay_event_id",
    "replay_send_time",
    "replay_verdict",
    "replay_reason",
    "original_send_time",
    "original_event_id",
    "original_kept",
    "gap_s",
    "offset_s",
)
_ENTITY = INTERNAL + "rc_entity"
_MID = INTERNAL + "rc_mid"
_PK = INTERNAL + "rc_pk"
_KEY = INTERNAL + "rc_key"
_KROW = INTERNAL + "rc_kept_row"
_KUS = INTERNAL + "rc_kept_us"
_KORDER = INTERNAL + "rc_kept_order"
_SROW = INTERNAL + "rc_send_row"
_SUS = INTERNAL + "rc_send_us"
_BUCKET = INTERNAL + "rc_bucket"
_MATCH = INTERNAL + "rc_match"
#: Set on an accepted send a kept message took (:func:`accepted_sends`).
MATCHED = INTERNAL + "rc_matched"
_OTHER = INTERNAL + "rc_other"
_PAIR_US = INTERNAL + "rc_pair_us"
_SCHEDULED = INTERNAL + "rc_scheduled"
_SENT_US = INTERNAL + "rc_sent_us"
_GAP_US = INTERNAL + "rc_gap_us"
_MICROS = 1_000_000


def check(result: DataFrame, kept: DataFrame) -> None:
    missing = [
        c
        for c in ("message_id", "send_time", "event_id", *OUTPUT_COLUMNS)
        if c not in result.columns
    ]
    if missing:
        raise InputError(
            f"reconcile: expected a detect_duplicates result, but column(s) "
            f"{', '.join(missing)} are missing"
        )
    needed = [c for c in ("message_id", "send_time") if c not in kept.columns]
    if needed:
        raise InputError(
            f"reconcile: kept needs column(s) {', '.join(needed)} (the MessageId and the "
            f"enqueue time of each message the broker holds); it has "
            f"{', '.join(kept.columns) or 'no columns'}"
        )
    clashes = [c for c in kept.columns if c in ADDED or c.startswith(INTERNAL)]
    if clashes:
        raise InputError(
            f"reconcile: kept already has column(s) {', '.join(clashes)}, which the "
            "reconciliation adds; drop or rename them first"
        )
    for name, frame in (("kept", kept), ("result", result)):
        dtype = frame.schema["send_time"].dataType
        if not isinstance(dtype, T.TimestampType | T.TimestampNTZType):
            raise InputTypeError(
                f"reconcile: {name} column send_time must be a timestamp, got "
                f"{dtype.simpleString()}; load_telemetry() parses ISO 8601 and epoch values"
            )


def utc(df: DataFrame, name: str) -> DataFrame:
    """``df`` with a ``timestamp_ntz`` column ``name`` read as UTC (a timestamp)."""
    if isinstance(df.schema[name].dataType, T.TimestampNTZType):
        return df.withColumn(name, utc_wall_clock(F.col(name)))
    return df


def _time_us(df: DataFrame, name: str) -> Column:
    value = F.col(name)
    if isinstance(df.schema[name].dataType, T.TimestampNTZType):
        value = utc_wall_clock(value)
    return F.unix_micros(value)


def scoped(df: DataFrame, scope: str | None, name: str, other_has_entity: bool) -> DataFrame:
    """``df`` narrowed to ``scope``, its ``entity`` filled where it has none."""
    if "entity" in df.columns:
        if scope is not None:
            df = df.where(F.col("entity").cast("string") == F.lit(scope))
        return df.withColumn("entity", entity_column(df))
    if scope is None and other_has_entity:
        raise InputError(
            f"reconcile: {name} has no entity column, so its rows cannot be matched to the "
            f"{'kept messages' if name == 'result' else 'replay'}'s entities; pass "
            "entity='NAME', the queue or topic it belongs to"
        )
    return df.withColumn("entity", F.lit(scope).cast("string") if scope else entity_column(df))


def _identity(df: DataFrame) -> list[Column]:
    """What a kept message and a send must share: entity, MessageId, effective partition
    key (null when neither session id nor partition key is set)."""
    present = set(df.columns)
    sid = F.col("session_id").cast("string") if "session_id" in present else None
    pk = F.col("partition_key").cast("string") if "partition_key" in present else None
    keys = [F.when(is_set(c), c) for c in (sid, pk) if c is not None]
    effective = F.coalesce(*keys) if keys else F.lit(None).cast("string")
    return [
        F.col("entity").alias(_ENTITY),
        F.col("message_id").cast("string").alias(_MID),
        effective.alias(_PK),
    ]


def _candidates(kept: DataFrame, sends: DataFrame, tol_us: int) -> DataFrame:
    """Every (kept message, send) pair that may match. Both sides are cut into time buckets
    at least as long as the tolerance, kept messages repeated into their neighbours, so that
    a hot MessageId pairs only sends near each other, not all with all."""
    size = max(tol_us, _MICROS)
    own = F.floor(F.col(_KUS) / size)
    kept_side = kept.select(
        _KROW,
        _KUS,
        _KORDER,
        F.col(_ENTITY),
        F.col(_MID),
        F.col(_PK).alias("__k_pk"),
        F.explode(F.array(own - 1, own, own + 1)).alias(_BUCKET),
    )
    send_side = sends.select(
        _SROW,
        _SUS,
        "verdict",
        "event_id",
        F.col(_ENTITY),
        F.col(_MID),
        F.col(_PK).alias("__s_pk"),
        F.floor(F.col(_SUS) / size).alias(_BUCKET),
    )
    same_key = F.col("__k_pk").isNull() | F.col("__s_pk").isNull()
    return (
        kept_side.join(send_side, [_ENTITY, _MID, _BUCKET])
        .where(same_key | (F.col("__k_pk") == F.col("__s_pk")))
        .where(F.abs(F.col(_KUS) - F.col(_SUS)) <= F.lit(tol_us))
        .drop(_BUCKET, "__k_pk", "__s_pk")
    )


def _matches(edges: DataFrame) -> DataFrame:
    """Kept messages to accepted sends, one to one (see :func:`reconcile`). A pair that
    neither side shares with another is a match as it is; the rest are walked per entity
    and MessageId in Spark's Python workers."""
    per_kept = Window.partitionBy(_KROW)
    per_send = Window.partitionBy(_SROW)
    counted = edges.select(
        "*",
        F.count(F.lit(1)).over(per_kept).alias("__k_n"),
        F.count(F.lit(1)).over(per_send).alias("__s_n"),
    )
    alone = (F.col("__k_n") == 1) & (F.col("__s_n") == 1)
    direct = counted.where(alone).select(_KROW, _SROW)
    shared = counted.where(~alone).select(
        _ENTITY, _MID, _KROW, _KUS, _KORDER, _SROW, _SUS, "event_id"
    )
    kept_row, send_row, kept_us, order, send_us = _KROW, _SROW, _KUS, _KORDER, _SUS

    def earliest_free(group: pd.DataFrame) -> pd.DataFrame:
        kept_first = group.sort_values(
            [kept_us, order, kept_row], na_position="last", kind="stable"
        )
        taken: set[int] = set()
        found: dict[str, list[int]] = {kept_row: [], send_row: []}
        for row in kept_first[kept_row].drop_duplicates():
            options = group[group[kept_row] == row].sort_values(
                [send_us, "event_id", send_row], na_position="last", kind="stable"
            )
            free = [s for s in options[send_row] if s not in taken]
            if free:
                taken.add(free[0])
                found[kept_row].append(int(row))
                found[send_row].append(int(free[0]))
        return pd.DataFrame(found, dtype="int64")

    walked = shared.groupBy(_ENTITY, _MID).applyInPandas(
        earliest_free, f"{_KROW} long, {_SROW} long"
    )
    return direct.unionByName(walked)


def _nearest(edges: DataFrame) -> DataFrame:
    """Per kept message, the nearest duplicate or rejected send (then the earliest)."""
    order = Window.partitionBy(_KROW).orderBy(
        F.abs(F.col(_KUS) - F.col(_SUS)), _SUS, F.col("event_id").asc_nulls_last(), _SROW
    )
    return (
        edges.withColumn("__rank", F.row_number().over(order))
        .where(F.col("__rank") == 1)
        .select(_KROW, F.col(_SROW).alias(_OTHER))
    )


def _classified(
    kept: DataFrame, sends: DataFrame, matches: DataFrame, other: DataFrame
) -> DataFrame:
    """Every kept message once, with its category and the send behind it."""
    matched = matches.withColumnRenamed(_SROW, _MATCH)
    chosen = F.coalesce(F.col(_MATCH), F.col(_OTHER))
    category = (
        F.when(F.col(_MATCH).isNotNull(), F.lit(EXPLAINED))
        .when(F.col(_OTHER).isNotNull(), F.lit(CONTRADICTION))
        .otherwise(F.lit(UNEXPLAINED))
    )
    send_info = _chosen_sends(sends)
    explained_originals = _explained_originals(sends, matched)
    joined = (
        kept.join(matched, _KROW, "left")
        .join(other, _KROW, "left")
        .withColumn("__chosen", chosen)
        .join(send_info, "__chosen", "left")
    )
    found = joined.join(
        explained_originals,
        (F.col("__o_entity") == F.col(_ENTITY))
        & (F.col("__o_key") == F.col("__replay_key"))
        & (F.col("__o_time") == F.col("original_send_time"))
        & F.col("__o_event").eqNullSafe(F.col("original_event_id"))
        & (category == F.lit(CONTRADICTION)),
        "left",
    )
    gap = F.col(_SENT_US) - F.unix_micros("original_send_time")
    is_contradiction = category == F.lit(CONTRADICTION)
    exported = [c for c in kept.columns if not c.startswith(INTERNAL)]
    return found.select(
        *(column(c) for c in exported),
        category.alias("category"),
        "replay_event_id",
        "replay_send_time",
        "replay_verdict",
        "replay_reason",
        "original_send_time",
        "original_event_id",
        F.when(is_contradiction, F.coalesce(F.col("__o_kept"), F.lit(False))).alias(
            "original_kept"
        ),
        (gap / F.lit(float(_MICROS))).alias("gap_s"),
        ((F.col(_KUS) - F.col("__expected_us")) / F.lit(float(_MICROS))).alias("offset_s"),
        _ENTITY,
        _KEY,
        _KROW,
        _KORDER,
        # The time the broker judged the message at: its enqueue time, except for a
        # scheduled message, whose enqueue time is its activation: then its send's.
        F.when(~F.col(_SCHEDULED), F.col(_KUS))
        .when(chosen.isNotNull(), F.col(_SENT_US))
        .alias(_PAIR_US),
        gap.alias(_GAP_US),
    )


def _chosen_sends(sends: DataFrame) -> DataFrame:
    """The columns of the send behind a kept message, by its row (``__chosen``)."""
    return sends.select(
        F.col(_SROW).alias("__chosen"),
        F.col("event_id").alias("replay_event_id"),
        F.col("send_time").alias("replay_send_time"),
        F.col("verdict").alias("replay_verdict"),
        F.col("reason").alias("replay_reason"),
        F.col("dedup_key").alias("__replay_key"),
        "original_send_time",
        "original_event_id",
        F.col(_SUS).alias("__expected_us"),
        _time_us(sends, "send_time").alias(_SENT_US),
    )


def _explained_originals(sends: DataFrame, matched: DataFrame) -> DataFrame:
    """The accepted sends a kept message explains: a contradiction whose original is one of
    them bounds the window by its gap."""
    return (
        sends.join(matched.select(F.col(_MATCH).alias(_SROW)), _SROW)
        .select(
            F.col(_ENTITY).alias("__o_entity"),
            F.col("dedup_key").alias("__o_key"),
            F.col("send_time").alias("__o_time"),
            F.col("event_id").alias("__o_event"),
        )
        .distinct()
        .withColumn("__o_kept", F.lit(True))
    )


def pairs(classified: DataFrame, window_us: int) -> DataFrame:
    """Each kept message with the previous kept message of its dedup key, when less
    than the window before it."""
    order = Window.partitionBy(_ENTITY, _KEY).orderBy(
        _PAIR_US, F.col(_KORDER).asc_nulls_last(), _KROW
    )
    has_sequence = "sequence_number" in classified.columns
    previous = {
        "__first_time": F.lag("send_time").over(order),
        "__first_us": F.lag(_PAIR_US).over(order),
        "__first_category": F.lag("category").over(order),
        **({"__first_sequence": F.lag("sequence_number").over(order)} if has_sequence else {}),
    }
    lagged = classified.where(F.col(_KEY).isNotNull() & F.col(_PAIR_US).isNotNull()).withColumns(
        previous
    )
    gap_us = F.col(_PAIR_US) - F.col("__first_us")
    gap = gap_us / F.lit(float(_MICROS))
    return lagged.where(gap_us < F.lit(window_us)).select(
        "entity",
        F.col(_KEY).alias("dedup_key"),
        "message_id",
        F.col("__first_time").alias("first_send_time"),
        *([F.col("__first_sequence").alias("first_sequence_number")] if has_sequence else []),
        F.col("__first_category").alias("first_category"),
        "send_time",
        *(["sequence_number"] if has_sequence else []),
        "category",
        gap.alias("gap_s"),
        gap.alias("largest_window_s"),
    )


def tally(kept_rows: DataFrame) -> tuple[dict[str, int], timedelta | None]:
    """The kept messages counted by category, and the shortest gap of a contradiction whose
    original the broker kept. One Spark job."""
    category, verdict = F.col("category"), F.col("replay_verdict")
    contradiction = category == CONTRADICTION
    row = kept_rows.agg(
        F.count(F.lit(1)),
        *(count_where(category == name) for name in CATEGORIES),
        count_where(contradiction & (verdict == DUPLICATE)),
        count_where(contradiction & (verdict == REJECTED)),
        count_where(contradiction & F.col("original_kept")),
        F.min(F.when(contradiction & F.col("original_kept"), F.col(_GAP_US))),
    ).first()
    assert row is not None
    names = (
        "kept",
        EXPLAINED,
        "contradictions",
        UNEXPLAINED,
        "contradicted_duplicates",
        "contradicted_rejections",
        "originals_kept",
    )
    tally = {name: int(value) for name, value in zip(names, row[:-1], strict=True)}
    shortest = None if row[-1] is None else timedelta(microseconds=int(row[-1]))
    return tally, shortest


def public(columns: list[str]) -> Iterator[Column]:
    return (column(c) for c in [*columns, *([] if "entity" in columns else ["entity"])])


def covered(sends: DataFrame, kept: DataFrame) -> DataFrame:
    """The sends of the entities the kept messages belong to: an export covers its own."""
    entities = kept.select(F.col("entity").alias(COVERED)).distinct()
    return sends.join(entities, sends["entity"].eqNullSafe(entities[COVERED]), "left_semi")


def kept_rows(kept: DataFrame, policy: DedupPolicy) -> DataFrame:
    """The kept messages with their enqueue time, position, order, key and identity,
    materialized: rows are matched by position, which must not change between reads."""
    return kept.select(
        "*",
        _time_us(kept, "send_time").alias(_KUS),
        F.monotonically_increasing_id().alias(_KROW),
        (
            F.col("sequence_number").try_cast("long")
            if "sequence_number" in kept.columns
            else F.lit(None).cast("long")
        ).alias(_KORDER),
        (
            F.col("scheduled_enqueue_time").isNotNull()
            if "scheduled_enqueue_time" in kept.columns
            else F.lit(False)
        ).alias(_SCHEDULED),
        sql_rules(kept, policy).key.alias(_KEY),
        *_identity(kept),
    ).localCheckpoint()


def send_rows(sends: DataFrame) -> DataFrame:
    """The sends with their expected enqueue time, position and identity, materialized."""
    expected = (
        F.coalesce(_time_us(sends, "scheduled_enqueue_time"), _time_us(sends, "send_time"))
        if "scheduled_enqueue_time" in sends.columns
        else _time_us(sends, "send_time")
    )
    return sends.select(
        "*",
        expected.alias(_SUS),
        F.monotonically_increasing_id().alias(_SROW),
        *_identity(sends),
    ).localCheckpoint()


def classify(kept: DataFrame, sends: DataFrame, tol_us: int) -> tuple[DataFrame, DataFrame]:
    """The accepted sends matched to kept messages, and every kept message with its
    category and the send it matched (both materialized)."""
    edges = _candidates(kept, sends, tol_us)
    matches = _matches(edges.where(F.col("verdict") == ACCEPTED)).localCheckpoint()
    other = _nearest(edges.where(F.col("verdict") != ACCEPTED))
    return matches, _classified(kept, sends, matches, other).localCheckpoint()


def accepted_sends(sends: DataFrame, matches: DataFrame) -> DataFrame:
    """The sends the replay accepted, with :data:`MATCHED` true where a kept message took them
    (null where none did)."""
    taken = matches.select(F.col(_SROW), F.lit(True).alias(MATCHED))
    return sends.join(taken, _SROW, "left").where(F.col("verdict") == ACCEPTED)


def pair_and_send_counts(
    pairs: DataFrame, accepted: DataFrame
) -> tuple[int, timedelta | None, int, int]:
    """Pairs, the shortest pair's gap (the window that agrees), accepted sends and those not
    kept: two Spark jobs."""
    pair_row = pairs.agg(
        F.count(F.lit(1)), F.min(F.round(F.col("gap_s") * _MICROS)).cast("long")
    ).first()
    sends_row = accepted.agg(F.count(F.lit(1)), count_where(F.col(MATCHED).isNull())).first()
    assert pair_row is not None
    assert sends_row is not None
    agreeing = None if pair_row[1] is None else timedelta(microseconds=int(pair_row[1]))
    return int(pair_row[0]), agreeing, int(sends_row[0]), int(sends_row[1])
