"""Sends per entity and time bucket, laid out once for the time views of any window.

The cache's time views (sends and duplicates over time, ids held) count the same cells at
every window: all that a window changes is which repeated sends are duplicates. :class:`Cells`
counts everything else once, so a control change costs one count of the duplicates per cell
(16 M repeated sends at 100 M sends), not three passes over them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Cells:
    """Cell ``e * buckets + b`` is entity code ``e`` (of ``names``) in the ``b``-th bucket of
    ``bucket_us`` microseconds after ``low``. ``row_cell``: each repeated send's cell. Per
    cell: ``sends`` (every send with a time), ``repeated`` (those in repeated keys),
    ``rejected`` and ``singles`` (sends to keys used once, each an id held at any window)."""

    names: list[str]
    low: int
    bucket_us: int
    buckets: int
    row_cell: np.ndarray
    sends: np.ndarray
    repeated: np.ndarray
    rejected: np.ndarray
    singles: np.ndarray

    @classmethod
    def of(
        cls,
        names: list[str],
        low: int,
        bucket_us: int,
        entity: np.ndarray,
        bucket: np.ndarray,
        fixed: pd.DataFrame,
        fixed_entity: np.ndarray,
    ) -> Cells:
        """From each repeated send's ``entity`` code and ``bucket`` number, and the counts
        outside repeated keys (``fixed``: ``kind``, ``bucket_us``, ``sends``; entity codes
        ``fixed_entity``)."""
        timed = fixed["bucket_us"].notna().to_numpy()
        fixed_bucket = (fixed["bucket_us"].to_numpy()[timed] - low) // bucket_us
        fixed_bucket = fixed_bucket.astype("int64")
        buckets = int(max(bucket.max(initial=-1), fixed_bucket.max(initial=-1))) + 1
        cells = len(names) * buckets
        row_cell = entity * buckets + bucket
        fixed_cell = fixed_entity[timed] * buckets + fixed_bucket
        kind = fixed["kind"].to_numpy()[timed]
        counts = fixed["sends"].to_numpy()[timed]

        def per_cell(rows: np.ndarray) -> np.ndarray:
            return np.bincount(fixed_cell[rows], weights=counts[rows], minlength=cells)

        repeated = np.bincount(row_cell, minlength=cells)
        everything = np.ones(len(kind), dtype=bool)
        return cls(
            names=names,
            low=low,
            bucket_us=bucket_us,
            buckets=buckets,
            row_cell=row_cell,
            sends=(repeated + per_cell(everything)).astype("int64"),
            repeated=repeated.astype("int64"),
            rejected=per_cell(kind == "rejected").astype("int64"),
            singles=per_cell(kind == "single").astype("int64"),
        )

    def duplicates(self, accepted: np.ndarray) -> np.ndarray:
        """Per cell, the repeated sends that are not ``accepted``."""
        counts = np.bincount(self.row_cell, weights=~accepted, minlength=len(self.sends))
        return counts.astype("int64")

    def over_time(self, duplicates: np.ndarray) -> pd.DataFrame:
        """``entity``, ``time`` (UTC, bucket start), ``sends``, ``duplicates``, ``rejected``
        of every cell with a send, ``duplicates`` per cell as :meth:`duplicates` gives them."""
        used = np.flatnonzero(self.sends)
        return pd.DataFrame(
            {
                "entity": np.asarray(self.names, dtype=object)[used // max(self.buckets, 1)],
                "time": self.starts(used % max(self.buckets, 1)),
                "sends": self.sends[used],
                "duplicates": duplicates[used],
                "rejected": self.rejected[used],
            }
        )

    def held(self, duplicates: np.ndarray, window_us: int) -> tuple[np.ndarray, np.ndarray]:
        """Ids held at the end of each bucket when each accepted send with an id is held for
        ``window_us`` (as many buckets as it starts, at least one): one row per entity, from
        the first bucket to that many after the last with an accepted send (no column when
        there is none), and each entity's first such bucket (-1: none)."""
        width = max(1, -(-window_us // self.bucket_us))
        placed = (self.repeated - duplicates + self.singles).reshape(len(self.names), self.buckets)
        columns = np.flatnonzero(placed.any(axis=0))
        if len(columns) == 0:
            return np.zeros((len(self.names), 0), dtype=np.int64), np.full(len(self.names), -1)
        length = int(columns[-1]) + 1 + width
        grid = np.zeros((len(self.names), length + 1), dtype=np.int64)
        grid[:, 1 : min(length, self.buckets) + 1] = placed[:, :length]
        total = np.cumsum(grid, axis=1)
        held = total[:, 1:] - total[:, np.maximum(np.arange(1, length + 1) - width, 0)]
        first = np.where(placed.any(axis=1), (placed > 0).argmax(axis=1), -1)
        return held, first

    def starts(self, bucket: np.ndarray) -> pd.DatetimeIndex:
        """When each of these bucket numbers starts (UTC); bucket ``b + 1`` starts as ``b``
        ends."""
        return pd.to_datetime(self.low + bucket * self.bucket_us, unit="us", utc=True)
