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
class _TruthCodes:
    message: np.ndarray
    messages: int
    message_entity: np.ndarray
    entities: list[str]
    elsewhere: np.ndarray
    resend: np.ndarray
    row_entity: np.ndarray


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
        bucket_us: int = 60_000_000,
    ) -> None:
        self.partitioning = partitioning
        self.bucket_us = bucket_us
        self._truth: _TruthCodes | None = None
        self._replays: dict[int, Replay] = {}
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
        cls,
        df: DataFrame,
        partitioning: bool = False,
        carry: Sequence[str] = (),
        bucket: timedelta | float | str = "PT1M",
    ) -> ReplayCache:
        """One Spark pass over ``df`` (the input of ``detect_duplicates``); ``carry`` names
        input columns to keep in :attr:`repeated` (``cause``, for example). Sends to keys
        used once are counted per ``bucket`` of time, the resolution of time charts."""
        _validate(df)
        bucket_us = _micros(bucket)
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
                .groupBy(
                    "entity",
                    "kind",
                    (F.floor(F.col("time_us") / bucket_us) * bucket_us).alias("bucket_us"),
                )
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
        return cls(partitioning, rows, fixed, truth_fixed, bucket_us)

    def replay(self, window: timedelta | float | str) -> Replay:
        """The anchor chain of every repeated key at ``window``: accepted or duplicate, and
        the row index of the accepted send that each send counts against."""
        micros = _micros(window)
        if micros in self._replays:
            return self._replays[micros]
        n = len(self._time)
        accepted = np.zeros(n, dtype=bool)
        anchor = np.arange(n, dtype=np.int64)
        # Keys side by side on one axis: segment * stride + time since the key's first send.
        stride = self._span + micros + 1
        per_chunk = max(1, _SAFE // stride)
        segments = int(self._segment[-1]) + 1 if n else 0
        for low in range(0, segments, per_chunk):
            if per_chunk >= segments:
                rows = np.arange(n, dtype=np.int64)
            else:
                rows = np.flatnonzero((self._segment >= low) & (self._segment < low + per_chunk))
            segment = self._segment[rows]
            line = (segment - low) * stride + self._relative[rows]
            current = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
            while len(current):
                accepted[rows[current]] = True
                following = np.searchsorted(line, line[current] + micros, side="left")
                lengths = following - current
                anchor[rows[np.repeat(current, lengths) + _ranges(lengths)]] = np.repeat(
                    rows[current], lengths
                )
                inside = following < len(rows)
                same = np.zeros(len(current), dtype=bool)
                same[inside] = segment[following[inside]] == segment[current[inside]]
                current = following[same]
        replay = Replay(micros, accepted, anchor)
        if len(self._replays) >= 8:
            self._replays.pop(next(iter(self._replays)))
        self._replays[micros] = replay
        return replay

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

    def _truth_codes(self) -> _TruthCodes:
        """Row-to-message and message-to-entity numbering, computed once."""
        if self._truth is None:
            rows = self.repeated
            entity = rows["entity"].fillna(NO_ENTITY).to_numpy(dtype=object)
            pairs = pd.MultiIndex.from_arrays([entity, rows["logical_id"].to_numpy()])
            message, uniques = pd.factorize(pairs)
            entities, message_entity = np.unique(
                uniques.get_level_values(0).to_numpy(dtype=object), return_inverse=True
            )
            elsewhere = np.zeros(len(uniques))
            elsewhere[message] = rows["accepted_elsewhere"].to_numpy(dtype=float)
            self._truth = _TruthCodes(
                message=message,
                messages=len(uniques),
                message_entity=message_entity,
                entities=list(entities),
                elsewhere=elsewhere,
                resend=rows["attempt"].to_numpy() > 1,
                row_entity=entity,
            )
        return self._truth

    def over_time(self, window: timedelta | float | str) -> pd.DataFrame:
        """Sends per entity and time bucket at ``window``: ``entity``, ``time`` (UTC, bucket
        start), ``sends``, ``duplicates`` (dropped by the broker), ``rejected``. Sends without a
        send_time (rejected) have no bucket and are left out."""
        accepted = self.replay(window).accepted
        bucket = self.bucket_us
        repeated = pd.DataFrame(
            {
                "entity": self.repeated["entity"].fillna(NO_ENTITY).to_numpy(dtype=object),
                "bucket_us": (self._time // bucket) * bucket,
                "sends": 1,
                "duplicates": (~accepted).astype("int64"),
                "rejected": 0,
            }
        )
        fixed = self.fixed.dropna(subset=["bucket_us"])
        fixed = pd.DataFrame(
            {
                "entity": fixed["entity"].fillna(NO_ENTITY).to_numpy(dtype=object),
                "bucket_us": fixed["bucket_us"].astype("int64").to_numpy(),
                "sends": fixed["sends"].to_numpy(),
                "duplicates": 0,
                "rejected": np.where(fixed["kind"] == "rejected", fixed["sends"], 0),
            }
        )
        table = (
            pd.concat([repeated, fixed], ignore_index=True)
            .groupby(["entity", "bucket_us"], as_index=False)[["sends", "duplicates", "rejected"]]
            .sum()
        )
        table.insert(1, "time", pd.to_datetime(table.pop("bucket_us"), unit="us", utc=True))
        return table

    def top_keys(self, window: timedelta | float | str, n: int = 10) -> pd.DataFrame:
        """The keys with the most sends dropped as duplicates at ``window``: ``entity``,
        ``key``, ``sends``, ``duplicates``, and ``messages`` when there is ground truth (more
        than one means different messages share the key: a reused id)."""
        accepted = self.replay(window).accepted
        rows = self.repeated.assign(
            entity=self.repeated["entity"].fillna(NO_ENTITY), duplicates=~accepted
        )
        agg: dict[str, tuple[str, str]] = {
            "sends": ("duplicates", "size"),
            "duplicates": ("duplicates", "sum"),
        }
        if self.has_ground_truth:
            agg["messages"] = ("logical_id", "nunique")
        table = rows.groupby(["entity", "key"], as_index=False).agg(**agg)
        table = table.sort_values(["duplicates", "entity", "key"], ascending=[False, True, True])
        return table.head(n).reset_index(drop=True)

    def resend_delays(self) -> pd.DataFrame:
        """Each send to a repeated key after the key's first: ``entity``, ``key``, ``time_us``,
        ``delay_s`` since the key's previous send, and the carried columns. The same at every
        window: what a window of ``w`` does with it is decided by the anchor, not by this."""
        rows = self.repeated
        segment = self._segment
        later = np.r_[False, segment[1:] == segment[:-1]] if len(segment) else np.zeros(0, bool)
        previous = np.r_[0, self._time[:-1]] if len(segment) else np.zeros(0, np.int64)
        delays = rows.loc[later].drop(columns=["segment", "pos"], errors="ignore")
        return delays.assign(delay_s=(self._time - previous)[later] / 1e6).reset_index(drop=True)

    def held_over_time(self, window: timedelta | float | str) -> pd.DataFrame:
        """How many ids the duplicate history holds at the end of each time bucket, per entity:
        every accepted send that has a MessageId is held for ``window`` (SPEC section 5).
        Columns ``entity``, ``time`` (UTC), ``held``. At the cache's bucket resolution."""
        micros = _micros(window)
        replay = self.replay(micros / 1e6)
        bucket = self.bucket_us
        accepted = self.repeated.loc[replay.accepted, ["entity"]].assign(
            bucket_us=(self._time[replay.accepted] // bucket) * bucket, sends=1
        )
        singles = self.fixed.loc[self.fixed["kind"] == "single", ["entity", "bucket_us", "sends"]]
        events = pd.concat([accepted, singles], ignore_index=True)
        if events.empty:
            return pd.DataFrame({"entity": [], "time": [], "held": []})
        events["entity"] = events["entity"].fillna(NO_ENTITY)
        events["bucket_us"] = events["bucket_us"].astype("int64")
        grid = np.arange(
            events["bucket_us"].min(), events["bucket_us"].max() + bucket + micros, bucket
        )
        width = max(1, -(-micros // bucket))
        frames = []
        for entity, group in events.groupby("entity"):
            counts = group.groupby("bucket_us")["sends"].sum().reindex(grid, fill_value=0)
            held = counts.rolling(width, min_periods=1).sum().astype("int64")
            frames.append(
                pd.DataFrame(
                    {
                        "entity": entity,
                        "time": pd.to_datetime(grid + bucket, unit="us", utc=True),
                        "held": held.to_numpy(),
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)

    def sweep(self, windows: Sequence[timedelta | float | str] | None = None) -> pd.DataFrame:
        """One row per window (default :func:`window_grid`): ``window_s``, ``duplicates``,
        ``share_caught`` (of judged sends), ``peak_held`` (most ids held at once, all
        entities), and with ground truth ``resends``, ``resends_caught``,
        ``share_resends_caught``, ``catchable_resends`` (resends that reuse a key sent before:
        the only ones any window can catch), ``share_catchable_caught``,
        ``extra_deliveries`` and ``messages_lost``."""
        rows = []
        for window in windows if windows is not None else window_grid():
            micros = _micros(window)
            total = self.summary(micros / 1e6).iloc[-1]
            held = self.held_over_time(micros / 1e6)
            row: dict[str, float] = {
                "window_s": micros / 1e6,
                "duplicates": int(total["duplicates"]),
                "share_caught": float(total["share_caught"]),
                "peak_held": int(held.groupby("time")["held"].sum().max()) if len(held) else 0,
            }
            if self.has_ground_truth:
                truth = self.truth_summary(micros / 1e6).iloc[-1]
                resends = int(truth["resends"])
                catchable = int((self.repeated["attempt"] > 1).sum())
                row |= {
                    "resends": resends,
                    "catchable_resends": catchable,
                    "resends_caught": int(truth["resends_caught"]),
                    "share_catchable_caught": (
                        truth["resends_caught"] / catchable if catchable else float("nan")
                    ),
                    "share_resends_caught": truth["resends_caught"] / resends
                    if resends
                    else float("nan"),
                    "extra_deliveries": int(truth["extra_deliveries"]),
                    "messages_lost": int(truth["messages_lost"]),
                }
            rows.append(row)
        return pd.DataFrame(rows)

    def truth_summary(self, window: timedelta | float | str) -> pd.DataFrame:
        """:func:`dedup_lib.ground_truth_summary` of ``detect_duplicates`` at ``window``."""
        if self.truth_fixed is None:
            raise ValueError(
                "truth_summary: the input has no ground truth columns (logical_id, attempt)"
            )
        accepted = self.replay(window).accepted
        duplicate = ~accepted
        m = self._truth_codes()
        count = m.messages

        def per_message(values: np.ndarray) -> np.ndarray:
            return np.bincount(m.message, weights=values, minlength=count)

        def per_entity(values: np.ndarray) -> np.ndarray:
            return np.bincount(m.message_entity, weights=values, minlength=len(m.entities))

        delivered = per_message(accepted) + m.elsewhere
        lost = (delivered == 0) & (per_message(duplicate) > 0)
        moving = pd.DataFrame(
            {
                "resends_caught": per_entity(per_message(m.resend & duplicate)),
                "extra_deliveries": per_entity(np.clip(delivered - 1, 0, None)),
                "messages_lost": per_entity(lost.astype(float)),
                "first_sends_dropped": per_entity(per_message(~m.resend & duplicate)),
            },
            index=pd.Index(m.entities, name="entity"),
        )
        rows = pd.DataFrame({"entity": m.row_entity, "resend": m.resend})
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


def window_grid(points: int = 50, low: float = 20.0, high: float = 7 * 86400.0) -> list[float]:
    """``points`` windows in seconds, evenly spaced on a log scale from ``low`` to ``high``
    (the service's bounds by default), rounded to the microsecond."""
    return [round(float(w), 6) for w in np.geomspace(low, high, points)]


def smallest_window(
    sweep: pd.DataFrame, target: float = 0.99, column: str | None = None
) -> pd.Series | None:
    """The first row of ``sweep`` whose share caught reaches ``target``: of the resends any
    window can catch when there is ground truth, else of judged sends. None when no window
    does."""
    column = column or (
        "share_catchable_caught" if "share_catchable_caught" in sweep else "share_caught"
    )
    reached = sweep[sweep[column] >= target]
    return None if reached.empty else reached.iloc[0]


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
