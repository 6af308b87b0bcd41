"""``ReplayCache``: the verdicts of any window, answered from a compact snapshot in memory.

Only keys sent more than once can ever see a duplicate. One Spark pass collects the eligible
sends of those keys (entity, key, time, tie order, ground truth) into numpy arrays and counts
everything else per entity: sends to keys used once (always accepted), sends without a
MessageId (accepted, unprotected) and rejected sends (never judged). A window's verdicts are
then the anchor chain of each repeated key, walked for all keys at once with ``searchsorted``:
the same rule and the same order as :func:`dedup_lib.detect_duplicates`, so the figures agree
exactly, in milliseconds instead of a Spark job. Used by the window explorer and the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.analyses import NO_ENTITY, SUMMARY_COLUMNS, TRUTH_SUMMARY_COLUMNS, _with_total
from dedup_lib.engine import _reason_and_key, _validate
from dedup_lib.policy import NO_MESSAGE_ID_WARNING, REJECTED, DedupPolicy, parse_window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame

_POS = "__dedup_pos"
_SAFE = 1 << 62


@dataclass(frozen=True)
class Replay:
    """The verdicts of one window over the repeated keys of a :class:`ReplayCache`."""

    window_micros: int
    accepted: np.ndarray
    anchor: np.ndarray

    @property
    def duplicate(self) -> np.ndarray:
        return ~self.accepted


class ReplayCache:
    """Everything needed to give the verdicts of any window, for one partitioning mode.

    ``repeated`` has one row per eligible send of a key sent more than once, in replay order
    (entity, key, send time, event_id, input position): ``entity``, ``key``, ``segment`` (one
    number per entity and key), ``time_us`` and ``event_id``, plus ``logical_id``, ``attempt``
    and ``accepted_elsewhere`` when the input has ground truth. ``fixed`` counts the rest per
    entity. Build it with :meth:`build`."""

    def __init__(
        self,
        partitioning: bool,
        repeated: pd.DataFrame,
        fixed: pd.DataFrame,
        truth_fixed: pd.DataFrame | None,
    ) -> None:
        self.partitioning = partitioning
        self.repeated = repeated
        self.fixed = fixed
        self.truth_fixed = truth_fixed
        self._time = repeated["time_us"].to_numpy(dtype=np.int64)
        segment = repeated["segment"].to_numpy(dtype=np.int64)
        self._segment = segment
        starts: np.ndarray = (
            np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
            if len(segment)
            else np.zeros(0, dtype=np.int64)
        )
        self._starts = starts.astype(np.int64)
        # Time relative to the segment's first send: keys then fit side by side in one int64.
        first = np.repeat(self._time[self._starts], np.diff(np.r_[self._starts, len(segment)]))
        self._relative = self._time - first
        self._span = int(self._relative.max()) + 1 if len(segment) else 1

    @property
    def has_ground_truth(self) -> bool:
        return self.truth_fixed is not None

    @classmethod
    def build(
        cls, df: DataFrame, partitioning: bool = False, carry: Sequence[str] = ()
    ) -> ReplayCache:
        """One Spark pass over ``df`` (the input of ``detect_duplicates``); ``carry`` names
        input columns to keep in :attr:`repeated` (``cause``, for example)."""
        _validate(df)
        columns = list(df.columns)
        missing = [c for c in carry if c not in columns]
        if missing:
            raise ValueError(
                f"ReplayCache.build: carry names column(s) {', '.join(missing)}, which the "
                f"input does not have; it has {', '.join(columns)}"
            )
        df = df.withColumn(_POS, F.monotonically_increasing_id())
        if "event_id" not in columns:
            df = df.withColumn("event_id", F.col(_POS))
        if isinstance(df.schema["send_time"].dataType, T.TimestampNTZType):
            time = F.unix_micros(
                F.concat(F.col("send_time").cast("string"), F.lit("Z")).try_cast("timestamp")
            )
        else:
            time = F.unix_micros(F.col("send_time"))
        verdict, reason, key = _reason_and_key(df, DedupPolicy(partitioning=partitioning))
        truth = all(c in columns for c in ("logical_id", "attempt"))
        entity = F.col("entity").cast("string") if "entity" in columns else F.lit(None)
        base = df.select(
            entity.cast("string").alias("entity"),
            key.alias("key"),
            verdict.alias("verdict"),
            reason.alias("reason"),
            time.alias("time_us"),
            F.col("event_id"),
            F.col(_POS).alias("pos"),
            *(
                [F.col("logical_id"), F.col("attempt").cast("int").alias("attempt")]
                if truth
                else []
            ),
            *(F.col(c) for c in carry if c not in ("logical_id", "attempt", "event_id")),
        )
        sends_per_key = F.count(F.lit(1)).over(Window.partitionBy("entity", "key"))
        classified = base.withColumn(
            "kind",
            F.when(F.col("verdict") == REJECTED, F.lit("rejected"))
            .when(F.col("reason") == NO_MESSAGE_ID_WARNING, F.lit("no_id"))
            .when(sends_per_key > 1, F.lit("repeated"))
            .otherwise(F.lit("single")),
        )
        classified = classified.persist()
        try:
            repeated = classified.where(F.col("kind") == "repeated").drop("verdict", "reason")
            fixed = (
                classified.where(F.col("kind") != "repeated")
                .groupBy("entity", "kind")
                .agg(
                    F.count(F.lit(1)).alias("sends"),
                    *(
                        [F.count(F.when(F.col("attempt") > 1, True)).alias("resends")]
                        if truth
                        else []
                    ),
                )
                .toPandas()
            )
            truth_fixed = None
            if truth:
                always = F.col("kind").isin("single", "no_id")
                per_message = classified.groupBy("entity", "logical_id").agg(
                    F.count(F.when(always, True)).alias("accepted_elsewhere"),
                    F.count(F.when(F.col("kind") == "repeated", True)).alias("repeated"),
                    F.count(F.when(F.col("kind") == "rejected", True)).alias("rejected"),
                    F.count(F.lit(1)).alias("sends"),
                )
                repeated = repeated.join(
                    per_message.select("entity", "logical_id", "accepted_elsewhere"),
                    on=["entity", "logical_id"],
                    how="left",
                )
                # Messages with no send in a repeated key: their fate does not depend on the
                # window. Counted once here.
                settled = per_message.where(F.col("repeated") == 0)
                truth_fixed = (
                    per_message.groupBy("entity")
                    .agg(F.count(F.lit(1)).alias("messages"))
                    .join(
                        settled.groupBy("entity").agg(
                            F.sum(F.greatest(F.col("accepted_elsewhere") - 1, F.lit(0))).alias(
                                "extra_deliveries"
                            ),
                            F.count(F.when(F.col("rejected") == F.col("sends"), True)).alias(
                                "messages_rejected"
                            ),
                        ),
                        on="entity",
                        how="left",
                    )
                    .toPandas()
                )
            rows = repeated.toPandas()
        finally:
            classified.unpersist()
        rows = rows.sort_values(
            ["entity", "key", "time_us", "event_id", "pos"],
            na_position="last",
            kind="stable",
        ).reset_index(drop=True)
        entity_null = rows["entity"].isna().to_numpy()
        entities = rows["entity"].fillna("").to_numpy(dtype=object)
        keys = rows["key"].to_numpy(dtype=object)
        change = np.ones(len(rows), dtype=bool)
        if len(rows) > 1:
            change[1:] = (
                (entities[1:] != entities[:-1])
                | (entity_null[1:] != entity_null[:-1])
                | (keys[1:] != keys[:-1])
            )
        rows["segment"] = np.cumsum(change) - 1
        if truth and "accepted_elsewhere" in rows:
            rows["accepted_elsewhere"] = rows["accepted_elsewhere"].fillna(0).astype("int64")
        return cls(partitioning, rows, fixed, truth_fixed)

    def replay(self, window: timedelta | float | str) -> Replay:
        """The anchor chain of every repeated key at ``window``: accepted or duplicate, and
        the row index of the accepted send that each send counts against."""
        micros = _micros(window)
        n = len(self._time)
        accepted = np.zeros(n, dtype=bool)
        anchor = np.arange(n, dtype=np.int64)
        if n == 0:
            return Replay(micros, accepted, anchor)
        # Keys side by side on one axis: segment * stride + time since the key's first send.
        stride = self._span + micros + 1
        per_chunk = max(1, _SAFE // stride)
        for low in range(0, int(self._segment[-1]) + 1, per_chunk):
            rows = np.flatnonzero((self._segment >= low) & (self._segment < low + per_chunk))
            if len(rows) == 0:
                continue
            line = (self._segment[rows] - low) * stride + self._relative[rows]
            current = np.flatnonzero(
                np.r_[True, self._segment[rows][1:] != self._segment[rows][:-1]]
            )
            while len(current):
                accepted[rows[current]] = True
                following = np.searchsorted(line, line[current] + micros, side="left")
                following = np.minimum(following, len(rows))
                span_start = current
                span_end = following
                lengths = span_end - span_start
                anchor[rows[np.repeat(span_start, lengths) + _ranges(lengths)]] = np.repeat(
                    rows[current], lengths
                )
                inside = following < len(rows)
                same = np.zeros(len(current), dtype=bool)
                same[inside] = (
                    self._segment[rows][following[inside]] == self._segment[rows][current[inside]]
                )
                current = following[same]
        return Replay(micros, accepted, anchor)

    def summary(self, window: timedelta | float | str) -> pd.DataFrame:
        """:func:`dedup_lib.summarize` of ``detect_duplicates`` at ``window``, without Spark."""
        result = self.replay(window)
        rows = self.repeated.assign(accepted=result.accepted)
        repeated = rows.groupby("entity", dropna=False).agg(
            sends=("accepted", "size"), accepted=("accepted", "sum")
        )
        repeated["duplicates"] = repeated["sends"] - repeated["accepted"]
        fixed = self.fixed.pivot_table(
            index="entity", columns="kind", values="sends", aggfunc="sum", dropna=False
        )
        table = pd.concat([repeated, fixed], axis=1).fillna(0)
        for kind in ("single", "no_id", "rejected"):
            if kind not in table:
                table[kind] = 0
        table = pd.DataFrame(
            {
                "sends": table["sends"] + table["single"] + table["no_id"] + table["rejected"],
                "accepted": table["accepted"] + table["single"] + table["no_id"],
                "duplicates": table["duplicates"],
                "rejected": table["rejected"],
                "without_message_id": table["no_id"],
            }
        ).astype("int64")
        table.index = [NO_ENTITY if pd.isna(e) else e for e in table.index]
        table = table.groupby(level=0).sum().rename_axis("entity").reset_index()
        return _finish(table, list(SUMMARY_COLUMNS))

    def truth_summary(self, window: timedelta | float | str) -> pd.DataFrame:
        """:func:`dedup_lib.ground_truth_summary` of ``detect_duplicates`` at ``window``."""
        if self.truth_fixed is None:
            raise ValueError(
                "truth_summary: the input has no ground truth columns (logical_id, attempt)"
            )
        result = self.replay(window)
        rows = self.repeated.assign(
            entity=self.repeated["entity"].fillna(NO_ENTITY),
            accepted=result.accepted,
            resend=self.repeated["attempt"] > 1,
        )
        rows["caught"] = rows["resend"] & ~rows["accepted"]
        rows["first_dropped"] = ~rows["resend"] & ~rows["accepted"]
        per_message = rows.groupby(["entity", "logical_id"]).agg(
            accepted=("accepted", "sum"),
            duplicates=("accepted", lambda a: int((~a).sum())),
            elsewhere=("accepted_elsewhere", "first"),
            caught=("caught", "sum"),
            first_dropped=("first_dropped", "sum"),
        )
        delivered = per_message["accepted"] + per_message["elsewhere"]
        per_message["extra"] = (delivered - 1).clip(lower=0)
        per_message["lost"] = (delivered == 0) & (per_message["duplicates"] > 0)
        moving = per_message.groupby("entity").agg(
            resends_caught=("caught", "sum"),
            extra_deliveries=("extra", "sum"),
            messages_lost=("lost", "sum"),
            first_sends_dropped=("first_dropped", "sum"),
        )
        fixed = self.fixed.assign(entity=self.fixed["entity"].fillna(NO_ENTITY))
        sends = fixed.groupby("entity")[["sends", "resends"]].sum()
        repeated = rows.groupby("entity").agg(sends=("resend", "size"), resends=("resend", "sum"))
        sends = sends.add(repeated, fill_value=0)
        settled = self.truth_fixed.assign(entity=self.truth_fixed["entity"].fillna(NO_ENTITY))
        settled = settled.set_index("entity")
        table = pd.concat([settled[["messages"]], sends], axis=1)
        table = table.join(moving, how="left").fillna(0)
        table["extra_deliveries"] += settled["extra_deliveries"].reindex(table.index).fillna(0)
        table["messages_rejected"] = settled["messages_rejected"].reindex(table.index).fillna(0)
        table = table.astype("int64").rename_axis("entity").reset_index()
        return _finish(table, list(TRUTH_SUMMARY_COLUMNS))


def _finish(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    counts = [c for c in columns[1:] if c != "share_caught"]
    table = _with_total(table, counts)
    if "share_caught" in columns:
        judged = table["accepted"] + table["duplicates"]
        table["share_caught"] = (table["duplicates"] / judged.where(judged > 0)).astype("float64")
    return table[columns]


def _ranges(lengths: np.ndarray) -> np.ndarray:
    """``[0..l0), [0..l1), ...`` concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    ranges: np.ndarray = np.arange(total, dtype=np.int64) - np.repeat(ends - lengths, lengths)
    return ranges


def _micros(window: timedelta | float | str) -> int:
    return int(parse_window(window) // timedelta(microseconds=1))
