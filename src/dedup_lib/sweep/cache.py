"""``ReplayCache``: the verdicts of any window, answered from a compact snapshot in memory.

Spark runs once, in :func:`dedup_lib.sweep.collect.collect`: the sends of keys sent more than
once come back in replay order, everything else as counts per entity and time bucket. A
window's verdicts are then the anchor chain of each repeated key
(:func:`dedup_lib.sweep.anchors.walk_anchors`): the same rule and the same order as
:func:`dedup_lib.detect_duplicates`, so the figures agree exactly, in milliseconds instead of
a Spark job. The views here (summary, sends over time, top keys, resend delays, ids held, the
sweep) read those verdicts; ground truth is in :mod:`dedup_lib.sweep.truth`. Used by the
window explorer and the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dedup_lib.analysis.summaries import SUMMARY_COLUMNS
from dedup_lib.analysis.totals import ALL_ENTITIES, NO_ENTITY, with_total
from dedup_lib.errors import InputError
from dedup_lib.sweep.anchors import Anchors, KeyedSends, compile_in_background, walk_anchors
from dedup_lib.sweep.cells import Cells
from dedup_lib.sweep.collect import collect
from dedup_lib.sweep.counts import entity_codes
from dedup_lib.sweep.grid import to_micros, window_grid
from dedup_lib.sweep.truth import TruthCodes, truth_codes, truth_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame

#: Windows whose verdicts a cache keeps (the oldest goes first): a sweep step asks for the
#: same window three times, the explorer for the current and the previous ones.
_KEPT_WINDOWS = 8


@dataclass(frozen=True)
class _Codes:
    """The repeated rows numbered, and the counts no window changes.

    ``names``: entity names, sorted (``(none)`` for sends without one), numbered by their
    place. Per repeated row: ``entity`` (code). ``cells``: sends per entity and time bucket.
    Per key: ``segment_sends``, ``segment_entity``, ``segment_key``. Per entity code:
    ``sends`` in repeated keys, and ``single``, ``no_id`` and ``rejected`` sends outside
    them."""

    names: list[str]
    entity: np.ndarray
    cells: Cells
    segment_sends: np.ndarray
    segment_entity: np.ndarray
    segment_key: np.ndarray
    sends: np.ndarray
    single: np.ndarray
    no_id: np.ndarray
    rejected: np.ndarray


class ReplayCache:
    """Everything needed to give the verdicts of any window, for one partitioning mode.

    ``repeated`` has one row per eligible send of a key sent more than once, each key's sends
    together and in replay order (send time, event_id, input position): ``entity``, ``key``,
    ``segment`` (one number per entity and key, 0, 1, 2, ... down the table), ``time_us``,
    ``event_id`` and ``pos``, plus ``logical_id``, ``attempt`` and ``accepted_elsewhere`` when
    the input has ground truth, and the carried columns; texts are pandas' ``str`` columns
    over Spark's Arrow buffers (:mod:`dedup_lib.sweep.frames`). ``fixed`` counts the rest per
    entity (``(none)`` for sends without one). Build it with :meth:`build`."""

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
        self._truth: TruthCodes | None = None
        self._anchors: dict[int, Anchors] = {}
        self._cell_duplicates: dict[int, np.ndarray] = {}
        self._coded: _Codes | None = None
        self._delays: pd.DataFrame | None = None
        self._messages_per_segment: np.ndarray | None = None
        self.repeated = repeated
        self.fixed = fixed
        self.truth_fixed = truth_fixed
        self._time = repeated["time_us"].to_numpy(dtype=np.int64)
        self._segment = repeated["segment"].to_numpy(dtype=np.int64)
        self._keys = KeyedSends.of(self._segment, self._time)

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
        """Spark passes over ``df`` (the input of ``detect_duplicates``); ``carry`` names
        input columns to keep in :attr:`repeated` (``cause``, for example). Sends to keys
        used once are counted per ``bucket`` of time, the resolution of time charts.

        One shuffle by key finds the repeated keys and returns their sends in replay order;
        one aggregation counts sends per entity, kind and bucket, and with ground truth one
        counts sends per message. Neither aggregation needs to know which keys repeat: the
        driver takes off the repeated sends it holds. ``df`` is read once per pass, so it must
        give the same rows each time (files, or a persisted frame). Up to
        :data:`~dedup_lib.sweep.collect.LOCAL_ROWS` sends are judged in one narrow job and
        grouped in the driver instead: the same tables, without two thirds of the planning."""
        compile_in_background()
        c = collect(df, partitioning, carry, bucket)
        return cls(partitioning, c.repeated, c.fixed, c.truth_fixed, c.bucket_us)

    def anchors(self, window: timedelta | float | str) -> Anchors:
        """The anchor chain of every repeated key at ``window``: accepted or duplicate, and
        the row index of the accepted send that each send counts against."""
        micros = to_micros(window)
        if micros in self._anchors:
            return self._anchors[micros]
        anchors = walk_anchors(self._keys, micros)
        if len(self._anchors) >= _KEPT_WINDOWS:
            self._anchors.pop(next(iter(self._anchors)))
        self._anchors[micros] = anchors
        return anchors

    def summarize(self, window: timedelta | float | str) -> pd.DataFrame:
        """:func:`dedup_lib.summarize` of ``detect_duplicates`` at ``window``, without Spark."""
        accepted = self.anchors(window).accepted
        c = self._codes()
        kept = np.bincount(c.entity, weights=accepted, minlength=len(c.names)).astype("int64")
        table = pd.DataFrame(
            {
                "entity": c.names,
                "sends": c.sends + c.single + c.no_id + c.rejected,
                "accepted": kept + c.single + c.no_id,
                "duplicates": c.sends - kept,
                "rejected": c.rejected,
                "without_message_id": c.no_id,
                "not_checked": 0,
            }
        )
        table = with_total(table, list(SUMMARY_COLUMNS[1:-1]))
        judged = table["accepted"] + table["duplicates"]
        table["share_caught"] = (table["duplicates"] / judged.where(judged > 0)).astype("float64")
        return table[list(SUMMARY_COLUMNS)]

    def ground_truth_summary(self, window: timedelta | float | str) -> pd.DataFrame:
        """:func:`~dedup_lib.analysis.summaries.ground_truth_summary` of ``detect_duplicates``
        at ``window``."""
        if self.truth_fixed is None:
            raise InputError(
                "ground_truth_summary: the input has no ground truth columns (logical_id, attempt)"
            )
        accepted = self.anchors(window).accepted
        return truth_table(self._truth_codes(), accepted)

    def over_time(self, window: timedelta | float | str) -> pd.DataFrame:
        """Sends per entity and time bucket at ``window``: ``entity``, ``time`` (UTC, bucket
        start), ``sends``, ``duplicates`` (dropped by the broker), ``rejected``. Sends without a
        send_time (rejected) have no bucket and are left out."""
        cells = self._codes().cells
        return cells.over_time(self._duplicates(window))

    def top_keys(
        self, window: timedelta | float | str, n: int = 10, entity: str | None = None
    ) -> pd.DataFrame:
        """The keys with the most sends dropped as duplicates at ``window`` (of one ``entity``;
        None or ``(all)``: all), then the most sent (where fewer than ``n`` drop any, the keys a
        longer window would catch first): ``entity``, ``key``, ``sends``, ``duplicates``, and
        ``messages`` when there is ground truth (more than one means different messages
        share the key: a reused id)."""
        accepted = self.anchors(window).accepted
        c = self._codes()
        if len(c.segment_sends) == 0:
            return pd.DataFrame({"entity": [], "key": [], "sends": [], "duplicates": []})
        duplicates = np.bincount(self._segment, weights=~accepted).astype("int64")
        sends = c.segment_sends.astype("int64")
        eligible = np.arange(len(duplicates))
        if entity not in (None, ALL_ENTITIES):
            code = c.names.index(entity) if entity in c.names else -1
            eligible = np.flatnonzero(c.segment_entity == code)
        rows = _most(duplicates[eligible] * (int(sends.max()) + 1) + sends[eligible], n)
        rows = eligible[rows]
        names = np.asarray(c.names, dtype=object)
        table = pd.DataFrame(
            {
                "entity": names[c.segment_entity[rows]],
                "key": c.segment_key[rows],
                "sends": sends[rows],
                "duplicates": duplicates[rows],
            }
        )
        if self.has_ground_truth:
            if self._messages_per_segment is None:
                self._messages_per_segment = _distinct_per_segment(
                    self._segment, self.repeated["logical_id"]
                )
            table["messages"] = self._messages_per_segment[rows].astype("int64")
        # Ties by entity and key, as a stable order.
        top = table.sort_values(
            ["duplicates", "sends", "entity", "key"], ascending=[False, False, True, True]
        )
        return top.head(n).reset_index(drop=True)

    def resend_delays(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Each send to a repeated key after the key's first: ``entity`` (``(none)`` for sends
        without one, as in the other views), ``key``, ``time_us``, ``time`` (UTC), ``delay_s``
        since the key's previous send, and the carried columns; only ``columns`` when given
        (a chart's four of them cost a fraction of the whole). The same at every window
        (computed once): what a window does with a resend depends on the anchor, not on this
        delay."""
        if columns is None and self._delays is not None:
            return self._delays
        segment = self._segment
        later = np.flatnonzero(segment[1:] == segment[:-1]) + 1

        def column(name: str) -> Any:
            if name == "delay_s":
                return (self._time[later] - self._time[later - 1]) / 1e6
            if name == "time":
                return pd.to_datetime(self._time[later], unit="us", utc=True)
            return self.repeated[name].take(later).reset_index(drop=True)

        kept = [str(c) for c in self.repeated if c not in ("segment", "pos")]
        names = columns or [*kept, "delay_s", "time"]
        table = pd.DataFrame({name: column(name) for name in names})
        if "entity" in table:
            table["entity"] = table["entity"].fillna(NO_ENTITY)
        if columns is None:
            self._delays = table
        return table

    def held_over_time(self, window: timedelta | float | str) -> pd.DataFrame:
        """How many ids the duplicate history holds at the end of each time bucket, per entity:
        every accepted send that has a MessageId is held for ``window`` (docs/rules.md, section 5).
        Columns ``entity``, ``time`` (UTC), ``held``. At the cache's bucket resolution."""
        micros = to_micros(window)
        c = self._codes()
        held, first = c.cells.held(self._duplicates(micros / 1e6), micros)
        if held.shape[1] == 0:
            return pd.DataFrame({"entity": [], "time": [], "held": []})
        times = c.cells.starts(np.arange(held.shape[1]) + 1)  # each bucket's end
        frames = [
            pd.DataFrame(
                {"entity": c.names[code], "time": times[start:], "held": held[code, start:]}
            )
            for code, start in enumerate(first)
            if start >= 0
        ]
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
            micros = to_micros(window)
            total = self.summarize(micros / 1e6).iloc[-1]
            row: dict[str, float] = {
                "window_s": micros / 1e6,
                "duplicates": int(total["duplicates"]),
                "share_caught": float(total["share_caught"]),
                "peak_held": self._peak_held(micros),
            }
            if self.has_ground_truth:
                truth = self.ground_truth_summary(micros / 1e6).iloc[-1]
                catchable = int(self._truth_codes().resend.sum())
                row |= _truth_columns(truth, catchable)
            rows.append(row)
        return pd.DataFrame(rows)

    def _peak_held(self, micros: int) -> int:
        """The most ids held at once at ``micros``, all entities together: the peak of the
        sum over entities of :meth:`held_over_time`."""
        held, first = self._codes().cells.held(self._duplicates(micros / 1e6), micros)
        if held.shape[1] == 0:
            return 0
        return int(held.sum(axis=0)[int(first[first >= 0].min()) :].max())

    def _duplicates(self, window: timedelta | float | str) -> np.ndarray:
        """Repeated sends dropped at ``window``, per cell of :class:`Cells`: kept with the
        window's anchors."""
        micros = to_micros(window)
        if micros not in self._cell_duplicates:
            accepted = self.anchors(window).accepted
            if len(self._cell_duplicates) >= _KEPT_WINDOWS:
                self._cell_duplicates.pop(next(iter(self._cell_duplicates)))
            self._cell_duplicates[micros] = self._codes().cells.duplicates(accepted)
        return self._cell_duplicates[micros]

    def _codes(self) -> _Codes:
        """The repeated rows numbered, computed once."""
        if self._coded is None:
            starts = self._keys.starts
            self._coded = _number(
                self.repeated, self.fixed, self._time, self._segment, starts, self.bucket_us
            )
        return self._coded

    def _truth_codes(self) -> TruthCodes:
        """Row-to-message and message-to-entity numbering, computed once."""
        if self._truth is None:
            assert self.truth_fixed is not None
            c = self._codes()
            self._truth = truth_codes(
                self.repeated, self.fixed, self.truth_fixed, c.entity, c.names
            )
        return self._truth


