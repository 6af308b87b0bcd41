"""What the window explorer shows for one setting of its controls: its figures, tables and
charts, computed from a :class:`ReplayCache` in memory (no Spark job)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from dedup_lib.analysis.selection import narrow
from dedup_lib.analysis.totals import ALL_ENTITIES
from dedup_lib.rules.durations import format_duration
from dedup_lib.text import SHORT, shown
from dedup_lib.workbench import charts
from dedup_lib.workbench.delay_bins import delay_bins

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from dedup_lib.sweep.cache import ReplayCache


@dataclass(frozen=True)
class View:
    """What the explorer shows for one setting of its controls."""

    window_s: float
    partitioning: bool
    entity: str
    time_range: tuple[pd.Timestamp, pd.Timestamp] | None
    numbers: pd.DataFrame
    top_keys: pd.DataFrame
    #: What the keys table shows, said above it: the keys with the most sends dropped, or,
    #: where the window drops none, the keys sent most often.
    keys_caption: str
    #: The charts as plotly.js reads them (sends over time, resend delays, ids held): what
    #: the explorer draws; the properties below give each as a ``go.Figure``.
    figures: tuple[charts.Spec, charts.Spec, charts.Spec]

    @property
    def sends_over_time(self) -> go.Figure:
        return charts.figure(self.figures[0])

    @property
    def resend_delays(self) -> go.Figure:
        return charts.figure(self.figures[1])

    @property
    def ids_held(self) -> go.Figure:
        return charts.figure(self.figures[2])


def view_of(
    cache: ReplayCache,
    seconds: float,
    partitioning: bool,
    entity: str,
    rng: tuple[pd.Timestamp, pd.Timestamp] | None,
    span: tuple[Any, Any] | None,
) -> View:
    """The view of ``cache`` for a window of ``seconds``, one ``entity`` (or all), and the time
    range ``rng`` (None: all of it); ``span`` is the range the titles name."""

    def pick(table: pd.DataFrame) -> pd.DataFrame:
        low, high = rng or (None, None)
        return narrow(table, entity, low, high, time="time")

    over_time = pick(cache.over_time(seconds))
    held = pick(cache.held_over_time(seconds))
    keys = cache.top_keys(seconds, n=10, entity=entity)
    where = "all entities" if entity == ALL_ENTITIES else shown(entity, SHORT)
    scope = f"on {where}"
    if span is not None:
        scope += f" between {minute(span[0])} and {minute(span[1])} UTC"
    title = (
        f"Sends and dropped duplicates, {where}, window {format_duration(seconds)}, "
        f"{mode_name(partitioning)}"
    )
    return View(
        window_s=seconds,
        partitioning=partitioning,
        entity=entity,
        time_range=rng,
        numbers=_numbers(over_time, held),
        top_keys=keys,
        keys_caption=_keys_caption(keys, seconds, rng is not None),
        figures=(
            charts.sends_over_time_spec(over_time, title=title, scope=scope),
            charts.resend_delays_spec(
                delay_bins(cache).part(entity, *(rng or (None, None))), seconds, scope=scope
            ),
            charts.ids_held_spec(held, seconds, scope=scope),
        ),
    )


def _numbers(over_time: pd.DataFrame, held: pd.DataFrame) -> pd.DataFrame:
    """The explorer's figures: sends, accepted, dropped, rejected, share dropped, peak held."""
    sends = int(over_time["sends"].sum())
    duplicates = int(over_time["duplicates"].sum())
    rejected = int(over_time["rejected"].sum())
    judged = sends - rejected
    peak = int(held.groupby("time")["held"].sum().max()) if len(held) else 0
    return pd.DataFrame(
        {
            "figure": ["sends", "accepted", "dropped as duplicates", "rejected",
                       "share of judged sends dropped", "peak ids held"],
            "value": [f"{sends:,}", f"{judged - duplicates:,}", f"{duplicates:,}",
                      f"{rejected:,}", f"{duplicates / judged:.2%}" if judged else "-",
                      f"{peak:,}"],
        }
    )  # fmt: skip


def minute(time: Any) -> str:
    """A time to the minute, as the explorer labels its range."""
    return pd.Timestamp(time).strftime("%Y-%m-%d %H:%M")


def mode_name(partitioning: bool) -> str:
    return "partitioning enabled" if partitioning else "partitioning disabled"


def _keys_caption(keys: pd.DataFrame, seconds: float, ranged: bool) -> str:
    """The caption of the keys table (no data in it: names stay in the cells, as text). The
    keys are counted over the whole time span: said where a range is chosen."""
    window = format_duration(seconds)
    if keys.empty:
        caption = f"No key sent more than once (window {window})"
    elif int(keys["duplicates"].sum()) == 0:
        caption = f"No send dropped at {window}: the keys sent most often"
    else:
        caption = f"Keys with the most sends dropped at {window}"
    return f"{caption}, over the whole time span" if ranged else caption
