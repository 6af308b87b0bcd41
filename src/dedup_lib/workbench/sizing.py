"""Sizing the window (notebook 03): the sweep of both partitioning modes, the smallest window
reaching a target share of the resends any window can catch, rounded up to one a person
configures, and what it catches, loses and costs beside ten minutes.

The target is a share of resends, which only ground truth tells. Without it the sweep still
shows what each window drops and how many ids it holds, and the recommendation is a sentence
saying why there is none, not the share of all judged sends dropped (which no window would
ever bring to 99 %, so it would read as "no window is enough").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

import pandas as pd

from dedup_lib.analysis.evidence import Evidence
from dedup_lib.rules.durations import format_duration, format_window
from dedup_lib.sweep.cache import ReplayCache
from dedup_lib.sweep.grid import configurable_window, smallest_window
from dedup_lib.workbench import charts
from dedup_lib.workbench.section import Section

__all__ = ["WindowSizing"]

#: The columns of the choices table, those the sweep has.
CHOICE_COLUMNS = (
    "window_s",
    "setting",
    "share_catchable_caught",
    "catchable_resends",
    "share_resends_caught",
    "resends",
    "messages_lost",
    "duplicates",
    "peak_held",
)
COMPARED = "PT10M"


def _mode(partitioning: bool) -> str:
    return f"partitioning {'enabled' if partitioning else 'disabled'}"


@dataclass(frozen=True)
class Pick:
    """The sweep's smallest window reaching the target, the window configured for it, and
    the sweep's figures at that window."""

    smallest: pd.Series
    window: timedelta
    at: pd.Series