def _number(
    repeated: pd.DataFrame,
    fixed: pd.DataFrame,
    time: np.ndarray,
    segment: np.ndarray,
    first_row: np.ndarray,
    bucket: int,
) -> _Codes:
    """Entity and time-bucket numbering of the repeated rows (at ``time``, keys numbered by
    ``segment`` from ``first_row``), and the window-independent counts of ``fixed``."""
    found, distinct = entity_codes(repeated["entity"])
    fixed = fixed.assign(entity=fixed["entity"].fillna(NO_ENTITY))
    names = sorted(set(distinct) | set(fixed["entity"]))
    index = {name: i for i, name in enumerate(names)}
    entity = np.array([index[e] for e in distinct], dtype=np.int64)[found]
    starts = (time // bucket) * bucket
    timed = fixed.dropna(subset=["bucket_us"])
    lows = [int(starts.min())] if len(starts) else []
    if len(timed):
        lows.append(int(timed["bucket_us"].min()))
    low = min(lows) if lows else 0
    segment_sends = np.bincount(segment) if len(segment) else np.zeros(0)
    fixed_entity = np.array([index[e] for e in fixed["entity"]], dtype=np.int64)

    def fixed_sends(kind: str) -> np.ndarray:
        mine = (fixed["kind"] == kind).to_numpy()
        counts = fixed["sends"].to_numpy()[mine]
        return np.bincount(fixed_entity[mine], weights=counts, minlength=len(names))

    return _Codes(
        names=names,
        entity=entity,
        cells=Cells.of(names, low, bucket, entity, (starts - low) // bucket, fixed, fixed_entity),
        segment_sends=segment_sends,
        segment_entity=entity[first_row] if len(first_row) else entity[:0],
        segment_key=repeated["key"].iloc[first_row].to_numpy(dtype=object),
        sends=np.bincount(entity, minlength=len(names)),
        single=fixed_sends("single").astype("int64"),
        no_id=fixed_sends("no_id").astype("int64"),
        rejected=fixed_sends("rejected").astype("int64"),
    )


def _distinct_per_segment(segment: np.ndarray, values: pd.Series) -> np.ndarray:
    """How many distinct ``values`` each segment (0, 1, 2, ... down the rows) holds: pairs
    numbered and hashed, not sorted."""
    if len(segment) == 0:
        return np.zeros(0, dtype=np.int64)
    codes, distinct = pd.factorize(values, use_na_sentinel=False)
    pairs = pd.unique(segment * max(len(distinct), 1) + codes)
    return np.bincount(pairs // max(len(distinct), 1), minlength=int(segment[-1]) + 1)


def _truth_columns(truth: pd.Series, catchable: int) -> dict[str, float]:
    """The ground-truth columns of a sweep row, from the total row of
    :meth:`ReplayCache.ground_truth_summary` and the resends any window can catch."""
    resends = int(truth["resends"])
    caught = truth["resends_caught"]
    return {
        "resends": resends,
        "catchable_resends": catchable,
        "resends_caught": int(caught),
        "share_catchable_caught": caught / catchable if catchable else float("nan"),
        "share_resends_caught": caught / resends if resends else float("nan"),
        "extra_deliveries": int(truth["extra_deliveries"]),
        "messages_lost": int(truth["messages_lost"]),
    }


def _most(score: np.ndarray, n: int) -> np.ndarray:
    """The positions of the ``n`` highest ``score``, and of those tied with the last of them
    up to ``n`` more (first in the cache's order): enough to order the ties by name, never
    every key (a window that drops nothing ties them all)."""
    most = min(n, len(score))
    if most == 0:
        return np.arange(0)
    threshold = np.partition(score, -most)[-most]
    above = np.flatnonzero(score > threshold)
    return np.concatenate([above, np.flatnonzero(score == threshold)[:n]])
