"""The views of a :class:`~dedup_lib.sweep.cache.ReplayCache`: the summary, sends over time,
top keys, resend delays, ids held and the sweep, each read from a window's anchors and the
counts no window changes, without Spark.

:class:`CacheViews` is an object over a cache's public surface (:attr:`ReplayCache.repeated`,
:attr:`ReplayCache.keyed`, :meth:`ReplayCache.anchors`, :attr:`ReplayCache.codes`,
:attr:`ReplayCache.truth`, :meth:`ReplayCache.cell_duplicates`); a cache gives its own as
:attr:`ReplayCache.views`, and answers each view by name (``cache.summarize("PT10M")``).
"""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from dedup_lib.analysis.summaries import SUMMARY_COLUMNS
from dedup_lib.analysis.totals import ALL_ENTITIES, NO_ENTITY, with_total
from dedup_lib.errors import InputError
from dedup_lib.sweep.codes import distinct_per_key, most
from dedup_lib.sweep.grid import to_micros, window_grid
from dedup_lib.sweep.truth import truth_columns, truth_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dedup_lib.sweep.anchors import Anchors, KeyedSends
    from dedup_lib.sweep.codes import Codes
    from dedup_lib.sweep.truth import TruthCodes


class Cache(Protocol):
    """What the views read of a :class:`~dedup_lib.sweep.cache.ReplayCache`: its public
    surface (its attributes of those names), nothing else."""

    repeated: pd.DataFrame
    keyed: KeyedSends

    @property
    def has_ground_truth(self) -> bool: ...
    @property
    def codes(self) -> Codes: ...
    @property
    def truth(self) -> TruthCodes: ...
    def anchors(self, window: timedelta | float | str) -> Anchors: ...
    def cell_duplicates(self, micros: int) -> np.ndarray: ...


