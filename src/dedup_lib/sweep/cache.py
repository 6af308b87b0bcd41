"""``ReplayCache``: the verdicts of any window, answered from a compact snapshot in memory.

Spark runs once, in :func:`dedup_lib.sweep.collect.collect`: the sends of keys sent more than
once come back in replay order, everything else as counts per entity and time bucket. A
window's verdicts are then the anchor chain of each repeated key
(:func:`dedup_lib.sweep.anchors.walk_anchors`): the same rule and the same order as
:func:`dedup_lib.detect_duplicates`, so the figures agree exactly, in milliseconds instead of
a Spark job. The tables read from them are :attr:`ReplayCache.views`, an object over the
cache's public surface (:mod:`dedup_lib.sweep.views`), each also answered by the cache under
its name; ground truth is in :mod:`dedup_lib.sweep.truth`. Used by the window explorer and
the sweep.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

import numpy as np
import pandas as pd

from dedup_lib.sweep.anchors import Anchors, KeyedSends, compile_in_background, walk_anchors
from dedup_lib.sweep.codes import Codes, number_rows
from dedup_lib.sweep.collect import collect
from dedup_lib.sweep.grid import to_micros
from dedup_lib.sweep.truth import TruthCodes, truth_codes
from dedup_lib.sweep.views import CacheViews

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import DataFrame

#: Windows whose verdicts a cache keeps (the least recently used goes first).
_CACHED_WINDOWS = 8

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _answered(
    view: Callable[Concatenate[CacheViews, _P], _R],
) -> Callable[Concatenate[ReplayCache, _P], _R]:
    """A method of the cache that answers with its :attr:`ReplayCache.views`' ``view``,
    documented (and signed) as ``view`` is."""

    @functools.wraps(view)
    def method(cache: ReplayCache, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return view(cache.views, *args, **kwargs)

    # The cache's own method, for doctest and the API reference.
    method.__module__, method.__qualname__ = __name__, f"ReplayCache.{view.__name__}"
    return method


class ReplayCache:
    """Everything needed to give the verdicts of any window, for one partitioning mode:
    the repeated sends (every send of a key sent more than once) and the counts of the rest.

    Build it with :meth:`build`; every method after that answers from memory, exactly as
    :func:`dedup_lib.detect_duplicates` would at that window (docs/decisions/sweep-in-memory.md).

    Parameters
    ----------
    partitioning : bool
        The mode the keys were made in.
    repeated : pandas.DataFrame
        One row per eligible send of a key sent more than once, each key's sends together
        and in replay order: ``entity``, ``key``, ``key_number`` (one number per entity and
        key, 0, 1, 2, ... down the table), ``time_us``, ``event_id`` and ``pos``, plus
        ``logical_id``, ``attempt`` and ``accepted_elsewhere`` with ground truth, and the
        carried columns.
    fixed : pandas.DataFrame
        The other sends counted per entity (``(none)`` for sends without one), kind and
        time bucket.
    truth_fixed : pandas.DataFrame or None
        With ground truth, the other sends counted per message.
    bucket_us : int, default 60,000,000
        The time buckets' width in microseconds.

    Attributes
    ----------
    keyed : KeyedSends
        The repeated sends laid out for walks at any window: ``key_number`` and ``time_us`` per
        row of ``repeated``, ``starts`` (each key's first row).
    views : CacheViews
        The tables read from the cache (:mod:`dedup_lib.sweep.views`); the cache answers
        each under its name too: :meth:`summarize`, :meth:`ground_truth_summary`,
        :meth:`over_time`, :meth:`top_keys`, :meth:`resend_delays`, :meth:`held_over_time`,
        :meth:`sweep`.

    Examples
    --------
    >>> from dedup_lib import DedupPolicy, ReplayCache, get_spark, load_telemetry
    >>> from dedup_lib import sample_path
    >>> sends = load_telemetry(get_spark(), sample_path("incident.parquet")).valid
    >>> cache = ReplayCache.build(sends)
    >>> int(cache.summarize("PT10M").iloc[-1]["duplicates"])
    3104
    >>> int(cache.summarize("PT1H").iloc[-1]["duplicates"])
    3104
    """

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
        self.repeated = repeated
        self.fixed = fixed
        self.truth_fixed = truth_fixed
        self.keyed = KeyedSends.of(
            repeated["key_number"].to_numpy(dtype=np.int64),
            repeated["time_us"].to_numpy(dtype=np.int64),
        )
        # The latest windows' anchors and counts: a sweep step asks for the same window
        # three times, the explorer for the current and the previous ones.
        self._walk = lru_cache(maxsize=_CACHED_WINDOWS)(self._walk_at)
        self._cells = lru_cache(maxsize=_CACHED_WINDOWS)(self._cell_duplicates_at)

    @classmethod
    def build(
        cls,
        df: DataFrame,
        partitioning: bool = False,
        carry: Sequence[str] = (),
        bucket: timedelta | float | str = "PT1M",
    ) -> ReplayCache:
        """Build the cache of ``df``'s sends for one partitioning mode: Spark runs here, once.

        One shuffle by key finds the repeated keys and returns their sends in replay order;
        one aggregation counts sends per entity, kind and bucket, and with ground truth one
        counts sends per message. Up to :data:`~dedup_lib.sweep.collect.LOCAL_ROWS` sends
        are judged in one narrow job and grouped in the driver instead: the same tables,
        without two thirds of the planning.

        Parameters
        ----------
        df : DataFrame
            The input of :func:`dedup_lib.detect_duplicates`. It is read once per pass, so it
            must give the same rows each time (files, or a persisted frame).
        partitioning : bool, default False
            The mode whose keys are made.
        carry : sequence of str, default ()
            Input columns carried into :attr:`repeated` (``cause``, for example).
        bucket : timedelta, float (seconds) or str, default "PT1M"
            The time buckets the other sends are counted in: the resolution of time charts.

        Returns
        -------
        ReplayCache

        Raises
        ------
        InputError
            An input the rules cannot judge, a ``carry`` column it lacks, or repeated sends that
            would not fit in the driver (with the entities and span to narrow).

        Examples
        --------
        With ``cache`` from the class's example, which this method built: the repeated sends of
        the incident sample, each key's together in replay order.

        >>> cache.partitioning
        False
        >>> cache.repeated["entity"].value_counts().to_dict()
        {'orders': 5062, 'payments': 309}
        >>> list(cache.repeated.columns)
        ['entity', 'key', 'time_us', 'event_id', 'pos', 'logical_id', 'attempt',
         'key_number', 'accepted_elsewhere']
        """
        compile_in_background()
        c = collect(df, partitioning, carry, bucket)
        return cls(partitioning, c.repeated, c.fixed, c.truth_fixed, c.bucket_us)

    def anchors(self, window: timedelta | float | str) -> Anchors:
        """The verdicts of the repeated sends at ``window``: each key's anchor chain.

        Each key's sends are walked in replay order: a send within ``window`` of its key's
        anchor is a duplicate; the first one after is accepted and becomes the next anchor.
        The latest windows' walks are cached, so asking again costs nothing.

        Parameters
        ----------
        window : timedelta, float (seconds) or str
            The window, as :func:`~dedup_lib.rules.durations.parse_window` reads it (no
            bounds: what-if windows too).

        Returns
        -------
        Anchors
            Per row of :attr:`repeated`: ``accepted`` (a boolean array: the verdict) and
            ``anchor`` (the row of the accepted send it counts against, itself when
            accepted); ``window_us``.

        Raises
        ------
        InputError
            A window that does not read.

        Examples
        --------
        With ``cache`` from the class's example:

        >>> anchors = cache.anchors("PT10M")
        >>> int(anchors.accepted.sum()), int((~anchors.accepted).sum())
        (2267, 3104)
        >>> cache.anchors(600) is anchors
        True
        """
        return self._walk(to_micros(window))

    def _walk_at(self, micros: int) -> Anchors:
        return walk_anchors(self.keyed, micros)

    def cell_duplicates(self, micros: int) -> np.ndarray:
        """The repeated sends dropped as duplicates at a window, per entity and time bucket.

        What the time charts add to the counts no window changes.

        Parameters
        ----------
        micros : int
            The window in microseconds (:attr:`~dedup_lib.DedupPolicy.window_us`).

        Returns
        -------
        numpy.ndarray
            One count per cell (entity and time bucket, in the order of ``codes.cells``);
            cached for the latest windows.

        Examples
        --------
        With ``cache`` from the class's example:

        >>> from dedup_lib import DedupPolicy
        >>> int(cache.cell_duplicates(DedupPolicy("PT10M").window_us).sum())
        3104
        """
        return self._cells(micros)

    def _cell_duplicates_at(self, micros: int) -> np.ndarray:
        """Repeated sends dropped at ``micros``, per cell of :class:`Cells`."""
        return self.codes.cells.duplicates(self.anchors(micros / 1e6).accepted)

    @cached_property
    def codes(self) -> Codes:
        """Codes: The repeated sends numbered by entity, key and time bucket; computed once."""
        return number_rows(
            self.repeated,
            self.fixed,
            self.keyed.time_us,
            self.keyed.key_number,
            self.keyed.starts,
            self.bucket_us,
        )

    @cached_property
    def truth(self) -> TruthCodes:
        """TruthCodes: The repeated sends numbered by message (ground truth); computed once."""
        assert self.truth_fixed is not None
        c = self.codes
        return truth_codes(self.repeated, self.fixed, self.truth_fixed, c.entity, c.names)

    @property
    def has_ground_truth(self) -> bool:
        """bool: Whether the input had ground truth (``logical_id``, ``attempt``)."""
        return self.truth_fixed is not None

    @cached_property
    def views(self) -> CacheViews:
        """CacheViews: The tables read from this cache, made once (:mod:`dedup_lib.sweep.views`)."""
        return CacheViews(self)

    # Each view, answered by the cache under its name (the notebooks' and the workbench's calls).
    summarize = _answered(CacheViews.summarize)
    ground_truth_summary = _answered(CacheViews.ground_truth_summary)
    over_time = _answered(CacheViews.over_time)
    top_keys = _answered(CacheViews.top_keys)
    resend_delays = _answered(CacheViews.resend_delays)
    held_over_time = _answered(CacheViews.held_over_time)
    sweep = _answered(CacheViews.sweep)
