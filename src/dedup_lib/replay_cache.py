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
class _Codes:
    names: list[str]
    entity: np.ndarray
    bucket: np.ndarray
    low: int
    fixed: pd.DataFrame
    fixed_entity: np.ndarray
    segment_sends: np.ndarray
    segment_entity: np.ndarray
    segment_key: np.ndarray


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
        self._coded: _Codes | None = None
        self._delays: pd.DataFrame | None = None
        self._messages_per_segment: np.ndarray | None = None
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
        persisted = [classified]
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
                per_message = (
                    classified.groupBy("entity", "logical_id")
                    .agg(
                        F.count(F.when(always, True)).alias("accepted_elsewhere"),
                        F.count(F.when(F.col("kind") == "repeated", True)).alias("repeated"),
                        F.count(F.when(F.col("kind") == "rejected", True)).alias("rejected"),
                        F.count(F.lit(1)).alias("sends"),
                    )
                    .persist()
                )
                persisted.append(per_message)
                repeated = repeated.join(
                    per_message.select("entity", "logical_id", "accepted_elsewhere"),
                    on=["entity", "logical_id"],
                    how="left",
                )
                # Messages with no send in a repeated key: their fate does not depend on the
                # window. Counted once here, in the same aggregation as all messages.
                settled = F.col("repeated") == 0
                truth_fixed = (
                    per_message.groupBy("entity")
                    .agg(
                        F.count(F.lit(1)).alias("messages"),
                        F.sum(
                            F.when(settled, F.greatest(F.col("accepted_elsewhere") - 1, F.lit(0)))
                        ).alias("extra_deliveries"),
                        F.count(
                            F.when(settled & (F.col("rejected") == F.col("sends")), True)
                        ).alias("messages_rejected"),
                    )
                    .toPandas()
                )
                truth_fixed["extra_deliveries"] = truth_fixed["extra_deliveries"].fillna(0)
            rows = repeated.toPandas()
        finally:
            for frame in persisted:
                frame.unpersist()
        # One number per (entity, key), null entity apart from "": only grouping matters, not
        # the order of keys. Sorting numbers is much faster than sorting the strings.
        if len(rows):
            pairs = pd.MultiIndex.from_arrays(
                [rows["entity"].isna(), rows["entity"].fillna(""), rows["key"]]
            )
            rows["segment"] = pd.factorize(pairs)[0]
        else:
            rows["segment"] = np.zeros(0, dtype=np.int64)
        rows = rows.sort_values(
            ["segment", "time_us", "event_id", "pos"], na_position="last", kind="stable"
        ).reset_index(drop=True)
        # Renumber in row order, so segments are 0, 1, 2, ... down the table.
        segment = rows["segment"].to_numpy()
        change = np.ones(len(rows), dtype=bool)
        change[1:] = segment[1:] != segment[:-1]
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
        accepted = self.replay(window).accepted
        c = self._codes()
        count = len(c.names)
        sends = np.bincount(c.entity, minlength=count)
        kept = np.bincount(c.entity, weights=accepted, minlength=count).astype("int64")
        repeated = pd.DataFrame(
            {"sends": sends, "accepted": kept, "duplicates": sends - kept},
            index=pd.Index(c.names, name="entity"),
        )
        repeated = repeated[repeated["sends"] > 0]
        fixed = self._codes().fixed.pivot_table(
            index="entity", columns="kind", values="sends", aggfunc="sum"
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
                "not_checked": 0,
            }
        ).astype("int64")
        table.index = [NO_ENTITY if pd.isna(e) else e for e in table.index]
        table = table.groupby(level=0).sum().rename_axis("entity").reset_index()
        return _finish(table, list(SUMMARY_COLUMNS))

    def _codes(self) -> _Codes:
        """Entity and time-bucket numbering of the repeated rows, and the window-independent
        counts, computed once."""
        if self._coded is None:
            bucket = self.bucket_us
            repeated_entity = self.repeated["entity"].fillna(NO_ENTITY).to_numpy(dtype=object)
            fixed = self.fixed.assign(entity=self.fixed["entity"].fillna(NO_ENTITY))
            names = sorted(set(repeated_entity) | set(fixed["entity"]))
            index = {name: i for i, name in enumerate(names)}
            entity = np.array([index[e] for e in repeated_entity], dtype=np.int64)
            starts = (self._time // bucket) * bucket
            timed = fixed.dropna(subset=["bucket_us"])
            lows = [int(starts.min())] if len(starts) else []
            if len(timed):
                lows.append(int(timed["bucket_us"].min()))
            low = min(lows) if lows else 0
            segment_sends = np.bincount(self._segment) if len(self._segment) else np.zeros(0)
            first_row = self._starts
            self._coded = _Codes(
                names=names,
                entity=entity,
                bucket=(starts - low) // bucket,
                low=low,
                fixed=fixed,
                fixed_entity=np.array([index[e] for e in fixed["entity"]], dtype=np.int64),
                segment_sends=segment_sends,
                segment_entity=entity[first_row] if len(first_row) else entity[:0],
                segment_key=self.repeated["key"].to_numpy(dtype=object)[first_row],
            )
        return self._coded

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
        c = self._codes()
        timed = c.fixed.dropna(subset=["bucket_us"])
        fixed_bucket = ((timed["bucket_us"].to_numpy() - c.low) // self.bucket_us).astype("int64")
        fixed_entity = c.fixed_entity[c.fixed["bucket_us"].notna().to_numpy()]
        buckets = int(max(c.bucket.max(initial=-1), fixed_bucket.max(initial=-1))) + 1
        cells = len(c.names) * buckets
        if cells == 0:
            return pd.DataFrame(
                {"entity": [], "time": [], "sends": [], "duplicates": [], "rejected": []}
            )
        repeated_cell = c.entity * buckets + c.bucket
        fixed_cell = fixed_entity * buckets + fixed_bucket
        sends = np.bincount(repeated_cell, minlength=cells) + np.bincount(
            fixed_cell, weights=timed["sends"].to_numpy(), minlength=cells
        )
        duplicates = np.bincount(repeated_cell, weights=~accepted, minlength=cells)
        rejected_rows = (timed["kind"] == "rejected").to_numpy()
        rejected = np.bincount(
            fixed_cell[rejected_rows], weights=timed["sends"].to_numpy()[rejected_rows],
            minlength=cells,
        )  # fmt: skip
        used = np.flatnonzero(sends)
        return pd.DataFrame(
            {
                "entity": np.asarray(c.names, dtype=object)[used // buckets],
                "time": pd.to_datetime(
                    c.low + (used % buckets) * self.bucket_us, unit="us", utc=True
                ),
                "sends": sends[used].astype("int64"),
                "duplicates": duplicates[used].astype("int64"),
                "rejected": rejected[used].astype("int64"),
            }
        )

    def top_keys(self, window: timedelta | float | str, n: int = 10) -> pd.DataFrame:
        """The keys with the most sends dropped as duplicates at ``window``: ``entity``,
        ``key``, ``sends``, ``duplicates``, and ``messages`` when there is ground truth (more
        than one means different messages share the key: a reused id)."""
        accepted = self.replay(window).accepted
        c = self._codes()
        if len(c.segment_sends) == 0:
            return pd.DataFrame({"entity": [], "key": [], "sends": [], "duplicates": []})
        duplicates = np.bincount(self._segment, weights=~accepted).astype("int64")
        names = np.asarray(c.names, dtype=object)
        table = pd.DataFrame(
            {
                "entity": names[c.segment_entity],
                "key": c.segment_key,
                "sends": c.segment_sends.astype("int64"),
                "duplicates": duplicates,
            }
        )
        if self.has_ground_truth:
            if self._messages_per_segment is None:
                pairs = self.repeated[["segment", "logical_id"]].drop_duplicates()
                self._messages_per_segment = np.bincount(pairs["segment"].to_numpy())
            table["messages"] = self._messages_per_segment.astype("int64")
        # Ties by entity and key, as a stable order: most duplicates first.
        top = table.nlargest(max(n * 4, n), "duplicates", keep="all")
        top = top.sort_values(["duplicates", "entity", "key"], ascending=[False, True, True])
        return top.head(n).reset_index(drop=True)

    def resend_delays(self) -> pd.DataFrame:
        """Each send to a repeated key after the key's first: ``entity``, ``key``, ``time_us``,
        ``time`` (UTC), ``delay_s`` since the key's previous send, and the carried columns. The
        same at every window (computed once): what a window does with a resend depends on the
        anchor, not on this delay."""
        if self._delays is None:
            segment = self._segment
            later = np.r_[False, segment[1:] == segment[:-1]] if len(segment) else np.zeros(0, bool)
            previous = np.r_[0, self._time[:-1]] if len(segment) else np.zeros(0, np.int64)
            delays = self.repeated.loc[later].drop(columns=["segment", "pos"], errors="ignore")
            self._delays = delays.assign(
                delay_s=(self._time - previous)[later] / 1e6,
                time=pd.to_datetime(self._time[later], unit="us", utc=True),
            ).reset_index(drop=True)
        return self._delays

    def held_over_time(self, window: timedelta | float | str) -> pd.DataFrame:
        """How many ids the duplicate history holds at the end of each time bucket, per entity:
        every accepted send that has a MessageId is held for ``window`` (SPEC section 5).
        Columns ``entity``, ``time`` (UTC), ``held``. At the cache's bucket resolution."""
        micros = _micros(window)
        accepted = self.replay(micros / 1e6).accepted
        bucket = self.bucket_us
        c = self._codes()
        singles = c.fixed["kind"].to_numpy() == "single"
        single_bucket = ((c.fixed["bucket_us"].to_numpy()[singles] - c.low) // bucket).astype(
            "int64"
        )
        entity = np.r_[c.entity[accepted], c.fixed_entity[singles]]
        where = np.r_[c.bucket[accepted], single_bucket].astype("int64")
        weight = np.r_[np.ones(int(accepted.sum())), c.fixed["sends"].to_numpy()[singles]]
        if len(where) == 0:
            return pd.DataFrame({"entity": [], "time": [], "held": []})
        width = max(1, -(-micros // bucket))
        length = int(where.max()) + 1 + width
        times = pd.to_datetime(c.low + (np.arange(length) + 1) * bucket, unit="us", utc=True)
        frames = []
        for code in np.unique(entity):
            mine = entity == code
            counts = np.bincount(where[mine], weights=weight[mine], minlength=length)
            total = np.r_[0.0, np.cumsum(counts)]
            held = total[1:] - total[np.maximum(np.arange(1, length + 1) - width, 0)]
            first = int(where[mine].min())
            frames.append(
                pd.DataFrame(
                    {
                        "entity": c.names[code],
                        "time": times[first:],
                        "held": np.rint(held[first:]).astype("int64"),
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
                catchable = int(self._truth_codes().resend.sum())
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