class CacheViews:
    """The tables a :class:`~dedup_lib.sweep.cache.ReplayCache` answers, read from its public
    surface: each reads :meth:`~dedup_lib.sweep.cache.ReplayCache.anchors` at a window and
    the cache's numbering (:attr:`~dedup_lib.sweep.cache.ReplayCache.codes`).

    Parameters
    ----------
    cache : ReplayCache
        The cache read (or any object with its public surface, :class:`Cache`).
        ``cache.views`` is its own, made once; the cache answers each view by name as well
        (``cache.summarize(window)`` is ``cache.views.summarize(window)``).

    Examples
    --------
    With ``cache`` from :class:`~dedup_lib.ReplayCache`'s example (the incident sample):

    >>> from dedup_lib.sweep.views import CacheViews
    >>> CacheViews(cache).summarize("PT10M")["duplicates"].tolist()
    [0, 2945, 159, 3104]
    >>> cache.views.cache is cache
    True
    """

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    def summarize(self, window: timedelta | float | str) -> pd.DataFrame:
        """The verdicts per entity at ``window``, from memory: what :func:`dedup_lib.summarize`
        says of :func:`dedup_lib.detect_duplicates` at that window, to the send.

        Parameters
        ----------
        window : timedelta, float (seconds) or str
            The window, as :func:`~dedup_lib.rules.durations.parse_window` reads it.

        Returns
        -------
        pandas.DataFrame
            One row per entity, then ``(all)``:

            - ``entity``
            - ``sends``
            - ``accepted``
            - ``duplicates``
            - ``rejected``
            - ``without_message_id``
            - ``not_checked``
            - ``share_caught``: duplicates of the judged sends

        Raises
        ------
        InputError
            A window that does not read.

        Examples
        --------
        With ``cache`` from the class's example:

        >>> table = cache.summarize("PT10M")
        >>> table["entity"].tolist()
        ['notifications', 'orders', 'payments', '(all)']
        >>> table["duplicates"].tolist()
        [0, 2945, 159, 3104]
        """
        verdicts = self.cache.anchors(window).accepted
        c = self.cache.codes
        accepted = np.bincount(c.entity, weights=verdicts, minlength=len(c.names)).astype("int64")
        table = pd.DataFrame(
            {
                "entity": c.names,
                "sends": c.sends + c.single + c.without_message_id + c.rejected,
                "accepted": accepted + c.single + c.without_message_id,
                "duplicates": c.sends - accepted,
                "rejected": c.rejected,
                "without_message_id": c.without_message_id,
                "not_checked": 0,
            }
        )
        table = with_total(table, list(SUMMARY_COLUMNS[1:-1]))
        judged = table["accepted"] + table["duplicates"]
        table["share_caught"] = (table["duplicates"] / judged.where(judged > 0)).astype("float64")
        return table[list(SUMMARY_COLUMNS)]

    def ground_truth_summary(self, window: timedelta | float | str) -> pd.DataFrame:
        """What the verdicts at ``window`` did to each message, by ground truth, from memory.

        The same table as :func:`~dedup_lib.analysis.summaries.ground_truth_summary` of
        :func:`dedup_lib.detect_duplicates` at that window.

        Parameters
        ----------
        window : timedelta, float (seconds) or str
            The window, as :func:`~dedup_lib.rules.durations.parse_window` reads it.

        Returns
        -------
        pandas.DataFrame
            One row per entity, then ``(all)``:

            - ``entity``
            - ``messages``
            - ``sends``
            - ``resends``
            - ``resends_caught``
            - ``extra_deliveries``: resends that reached consumers again
            - ``messages_lost``: collisions
            - ``first_sends_dropped``
            - ``messages_rejected``

        Raises
        ------
        InputError
            The input has no ground truth (see :attr:`has_ground_truth`), or a window that
            does not read.

        Examples
        --------
        With ``cache`` from the class's example (the sample has ground truth):

        >>> total = cache.ground_truth_summary("PT10M").iloc[-1]
        >>> int(total["resends"]), int(total["resends_caught"]), int(total["extra_deliveries"])
        (3310, 3104, 206)
        """
        if not self.cache.has_ground_truth:
            raise InputError(
                "ground_truth_summary: the input has no ground truth columns (logical_id, attempt)"
            )
        accepted = self.cache.anchors(window).accepted
        return truth_table(self.cache.truth, accepted)

    def over_time(self, window: timedelta | float | str) -> pd.DataFrame:
        """Sends per entity and time bucket at ``window``: what the sends-over-time chart draws.

        Parameters
        ----------
        window : timedelta, float (seconds) or str
            The window, as :func:`~dedup_lib.rules.durations.parse_window` reads it.

        Returns
        -------
        pandas.DataFrame
            One row per entity and time bucket with a send; sends without a send time
            (rejected) have no bucket: left out.

            - ``entity``
            - ``time``: UTC, the bucket's start
            - ``sends``
            - ``duplicates``: dropped by the broker
            - ``rejected``

        Raises
        ------
        InputError
            A window that does not read.

        Examples
        --------
        With ``cache`` from the class's example (one-minute buckets, three hours):

        >>> table = cache.over_time("PT10M")
        >>> print(table.head(3).to_string(index=False))
               entity                      time  sends  duplicates  rejected
        notifications 2026-11-03 20:00:00+00:00     23           0         0
        notifications 2026-11-03 20:01:00+00:00     22           0         0
        notifications 2026-11-03 20:02:00+00:00     23           0         0
        >>> table.groupby("entity")["duplicates"].sum().to_dict()
        {'notifications': 0, 'orders': 2945, 'payments': 159}
        """
        cells = self.cache.codes.cells
        return cells.over_time(self.cache.cell_duplicates(to_micros(window)))

    def top_keys(
        self, window: timedelta | float | str, n: int = 10, entity: str | None = None
    ) -> pd.DataFrame:
        """The dedup keys with the most sends dropped as duplicates at ``window``.

        Then the keys sent most (where fewer than ``n`` keys drop any, those a longer window
        would catch first); ties by entity and key.

        Parameters
        ----------
        window : timedelta, float (seconds) or str
            The window, as :func:`~dedup_lib.rules.durations.parse_window` reads it.
        n : int, default 10
            How many keys.
        entity : str, optional
            One entity's keys; None or ``(all)``: every entity's.

        Returns
        -------
        pandas.DataFrame
            At most ``n`` rows:

            - ``entity``
            - ``key``
            - ``sends``
            - ``duplicates``
            - ``messages``: with ground truth only; more than one: different messages
              share the key, a reused id

        Raises
        ------
        InputError
            A window that does not read.

        Examples
        --------
        With ``cache`` from the class's example:

        >>> cache.top_keys("PT10M", n=2)[["key", "sends", "duplicates", "messages"]]
                       key  sends  duplicates  messages
        0  8148.2026/order      6           5         1
        1  4675.2026/order      5           4         1
        """
        accepted = self.cache.anchors(window).accepted
        c = self.cache.codes
        if len(c.key_sends) == 0:
            return pd.DataFrame({"entity": [], "key": [], "sends": [], "duplicates": []})
        duplicates = np.bincount(self.cache.keyed.key_number, weights=~accepted).astype("int64")
        sends = c.key_sends.astype("int64")
        eligible = np.arange(len(duplicates))
        if entity not in (None, ALL_ENTITIES):
            code = c.names.index(entity) if entity in c.names else -1
            eligible = np.flatnonzero(c.key_entity == code)
        rows = most(duplicates[eligible] * (int(sends.max()) + 1) + sends[eligible], n)
        rows = eligible[rows]
        names = np.asarray(c.names, dtype=object)
        table = pd.DataFrame(
            {
                "entity": names[c.key_entity[rows]],
                "key": c.keys[rows],
                "sends": sends[rows],
                "duplicates": duplicates[rows],
            }
        )
        if self.cache.has_ground_truth:
            table["messages"] = self._messages_per_key[rows].astype("int64")
        # Ties by entity and key, as a stable order.
        top = table.sort_values(
            ["duplicates", "sends", "entity", "key"], ascending=[False, False, True, True]
        )
        return top.head(n).reset_index(drop=True)

    def resend_delays(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Each send of a dedup key after the key's first, with its delay since the one before.

        The same at every window (computed once): what a window does with a resend depends
        on its anchor, not on this delay.

        Parameters
        ----------
        columns : sequence of str, optional
            Only these columns (a chart's four of them cost a fraction of the whole); None:
            all.

        Returns
        -------
        pandas.DataFrame
            One row per send of a key after its first:

            - ``entity``: ``(none)`` for sends without one
            - ``key``
            - ``time_us``
            - ``event_id``
            - ``logical_id``: with ground truth only, and so the next two
            - ``attempt``
            - ``accepted_elsewhere``: the sends of its message accepted whatever the
              window (outside repeated keys, not rejected)
            - the columns the cache carries (:meth:`build`'s ``carry``)
            - ``delay_s``: since the key's previous send
            - ``time``: UTC

        Examples
        --------
        With ``cache`` from the class's example:

        >>> delays = cache.resend_delays(["entity", "delay_s"])
        >>> print(delays.head(3).to_string(index=False))
        entity  delay_s
        orders 0.933802
        orders 0.671364
        orders 0.853657
        >>> delays.groupby("entity")["delay_s"].median().round(1).to_dict()
        {'orders': 0.9, 'payments': 0.8}
        """
        if columns is None:
            return self._delays
        return self._resend_delays(columns)

    @cached_property
    def _delays(self) -> pd.DataFrame:
        """Every column of :meth:`resend_delays`, computed once."""
        return self._resend_delays(None)

    @cached_property
    def _messages_per_key(self) -> np.ndarray:
        """How many messages each repeated key carries (ground truth), computed once."""
        return distinct_per_key(self.cache.keyed.key_number, self.cache.repeated["logical_id"])

    def _resend_delays(self, columns: Sequence[str] | None) -> pd.DataFrame:
        key_number, time = self.cache.keyed.key_number, self.cache.keyed.time_us
        later = np.flatnonzero(key_number[1:] == key_number[:-1]) + 1

        def column(name: str) -> Any:
            if name == "delay_s":
                return (time[later] - time[later - 1]) / 1e6
            if name == "time":
                return pd.to_datetime(time[later], unit="us", utc=True)
            return self.cache.repeated[name].take(later).reset_index(drop=True)

        carried = [str(c) for c in self.cache.repeated if c not in ("key_number", "pos")]
        names = columns or [*carried, "delay_s", "time"]
        table = pd.DataFrame({name: column(name) for name in names})
        if "entity" in table:
            table["entity"] = table["entity"].fillna(NO_ENTITY)
        return table

    def held_over_time(self, window: timedelta | float | str) -> pd.DataFrame:
        """How many ids the duplicate history holds at the end of each time bucket, per entity.

        Every accepted send with a MessageId is held for ``window`` (docs/rules.md, section
        5): what a longer window costs the broker.

        Parameters
        ----------
        window : timedelta, float (seconds) or str
            The window, as :func:`~dedup_lib.rules.durations.parse_window` reads it.

        Returns
        -------
        pandas.DataFrame
            One row per entity and bucket, from each entity's first bucket with an
            accepted send to the window's end after its last:

            - ``entity``
            - ``time``: UTC, the bucket's end
            - ``held``

        Raises
        ------
        InputError
            A window that does not read.

        Examples
        --------
        With ``cache`` from the class's example:

        >>> held = cache.held_over_time("PT10M")
        >>> held.groupby("entity")["held"].max().to_dict()
        {'notifications': 236, 'orders': 894, 'payments': 372}
        """
        micros = to_micros(window)
        c = self.cache.codes
        held, first = c.cells.held(self.cache.cell_duplicates(micros), micros)
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
        """The same replay at many windows, from memory: the sweep of notebook 03.

        Parameters
        ----------
        windows : sequence of timedelta, float (seconds) or str, optional
            Default :func:`window_grid`: 50 windows from 20 s to 7 days, logarithmic.

        Returns
        -------
        pandas.DataFrame
            One row per window:

            - ``window_s``
            - ``duplicates``
            - ``share_caught``: of judged sends
            - ``peak_held``: most ids held at once, all entities
            - ``resends``: with ground truth only, as all below
            - ``catchable_resends``: resends that reuse a key sent before, the only ones
              any window can catch
            - ``resends_caught``
            - ``share_catchable_caught``
            - ``share_resends_caught``
            - ``extra_deliveries``
            - ``messages_lost``

        Raises
        ------
        InputError
            A window that does not read.

        Examples
        --------
        With ``cache`` from the class's example:

        >>> sweep = cache.sweep(["PT1M", "PT10M", "PT1H"])
        >>> sweep["window_s"].tolist()
        [60.0, 600.0, 3600.0]
        >>> sweep["duplicates"].tolist()
        [2731, 3104, 3104]
        """
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
            if self.cache.has_ground_truth:
                truth = self.ground_truth_summary(micros / 1e6).iloc[-1]
                catchable = int(self.cache.truth.resend.sum())
                row |= truth_columns(truth, catchable)
            rows.append(row)
        return pd.DataFrame(rows)

    def _peak_held(self, micros: int) -> int:
        """The most ids held at once at ``micros``, all entities together: the peak of the
        sum over entities of :meth:`held_over_time`."""
        held, first = self.cache.codes.cells.held(self.cache.cell_duplicates(micros), micros)
        if held.shape[1] == 0:
            return 0
        return int(held.sum(axis=0)[int(first[first >= 0].min()) :].max())
