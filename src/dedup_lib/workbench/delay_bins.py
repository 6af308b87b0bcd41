"""Each resend's delay, laid out once for the histogram of any part of it.

The resend delays do not change with the window: only the histogram's edges and the window's
line do. The explorer redraws the histogram on every control change, over every resend
(16 M at 100 M sends); taking logarithms, grouping by cause and comparing entity names each
time cost it more than the window's own verdicts. :class:`DelayBins` does those once, and
keeps the last parts asked for (an entity, a time range).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dedup_lib.analysis.selection import narrow
from dedup_lib.analysis.totals import ALL_ENTITIES

if TYPE_CHECKING:
    from datetime import datetime

    from dedup_lib.sweep.cache import ReplayCache

#: Parts of the delays kept for reuse (an entity and time range each).
_KEPT_PARTS = 8
#: Below this delay (seconds) a resend is drawn at it: the log axis has no zero.
SHORTEST = 1e-3


class DelayBins:
    """Resend delays grouped by cause: ``seconds`` (at least :data:`SHORTEST`) and ``logs``
    (their log10), rows of one cause together, group ``k`` in rows ``bounds[k]`` to
    ``bounds[k + 1]`` and named ``causes[k]`` (None: the table has no ``cause`` column, one
    group). ``where`` holds each row's ``entity`` and ``time``, to cut parts with
    :func:`~dedup_lib.analysis.selection.narrow`. Build it with :meth:`of`."""

    def __init__(
        self,
        seconds: np.ndarray,
        logs: np.ndarray,
        causes: list[Any] | None,
        bounds: np.ndarray,
        where: pd.DataFrame,
    ) -> None:
        self.seconds = seconds
        self.logs = logs
        self.causes = causes
        self.bounds = bounds
        self.where = where
        self._parts: dict[tuple[Any, ...], DelayBins] = {}

    @classmethod
    def of(cls, delays: pd.DataFrame) -> DelayBins:
        """From a table of :meth:`~dedup_lib.ReplayCache.resend_delays` (``delay_s``, and
        ``cause``, ``entity`` and ``time`` where it has them). A null cause is a group too."""
        seconds = np.maximum(delays["delay_s"].to_numpy(dtype="float64"), SHORTEST)
        causes: list[Any] | None = None
        order = np.arange(len(delays))
        bounds = np.array([0, len(delays)])
        if "cause" in delays:
            codes, uniques = pd.factorize(delays["cause"], use_na_sentinel=False)
            order = np.argsort(codes, kind="stable")
            causes = list(uniques)
            bounds = np.searchsorted(codes[order], np.arange(len(causes) + 1))
        where = delays[[c for c in ("entity", "time") if c in delays]].take(order)
        where = where.reset_index(drop=True)
        if "entity" in where:
            where["entity"] = where["entity"].astype("category")
        seconds = seconds[order]
        return cls(seconds, np.log10(seconds), causes, bounds, where)

    def __len__(self) -> int:
        return len(self.seconds)

    def span(self) -> tuple[float, float]:
        """The shortest and longest delay, seconds (1 s both when there is none)."""
        if len(self.seconds) == 0:
            return 1.0, 1.0
        return float(self.seconds.min()), float(self.seconds.max())

    def part(
        self,
        entity: str | None = ALL_ENTITIES,
        start: str | datetime | None = None,
        end: str | datetime | None = None,
    ) -> DelayBins:
        """The delays of one ``entity`` between ``start`` and ``end``, as
        :func:`~dedup_lib.analysis.selection.narrow` cuts them (its arguments)."""
        if entity in (None, ALL_ENTITIES) and start is None and end is None:
            return self
        key = (entity, start, end)
        if key not in self._parts:
            rows = narrow(self.where, entity, start, end, time="time").index.to_numpy()
            if len(self._parts) >= _KEPT_PARTS:
                self._parts.pop(next(iter(self._parts)))
            self._parts[key] = self._rows(rows)
        return self._parts[key]

    def _rows(self, rows: np.ndarray) -> DelayBins:
        """These rows (ascending positions), in their groups; causes left without a row
        dropped (the one group of a table without causes stays)."""
        group = np.searchsorted(self.bounds, rows, side="right") - 1
        sizes = np.bincount(group, minlength=len(self.bounds) - 1)
        nonempty = np.flatnonzero(sizes) if self.causes is not None else np.arange(len(sizes))
        causes = None if self.causes is None else [self.causes[k] for k in nonempty]
        where = self.where.iloc[rows].reset_index(drop=True)
        bounds = np.r_[0, np.cumsum(sizes[nonempty])]
        return DelayBins(self.seconds[rows], self.logs[rows], causes, bounds, where)

    def counts(self, edges: np.ndarray) -> list[tuple[Any, np.ndarray]]:
        """Per group, its cause and how many delays fall in each bin of ``edges`` (log10
        seconds), as ``numpy.histogram`` counts them."""
        names = self.causes if self.causes is not None else ["resends"]
        return [
            (name, np.histogram(self.logs[self.bounds[k] : self.bounds[k + 1]], bins=edges)[0])
            for k, name in enumerate(names)
        ]


_LAID_OUT: weakref.WeakKeyDictionary[ReplayCache, DelayBins] = weakref.WeakKeyDictionary()


def delay_bins(cache: ReplayCache) -> DelayBins:
    """The resend delays of ``cache`` laid out, once per cache (kept while the cache lives)."""
    bins = _LAID_OUT.get(cache)
    if bins is None:
        carried = ["cause"] if "cause" in cache.repeated else []
        table = cache.resend_delays(["entity", "time", "delay_s", *carried])
        bins = _LAID_OUT[cache] = DelayBins.of(table)
    return bins
