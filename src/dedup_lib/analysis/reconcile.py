"""A replay checked against the broker's own state: what an export of the entity holds.

An export (Service Bus Explorer, a peek) lists the messages the broker accepted and still
holds, never the duplicates it dropped. Each kept message is matched to the send the telemetry
says it came from, and lands in exactly one category:

- **explained**: matched to a send the replay accepted;
- **contradiction**: matched only to sends the replay dropped (duplicate) or refused
  (rejected): the broker kept what the replay says it dropped;
- **unexplained**: no send of its MessageId near its enqueue time: a gap in the telemetry.

Two more views: **pairs** of kept messages under one uniqueness key closer than the replay's
window (the broker kept both, so its window is at most their gap, or detection is off), and
the **not kept** sends the replay accepted that the export lacks (consumed, expired or lost:
listed, not judged).

Why pairs bound the window and contradictions alone do not: a send at ``t`` is a duplicate
iff an accepted send of its key has ``anchor <= t < anchor + window`` (SPEC section 1). Two
kept messages of one key were both accepted, so the broker's window is at most their gap
(the later is accepted at exactly ``anchor + window``). A contradiction's gap to the replay's
original bounds the window only if the broker accepted that original too: when it dropped it
(a longer window anchored elsewhere), the gap says nothing. With an export of every accepted
message, replaying at the shortest gap between two kept messages of one key gives the broker's
verdicts on every key it holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

import pandas as pd
from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.analysis.selection import narrow
from dedup_lib.analysis.totals import ALL_ENTITIES, entity_column
from dedup_lib.columns import column, count_where, utc_wall_clock
from dedup_lib.errors import InputError, InputTypeError, excerpt
from dedup_lib.replay.sql_rules import INTERNAL, OUTPUT_COLUMNS, is_set, sql_rules
from dedup_lib.rules.durations import format_duration, format_window, parse_window
from dedup_lib.rules.policy import ACCEPTED, DUPLICATE, REJECTED, DedupPolicy
from dedup_lib.spark import to_pandas
from dedup_lib.text import shown

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: How far a kept message's enqueue time may lie from its send's expected enqueue time: the
#: clocks of client and broker differ, and telemetry may log the end of the send call.
TOLERANCE = timedelta(seconds=30)

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
Name = Literal["explained", "contradictions", "unexplained", "pairs", "not_kept"]

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
_OTHER = INTERNAL + "rc_other"
_PAIR_US = INTERNAL + "rc_pair_us"
_SCHEDULED = INTERNAL + "rc_scheduled"
_SENT_US = INTERNAL + "rc_sent_us"
_GAP_US = INTERNAL + "rc_gap_us"
_MICROS = 1_000_000


@dataclass(frozen=True)
class Reconciliation:
    """A replay against an export of what the broker kept (see :func:`reconcile`).

    Spark frames: ``explained``, ``contradictions`` and ``unexplained`` (the kept messages, by
    category, with :data:`ADDED`), ``pairs`` (two kept messages of one key closer than the
    window) and ``not_kept`` (accepted sends the export lacks). ``agreeing_window`` is the
    shortest gap between two kept messages of one key when shorter than the replay's window
    (the longest window that agrees with the export), ``shortest_gap`` the shortest gap of a
    contradiction whose original the broker kept too.
    """

    explained: DataFrame
    contradictions: DataFrame
    unexplained: DataFrame
    pairs: DataFrame
    not_kept: DataFrame
    policy: DedupPolicy
    tolerance: timedelta
    entity: str | None
    agreeing_window: timedelta | None
    shortest_gap: timedelta | None
    tally: Mapping[str, int] = field(repr=False)

    def counts(self) -> dict[str, int]:
        """``kept`` (= ``explained`` + ``contradictions`` + ``unexplained``), contradictions
        by the replay's verdict (``contradicted_duplicates``, ``contradicted_rejections``) and
        those whose original the broker kept (``originals_kept``), ``pairs``, ``accepted``
        sends and the ``not_kept`` among them. Counted once, by :func:`reconcile`."""
        return dict(self.tally)

    def summary(self) -> pd.DataFrame:
        """One row per category: ``category``, ``count``, ``what it means``, ``what to do``."""
        c, window = self.tally, format_window(self.policy.window)
        tolerance = format_window(self.tolerance)
        bound = (
            f"replay at {_replay_at(self.agreeing_window)}"
            if self.agreeing_window is not None
            else "check the entity's settings (az servicebus queue show)"
        )
        rows = [
            (
                "kept by the broker",
                c["kept"],
                "messages the export holds, in this entity and time range",
                "—",
            ),
            (
                EXPLAINED,
                c[EXPLAINED],
                "kept messages the replay accepted too",
                "nothing: the replay agrees",
            ),
            (
                "contradictions",
                c["contradictions"],
                f"kept messages the replay at {window} drops (duplicate) or refuses (rejected): "
                "the broker kept what the replay says it dropped",
                f"the real window is shorter or detection is off: {bound}; for rejections, "
                "check the telemetry's partition key and session id",
            ),
            (
                "unexplained (telemetry gaps)",
                c[UNEXPLAINED],
                f"kept messages with no send of their MessageId within {tolerance} of their "
                "enqueue time",
                "find the sender whose sends the telemetry lacks; if clocks differ by more, "
                "raise the tolerance (offset_s shows by how much they differ)",
            ),
            (
                "pairs inside the window",
                c["pairs"],
                f"two kept messages with one uniqueness key less than {window} apart: the "
                "broker kept both",
                "detection is off, or the window is at most the pair's gap: "
                + (bound if self.agreeing_window is not None else "check the settings"),
            ),
            (
                "accepted sends not kept",
                c["not_kept"],
                "sends the replay accepted that the export lacks: consumed, expired or lost",
                "nothing to judge; if the export was taken before consumers ran, they were lost",
            ),
        ]
        table = pd.DataFrame(rows, columns=["category", "count", "what it means", "what to do"])
        table["count"] = table["count"].astype("int64")
        return table

    def verdict(self) -> str:
        """The reconciliation in one paragraph of words, for a notebook or a report."""
        c, window = self.tally, format_window(self.policy.window)
        name = None if self.entity is None else shown(self.entity)
        where = "" if name is None else f" on {name}"
        subject = "The broker" if name is None else f"On {name}, the broker"
        if c["kept"] == 0:
            return (
                f"The export holds no message{where} in this time range: nothing to check "
                f"against the replay at {window}."
            )
        said: list[str] = []
        dups, refused = c["contradicted_duplicates"], c["contradicted_rejections"]
        if dups:
            text = (
                f"{subject} kept {_n(dups, 'message')} the replay at {window} calls "
                f"{'a duplicate' if dups == 1 else 'duplicates'}"
            )
            if self.agreeing_window is not None:
                text += f": its window is at most {_at_most(self.agreeing_window)}"
                text += ", or detection is off."
            elif self.shortest_gap is not None:
                text += (
                    f": its window is at most {_at_most(self.shortest_gap)}, or detection is off."
                )
            else:
                text += (
                    ": it did not keep the originals the replay matched them with (consumed, "
                    "or dropped by a window anchored elsewhere), so this export does not bound "
                    "its window."
                )
            said.append(text)
        if refused:
            said.append(
                f"It kept {_n(refused, 'message')} the replay calls rejected: the telemetry's "
                "properties (partition key, session id, length) differ from what reached it."
            )
        if c["pairs"] and not dups:
            assert self.agreeing_window is not None
            said.append(
                f"It kept {_n(c['pairs'], 'pair')} of messages with one key less than {window} "
                f"apart{where}: detection is off, or its window is at most "
                f"{_at_most(self.agreeing_window)}."
            )
        if not dups and not refused and not c["pairs"]:
            said.append(
                f"Every message the broker kept{where} that the telemetry explains agrees with "
                f"the replay at {window}."
            )
        if c[UNEXPLAINED]:
            said.append(
                f"{_n(c[UNEXPLAINED], 'kept message').capitalize()} "
                f"{'has' if c[UNEXPLAINED] == 1 else 'have'} no send in the telemetry within "
                f"{format_window(self.tolerance)} of "
                f"{'its' if c[UNEXPLAINED] == 1 else 'their'} enqueue time: the telemetry "
                "misses sends, or the clocks differ by more."
            )
        if c["not_kept"]:
            said.append(
                f"{_n(c['not_kept'], 'accepted send').capitalize()} "
                f"{'is' if c['not_kept'] == 1 else 'are'} not in the export (consumed, expired "
                "or lost; not judged)."
            )
        return " ".join(said)

    def table(self, name: Name, limit: int = 20) -> pd.DataFrame:
        """The first ``limit`` rows of one of the frames, in time order, as a small pandas
        table for display (internal order columns left out)."""
        frames = {
            "explained": self.explained,
            "contradictions": self.contradictions,
            "unexplained": self.unexplained,
            "pairs": self.pairs,
            "not_kept": self.not_kept,
        }
        if name not in frames:
            raise InputError(f"table: expected one of {', '.join(frames)}, got {excerpt(name)}")
        frame = frames[name]
        return to_pandas(frame.orderBy("send_time").limit(limit))


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _at_most(bound: timedelta) -> str:
    """A window bound as text that stays true: rounded up from a minute on, exact below;
    none at all when two messages of one key came at the same time."""
    seconds = bound.total_seconds()
    if seconds == 0:
        return "0s (it kept two messages of one key enqueued at the same time)"
    return format_duration(seconds, "up") if seconds >= 60 else format_window(bound)


def _replay_at(bound: timedelta) -> str:
    """A window to replay at that agrees with the broker: the bound rounded down to the
    second (a window at most the bound agrees), exact below a second."""
    whole = timedelta(seconds=int(bound.total_seconds()))
    return format_window(whole if whole else bound)


def parse_tolerance(value: timedelta | int | float | str) -> timedelta:
    """A matching tolerance: anything :func:`~dedup_lib.rules.durations.parse_window` reads,
    zero allowed."""
    try:
        return parse_window(value)
    except InputError as exc:
        raise InputError("tolerance: " + str(exc).removeprefix("window: ")) from exc


def reconcile(
    result: DataFrame,
    kept: DataFrame,
    policy: DedupPolicy | None = None,
    *,
    entity: str | None = None,
    start: str | datetime | None = None,
    end: str | datetime | None = None,
    tolerance: timedelta | int | float | str = TOLERANCE,
) -> Reconciliation:
    """Check a :func:`dedup_lib.detect_duplicates` ``result``, replayed with ``policy``,
    against ``kept``: the messages the broker holds (``message_id``, ``send_time`` = the
    enqueue time; optionally ``entity``, ``partition_key``, ``session_id``,
    ``scheduled_enqueue_time``, ``sequence_number``).

    ``entity`` narrows both to one queue or topic, and names the entity of a frame without an
    ``entity`` column (an export does not say which entity it came from). Without it, only
    the sends of the entities ``kept`` holds are compared: an export covers its own entities.
    ``start`` and ``end`` (ISO 8601, UTC without offset) narrow what is reported, by enqueue
    time for kept messages and send time for sends; the matching itself sees every row, so a
    row's category does not depend on the range.

    Matching: a kept message and a send match when entity and MessageId are equal (and the
    effective partition key, session id else partition key, where both name one) and the
    send's expected enqueue time (``scheduled_enqueue_time`` when set, else ``send_time``)
    lies within ``tolerance`` of the kept enqueue time. Kept messages, in enqueue time order
    (then ``sequence_number``), each take the earliest accepted send not yet taken: no
    accepted send explains two kept messages, and as many as possible are explained. A kept
    message left without one takes the nearest duplicate or rejected send (several may take
    the same): a contradiction. With none, it is unexplained.

    Rows are matched by their position, so the sends, the kept messages and the matches are
    materialized once (``localCheckpoint``); the frames returned read from there. Counted
    once, here: :meth:`Reconciliation.counts` runs no Spark job.
    """
    policy = _policy(policy)
    tol = parse_tolerance(tolerance)
    _check(result, kept)
    scope = None if entity in (None, ALL_ENTITIES) else entity
    kept = _utc(kept, "send_time")
    sends = _scoped(result, scope, "result", "entity" in kept.columns)
    held = _scoped(kept, scope, "kept", "entity" in result.columns)
    if scope is None:
        covered = held.select(F.col("entity").alias(_COVERED)).distinct()
        sends = sends.join(covered, sends["entity"].eqNullSafe(covered[_COVERED]), "left_semi")
    tol_us = tol // timedelta(microseconds=1)
    window_us = policy.window_micros

    held = held.select(
        "*",
        _time_us(held, "send_time").alias(_KUS),
        F.monotonically_increasing_id().alias(_KROW),
        (
            F.col("sequence_number").try_cast("long")
            if "sequence_number" in held.columns
            else F.lit(None).cast("long")
        ).alias(_KORDER),
        (
            F.col("scheduled_enqueue_time").isNotNull()
            if "scheduled_enqueue_time" in held.columns
            else F.lit(False)
        ).alias(_SCHEDULED),
        sql_rules(held, policy).key.alias(_KEY),
        *_identity(held),
    ).localCheckpoint()
    expected = (
        F.coalesce(_time_us(sends, "scheduled_enqueue_time"), _time_us(sends, "send_time"))
        if "scheduled_enqueue_time" in sends.columns
        else _time_us(sends, "send_time")
    )
    sends = sends.select(
        "*",
        expected.alias(_SUS),
        F.monotonically_increasing_id().alias(_SROW),
        *_identity(sends),
    ).localCheckpoint()
    edges = _candidates(held, sends, tol_us)
    matches = _matches(edges.where(F.col("verdict") == ACCEPTED)).localCheckpoint()
    other = _nearest(edges.where(F.col("verdict") != ACCEPTED))
    classified = _classified(held, sends, matches, other).localCheckpoint()

    kept_rows = narrow(classified, None, start, end)
    pairs = narrow(_pairs(classified, window_us), None, start, end)
    flagged = sends.join(
        matches.select(F.col(_SROW), F.lit(True).alias(_MATCH)), _SROW, "left"
    ).where(F.col("verdict") == ACCEPTED)
    accepted = narrow(flagged, None, start, end)
    not_kept = accepted.where(F.col(_MATCH).isNull()).select(*_public(result.columns))

    tally, shortest_gap = _tally(kept_rows)
    pair_row = pairs.agg(
        F.count(F.lit(1)), F.min(F.round(F.col("gap_s") * _MICROS)).cast("long")
    ).first()
    sends_row = accepted.agg(F.count(F.lit(1)), count_where(F.col(_MATCH).isNull())).first()
    assert pair_row is not None
    assert sends_row is not None
    tally["pairs"] = int(pair_row[0])
    tally["accepted"], tally["not_kept"] = int(sends_row[0]), int(sends_row[1])
    visible = [c for c in classified.columns if not c.startswith(INTERNAL)]
    by_category = {
        name: kept_rows.where(F.col("category") == name).select(*(column(c) for c in visible))
        for name in CATEGORIES
    }
    agreeing = None if pair_row[1] is None else timedelta(microseconds=int(pair_row[1]))
    return Reconciliation(
        explained=by_category[EXPLAINED],
        contradictions=by_category[CONTRADICTION],
        unexplained=by_category[UNEXPLAINED],
        pairs=pairs,
        not_kept=not_kept,
        policy=policy,
        tolerance=tol,
        entity=scope,
        agreeing_window=agreeing,
        shortest_gap=shortest_gap,
        tally=MappingProxyType(tally),
    )


def _policy(policy: DedupPolicy | None) -> DedupPolicy:
    if policy is None:
        return DedupPolicy()
    if not isinstance(policy, DedupPolicy):
        raise InputTypeError(
            f"reconcile: expected the DedupPolicy the result was replayed with, got "
            f"{type(policy).__name__}; with per-entity settings, reconcile one entity at a "
            "time: its own policy and entity=NAME"
        )
    return policy


def _check(result: DataFrame, kept: DataFrame) -> None:
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


def _utc(df: DataFrame, name: str) -> DataFrame:
    """``df`` with a ``timestamp_ntz`` column ``name`` read as UTC (a timestamp)."""
    if isinstance(df.schema[name].dataType, T.TimestampNTZType):
        return df.withColumn(name, utc_wall_clock(F.col(name)))
    return df


def _time_us(df: DataFrame, name: str) -> Column:
    value = F.col(name)
    if isinstance(df.schema[name].dataType, T.TimestampNTZType):
        value = utc_wall_clock(value)
    return F.unix_micros(value)


_COVERED = "__dedup_kept_entity"


def _scoped(df: DataFrame, scope: str | None, name: str, other_has_entity: bool) -> DataFrame:
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


def _candidates(held: DataFrame, sends: DataFrame, tol_us: int) -> DataFrame:
    """Every (kept message, send) pair that may match. Both sides are cut into time buckets
    at least as long as the tolerance, kept messages repeated into their neighbours, so that
    a hot MessageId pairs only sends near each other, not all with all."""
    size = max(tol_us, _MICROS)
    own = F.floor(F.col(_KUS) / size)
    kept_side = held.select(
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
    held: DataFrame, sends: DataFrame, matches: DataFrame, other: DataFrame
) -> DataFrame:
    """Every kept message once, with its category and the send behind it."""
    matched = matches.withColumnRenamed(_SROW, _MATCH)
    chosen = F.coalesce(F.col(_MATCH), F.col(_OTHER))
    category = (
        F.when(F.col(_MATCH).isNotNull(), F.lit(EXPLAINED))
        .when(F.col(_OTHER).isNotNull(), F.lit(CONTRADICTION))
        .otherwise(F.lit(UNEXPLAINED))
    )
    send_info = sends.select(
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
    # The accepted sends a kept message explains: a contradiction whose original is one of
    # them bounds the window by its gap.
    explained_originals = (
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
    joined = (
        held.join(matched, _KROW, "left")
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
    kept_columns = [c for c in held.columns if not c.startswith(INTERNAL)]
    return found.select(
        *(column(c) for c in kept_columns),
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


def _pairs(classified: DataFrame, window_us: int) -> DataFrame:
    """Each kept message with the previous kept message of its uniqueness key, when less
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


def _tally(kept_rows: DataFrame) -> tuple[dict[str, int], timedelta | None]:
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


def _public(columns: list[str]) -> Iterator[Column]:
    return (column(c) for c in [*columns, *([] if "entity" in columns else ["entity"])])