@dataclass(frozen=True)
class WindowSizing:
    """The 50-window sweep per partitioning mode, and the smallest window that reaches a
    target share of resends caught (notebook 03).

    Parameters
    ----------
    caches : Mapping[bool, ReplayCache]
        One cache per partitioning mode.
    target : float
        The share of resends to catch, 0 to 1 (with ground truth; without it no window is
        picked).

    Attributes
    ----------
    sweeps : dict[bool, pandas.DataFrame]
        :meth:`ReplayCache.sweep` per mode.
    picks : dict[bool, Pick]
        The window picked per mode, where the target is reached.

    Examples
    --------
    >>> from dedup_lib import ReplayCache, WindowSizing, get_spark, load_telemetry
    >>> from dedup_lib import sample_path
    >>> sends = load_telemetry(get_spark(), sample_path("incident.parquet")).valid
    >>> sizing = WindowSizing({False: ReplayCache.build(sends)}, target=0.99)
    >>> sweep = sizing.sweeps[False]
    >>> sweep["window_s"].iloc[[0, -1]].tolist()  # fifty windows, from 20 s to 7 days
    [20.0, 604800.0]
    >>> sweep.loc[sweep["window_s"].isin([20.0, 604800.0]), "duplicates"].tolist()
    [2707, 3104]

    The methods' examples go on with this ``sizing``.
    """

    caches: Mapping[bool, ReplayCache]
    target: float
    sweeps: dict[bool, pd.DataFrame] = field(init=False)
    picks: dict[bool, Pick] = field(init=False)

    def __post_init__(self) -> None:
        sweeps = {mode: cache.sweep() for mode, cache in self.caches.items()}
        picks = {}
        if self.has_ground_truth:
            for mode, sweep in sweeps.items():
                best = smallest_window(sweep, self.target)
                if best is not None:
                    window = configurable_window(best["window_s"])
                    picks[mode] = Pick(best, window, self.caches[mode].sweep([window]).iloc[0])
        object.__setattr__(self, "sweeps", sweeps)
        object.__setattr__(self, "picks", picks)

    @property
    def has_ground_truth(self) -> bool:
        """bool: Whether every mode's cache has ground truth, which the target needs."""
        return all(cache.has_ground_truth for cache in self.caches.values())

    def charts(self) -> Section:
        """One sweep chart per mode, with the target and the window picked drawn on it.

        Returns
        -------
        Section
            One plotly figure per mode (:func:`dedup_lib.charts.window_sweep`).

        Examples
        --------
        With ``sizing`` from the class's example:

        >>> for figure in sizing.charts().figures:
        ...     print(figure.layout.title.text)
        Window sweep, partitioning disabled
        """
        figures = []
        for mode, sweep in self.sweeps.items():
            pick = self.picks.get(mode)
            chosen = pick.window.total_seconds() if pick else None
            target = self.target if self.has_ground_truth else None
            title = f"Window sweep, {_mode(mode)}"
            figures.append(charts.window_sweep(sweep, target=target, chosen_s=chosen, title=title))
        return Section.of(*figures)

    def recommendation(self) -> Section:
        """The window picked per mode in words, with what it catches, loses and holds.

        Returns
        -------
        Section
            One sentence in markdown, a line per mode: the window to configure, the sweep's
            smallest window reaching the target, the share of catchable resends caught,
            the messages lost and the most ids held; where no window up to 7 days reaches
            the target, that; without ground truth, why no window is picked.

        Examples
        --------
        With ``sizing`` from the class's example:

        >>> print(sizing.recommendation().sentences[0])
        - **partitioning disabled**: `PT5M` (5 minutes; the sweep's smallest window reaching
        99% is 4m10s): it catches 100.0% of the resends that reuse their id, loses 0
        messages and holds at most 751 ids.
        """
        if not self.has_ground_truth:
            return Section.of(
                Evidence.of(()).lacks(
                    "ground truth",
                    "which share of the resends a window catches, so no window is picked "
                    "for a target: the charts show what each window drops and the ids it holds",
                )
            )
        lines = []
        for mode in self.sweeps:
            pick = self.picks.get(mode)
            if pick is None:
                lines.append(
                    f"- **{_mode(mode)}**: no window up to 7 days catches {self.target:.0%}."
                )
                continue
            at = pick.at
            lines.append(
                f"- **{_mode(mode)}**: `{format_window(pick.window, 'iso')}` "
                f"({format_window(pick.window, 'words')}; the sweep's smallest window reaching "
                f"{self.target:.0%} is {format_duration(pick.smallest['window_s'])}): it catches"
                f" {at['share_catchable_caught']:.1%} of the resends that reuse their id, loses"
                f" {int(at['messages_lost']):,} messages and holds at most "
                f"{int(at['peak_held']):,} ids."
            )
        return Section.of("\n".join(lines))

    def choices(self) -> Section:
        """Per mode, the window picked beside ten minutes, as a table.

        Returns
        -------
        Section
            One table, a row per mode and choice: ``partitioning``, ``choice``, ``window_s``,
            ``setting`` (ISO 8601) and the sweep's columns at that window (those it has:
            ``share_catchable_caught``, ``resends``, ``messages_lost``, ``duplicates``,
            ``peak_held``, ...).

        Examples
        --------
        With ``sizing`` from the class's example:

        >>> sizing.choices().tables[0][["choice", "setting", "peak_held"]]
                               choice setting  peak_held
        0      recommended: 5 minutes    PT5M      751.0
        1  10 minutes, for comparison   PT10M     1496.0
        """
        picked = []
        for mode, cache in self.caches.items():
            rows = [("10 minutes, for comparison", cache.sweep([COMPARED]).iloc[0])]
            pick = self.picks.get(mode)
            if pick is not None:
                rows.insert(0, (f"recommended: {format_window(pick.window, 'words')}", pick.at))
            for choice, row in rows:
                setting = format_window(pd.Timedelta(seconds=row["window_s"]), "iso")
                values = row.to_dict() | {"setting": setting}
                state = "enabled" if mode else "disabled"
                picked.append({"partitioning": state, "choice": choice, **values})
        table = pd.DataFrame(picked)
        shown = [c for c in ("partitioning", "choice", *CHOICE_COLUMNS) if c in table]
        return Section.of(table[shown])
