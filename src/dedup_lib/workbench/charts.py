"""Plotly figures from small tables (pandas in, figure out; no Spark).

Every figure has a title, axis titles with units and hover text that names what a point is;
a figure coloured by a category names it in a legend, even for one value. Legends sit right of
the plot, where no axis title or label can be under them at any width. Durations are drawn on
a log scale labelled in human units (20 s, 10 min, 1 d). A table without rows gives a figure
that says so in words (``No resends on audit between ...``), its axes hidden: ``scope`` is
where the table was narrowed to, as words (default: in this selection).

Each builder gives a :data:`~dedup_lib.workbench.figures.Spec` (``*_spec``, what the explorer
redraws from) or a ``go.Figure`` made by :func:`~dedup_lib.workbench.figures.figure`, whose
texts are escaped: the hover templates written here never hold data, which comes from the
trace's name, ``meta`` or ``customdata``, and a value named in a legend is cut to
:data:`~dedup_lib.text.SHORT` characters.
"""

from __future__ import annotations

import functools
import math
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dedup_lib.rules.durations import format_duration
from dedup_lib.text import SHORT, shown
from dedup_lib.workbench.delay_bins import DelayBins
from dedup_lib.workbench.figures import (
    ANYWHERE,
    TEMPLATES,
    Spec,
    axis_title,
    figure,
    house_layout,
    safe,
    say_empty,
    show,
)

__all__ = [
    "ANYWHERE",
    "TEMPLATES",
    "Spec",
    "counts_over_time",
    "figure",
    "ids_held",
    "ids_held_spec",
    "resend_delays",
    "resend_delays_spec",
    "safe",
    "sends_over_time",
    "sends_over_time_spec",
    "sends_per_entity",
    "show",
    "window_marker",
    "window_sweep",
]

#: Tick positions for duration axes, in seconds, and their labels.
DURATION_TICKS = [
    (0.1, "100 ms"),
    (1, "1 s"),
    (20, "20 s"),
    (60, "1 min"),
    (600, "10 min"),
    (3600, "1 h"),
    (6 * 3600, "6 h"),
    (86400, "1 d"),
    (7 * 86400, "7 d"),
]
#: Colours per cause, so a cause looks the same in every chart.
CAUSE_COLOURS = {
    "first": "#7f7f7f",
    "ack_lost_retry": "#1f77b4",
    "restart_resend": "#ff7f0e",
    "replay": "#d62728",
}
CAUSE_LABELS = {
    "first": "first send of another message (shared id)",
    "ack_lost_retry": "retry after a lost acknowledgement",
    "restart_resend": "resend after a crash and restart",
    "replay": "operator replay",
}
#: The legend's name for resends whose cause column is empty.
NO_CAUSE = "(no cause given)"
_CAUSE_ORDER = {cause: n for n, cause in enumerate(CAUSE_LABELS)}


def _duration_axis(low: float, high: float, title: str) -> dict[str, Any]:
    """A log axis of durations from ``low`` to ``high`` seconds, ticks in human units."""
    ticks = [(s, label) for s, label in DURATION_TICKS if low / 1.5 <= s <= high * 1.5]
    return {
        **axis_title(title),
        "tickvals": [math.log10(s) for s, _ in ticks],
        "ticktext": [label for _, label in ticks],
    }


def window_marker(
    fig: go.Figure,
    window_s: float,
    *,
    log: bool = True,
    label: str | None = "top",
    row: int | None = None,
    col: int | None = None,
) -> None:
    """A dashed vertical line at the window, labelled with it at ``label`` (a plotly annotation
    position; ``None``: no label), in the subplot at ``row`` and ``col`` (None: every one)."""
    x = math.log10(window_s) if log else window_s
    annotation: dict[str, str] = {}
    if label:
        annotation = {
            "annotation_text": f"window {format_duration(window_s)}",
            "annotation_position": label,
            "annotation_bgcolor": "rgba(255,255,255,0.8)",
        }
    where = {name: at for name, at in (("row", row), ("col", col)) if at is not None}
    fig.add_vline(x=x, line_dash="dash", line_color="black", **annotation, **where)


def _window_line(spec: Spec, window_s: float) -> None:
    """:func:`window_marker` on a one-panel log axis, labelled above the plot."""
    x = math.log10(window_s)
    layout = spec["layout"]
    layout.setdefault("shapes", []).append(
        {"line": {"color": "black", "dash": "dash"}, "type": "line", "x0": x, "x1": x,
         "xref": "x", "y0": 0, "y1": 1, "yref": "y domain"}
    )  # fmt: skip
    layout.setdefault("annotations", []).append(
        {"bgcolor": "rgba(255,255,255,0.8)", "showarrow": False,
         "text": f"window {format_duration(window_s)}", "x": x, "xanchor": "center",
         "xref": "x", "y": 1, "yanchor": "bottom", "yref": "y domain"}
    )  # fmt: skip


def _times(times: pd.Series) -> np.ndarray:
    """Times as UTC wall clock, to the millisecond (plotly.js's precision). A ``go.Figure``
    writes them as ISO text; the explorer sends them to the browser as numbers, which
    plotly.js reads on a date axis without parsing text (a twelfth of a redraw)."""
    if isinstance(times.dtype, pd.DatetimeTZDtype):
        times = times.dt.tz_convert("UTC").dt.tz_localize(None)
    return times.to_numpy("datetime64[ns]").astype("datetime64[ms]")


#: A time axis: declared, so that plotly.js neither guesses it from the values nor needs them
#: as text.
_TIME_AXIS = {"title": {"text": "time (UTC)"}, "type": "date"}


def sends_over_time_spec(
    table: pd.DataFrame, *, title: str | None = None, scope: str = ANYWHERE
) -> Spec:
    """:func:`sends_over_time` as a :data:`Spec`."""
    per_time = table.groupby("time", as_index=False)[["sends", "duplicates"]].sum()
    times = per_time["time"]
    step = _bucket_label(times)
    x = _times(times)
    hover = "%{x|%Y-%m-%d %H:%M} UTC<br>%{y:,} "
    sends = {
        "hovertemplate": hover + "sends<extra></extra>", "line": {"color": "#1f77b4"},
        "mode": "lines", "name": "sends", "x": x, "y": per_time["sends"].to_numpy(),
        "yaxis": "y", "type": "scatter",
    }  # fmt: skip
    # Dropped duplicates as a solid step area: it looks like touching bars, one per bucket,
    # but is one SVG path where bars are one each (half of a redraw's time in the browser).
    # The last bucket is closed by a point at its end, which has no hover of its own.
    duplicates = per_time["duplicates"].to_numpy()
    end = _times(times.iloc[-1:] + pd.Timedelta(_bucket_seconds(times), "s")) if len(times) else x
    dropped = {
        "fill": "tozeroy", "fillcolor": "#d62728",
        "hoverinfo": ["all"] * len(times) + ["skip"] * len(end),
        "hovertemplate": hover + "dropped<extra></extra>",
        "line": {"color": "#d62728", "shape": "hv", "width": 0}, "mode": "lines",
        "name": "dropped as duplicates", "x": np.concatenate([x, end]),
        "y": np.append(duplicates, duplicates[-1:]), "yaxis": "y2", "type": "scatter",
    }  # fmt: skip
    # One time axis under both panels (``xaxis``, as every time chart has), two count axes.
    layout = house_layout(
        title or "Sends and duplicates the broker drops, over time",
        "per time bucket",
        bargap=0,
        xaxis={**_TIME_AXIS, "anchor": "y2"},
        yaxis={**axis_title(f"sends/{step}"), "domain": [0.45, 1], "rangemode": "tozero"},
        yaxis2={**axis_title(f"dropped/{step}"), "domain": [0, 0.36], "anchor": "x",
                "rangemode": "tozero"},
    )  # fmt: skip
    spec: Spec = {"data": [sends, dropped], "layout": layout}
    if per_time.empty:
        return say_empty(spec, f"No sends {scope}")
    if not duplicates.any():
        layout["yaxis2"] = {**layout["yaxis2"], "range": [0, 1], "tickvals": [0]}
        layout["annotations"] = [
            {"text": f"no duplicates dropped {scope}", "x": 0.5, "y": 0.5,
             "xref": "x domain", "yref": "y2 domain", "showarrow": False}
        ]  # fmt: skip
    return spec


def sends_over_time(
    table: pd.DataFrame, *, title: str | None = None, scope: str = ANYWHERE
) -> go.Figure:
    """Sends (top panel, a line) and the duplicates the broker dropped (bottom panel, red steps)
    per time bucket, summed over entities, from :meth:`ReplayCache.over_time` (``time``,
    ``sends``, ``duplicates``). Each panel has its own count axis: a few duplicates stay visible
    beside thousands of sends, and each axis says what it counts."""
    return figure(sends_over_time_spec(table, title=title, scope=scope))


def counts_over_time(
    table: pd.DataFrame, by: str, *, title: str, what: str = "sends", scope: str = ANYWHERE
) -> go.Figure:
    """Stacked bars per time bucket, one colour per value of ``by`` (``time``, ``by``,
    ``sends``, summed over entities), from
    :func:`dedup_lib.analysis.diagnostics.counts_over_time`; the legend names each value."""
    step = _bucket_label(pd.Series(table["time"].unique()))
    data = []
    for name, rows in table.groupby(by, sort=True):
        per_time = rows.groupby("time", as_index=False)["sends"].sum()
        data.append(
            {"hovertemplate": "%{x|%Y-%m-%d %H:%M} UTC<br>%{y:,} %{meta}<br>%{fullData.name}"
             "<extra></extra>", "meta": what, "name": shown(name, SHORT),
             "x": _times(per_time["time"]), "y": per_time["sends"].to_numpy(), "type": "bar"}
        )  # fmt: skip
    layout = house_layout(
        title,
        by.replace("_", " "),
        barmode="stack",
        xaxis=_TIME_AXIS,
        yaxis=axis_title(f"{what} per {step}"),
    )
    spec: Spec = {"data": data, "layout": layout}
    return figure(say_empty(spec, f"No {what} {scope}") if table.empty else spec)


def _bucket_seconds(times: pd.Series) -> float:
    """The width of the time buckets: the usual gap between two (a minute with one)."""
    if len(times) < 2:
        return 60.0
    return float(np.median(np.diff(times.sort_values().astype("int64")))) / 1e9


def _bucket_label(times: pd.Series) -> str:
    seconds = _bucket_seconds(times)
    return format_duration(seconds) if len(times) >= 2 and seconds >= 1 else "bucket"


def _cause_rank(cause: object) -> int:
    return _CAUSE_ORDER.get(str(cause), len(_CAUSE_ORDER))


def _cause_name(cause: object) -> str:
    """A cause as its legend names it: in words where it is one of the generator's."""
    if cause is None or (isinstance(cause, float) and math.isnan(cause)):
        return NO_CAUSE
    return CAUSE_LABELS.get(str(cause)) or shown(cause, SHORT)


def _log_edges(low: float, high: float) -> np.ndarray:
    """The edges of 60 log bins covering ``low`` to ``high`` seconds, as log10 of seconds."""
    return np.linspace(math.log10(low) - 0.05, math.log10(high) + 0.05, 61)


@functools.lru_cache(maxsize=64)
def _bin_labels(low: float, high: float) -> tuple[str, ...]:
    """The delay range of each bin of :func:`_log_edges`, in words."""
    edges = _log_edges(low, high)
    return tuple(
        f"{format_duration(10**a)} to {format_duration(10**b)}" for a, b in pairwise(edges)
    )


def resend_delays_spec(
    delays: pd.DataFrame | DelayBins,
    window_s: float,
    *,
    title: str | None = None,
    scope: str = ANYWHERE,
) -> Spec:
    """:func:`resend_delays` as a :data:`Spec`; ``delays`` laid out as :class:`DelayBins`
    where it is drawn again and again (the explorer)."""
    bins = delays if isinstance(delays, DelayBins) else DelayBins.of(delays)
    low, high = bins.span()
    low, high = min(low, window_s), max(high, window_s)
    edges = _log_edges(low, high)
    groups = sorted(bins.counts(edges), key=lambda g: (_cause_rank(g[0]), str(g[0])))
    centres = (edges[:-1] + edges[1:]) / 2
    labels = list(_bin_labels(low, high))
    data = []
    for cause, counts in groups:
        bar: dict[str, Any] = {
            "customdata": labels,
            "hovertemplate": "%{customdata}<br>%{y:,} sends<extra>%{fullData.name}</extra>",
            "name": _cause_name(cause),
            "width": float(edges[1] - edges[0]), "x": centres, "y": counts, "type": "bar",
        }  # fmt: skip
        if str(cause) in CAUSE_COLOURS:
            bar["marker"] = {"color": CAUSE_COLOURS[str(cause)]}
        data.append(bar)
    layout = house_layout(
        title or "Delay of each resend after the previous send with the same key",
        "sends" if bins.causes is None else "cause",
        barmode="stack",
        yaxis=axis_title("sends"),
    )
    spec: Spec = {"data": data, "layout": layout}
    if len(bins) == 0:
        return say_empty(spec, f"No resends {scope}: no send reused a key sent before")
    layout["xaxis"] = _duration_axis(low, high, "delay after the previous send (log scale)")
    _window_line(spec, window_s)
    return spec


def resend_delays(
    delays: pd.DataFrame, window_s: float, *, title: str | None = None, scope: str = ANYWHERE
) -> go.Figure:
    """Histogram of each resend's delay after the previous send of its key, on a log scale,
    stacked by ``cause`` when the table has it, with the window drawn: sends left of the line
    are caught (measured from their anchor), those right of it reach consumers again."""
    return figure(resend_delays_spec(delays, window_s, title=title, scope=scope))


def _lines_per_entity(
    table: pd.DataFrame, column: str, unit: str, *, stacked: bool = False
) -> list[dict[str, Any]]:
    """One line of ``column`` over ``time`` per entity, stacked if asked."""
    data = []
    for entity, group in table.groupby("entity"):
        line: dict[str, Any] = {
            "hovertemplate": "%{x|%Y-%m-%d %H:%M} UTC<br>%{y:,} %{meta}"
            "<extra>%{fullData.name}</extra>", "meta": unit, "mode": "lines",
            "name": shown(entity, SHORT), "x": _times(group["time"]),
            "y": group[column].to_numpy(), "type": "scatter",
        }  # fmt: skip
        if stacked:
            line["stackgroup"] = column
        data.append(line)
    return data


def ids_held_spec(
    table: pd.DataFrame, window_s: float, *, title: str | None = None, scope: str = ANYWHERE
) -> Spec:
    """:func:`ids_held` as a :data:`Spec`."""
    layout = house_layout(
        title or f"Ids held in the duplicate history, window {format_duration(window_s)}",
        "entity",
        xaxis=_TIME_AXIS,
        yaxis=axis_title("ids held (count)"),
    )
    spec: Spec = {"data": _lines_per_entity(table, "held", "ids held", stacked=True),
                  "layout": layout}  # fmt: skip
    if table.empty:
        return say_empty(spec, f"No ids held {scope}: no accepted send with a MessageId")
    return spec


def ids_held(
    table: pd.DataFrame, window_s: float, *, title: str | None = None, scope: str = ANYWHERE
) -> go.Figure:
    """Ids in the duplicate history over time, stacked per entity (``entity``, ``time``,
    ``held``), from :meth:`ReplayCache.held_over_time`: the throughput cost of the window."""
    return figure(ids_held_spec(table, window_s, title=title, scope=scope))


def window_sweep(
    sweep: pd.DataFrame, *, target: float | None = None, chosen_s: float | None = None,
    title: str | None = None,
) -> go.Figure:  # fmt: skip
    """Share caught, messages lost and peak ids held against the window (log scale), from
    :meth:`ReplayCache.sweep`; ``target`` draws the share to reach, ``chosen_s`` a window."""
    share = "share_resends_caught" if "share_resends_caught" in sweep else "share_caught"
    x = np.log10(sweep["window_s"])
    labels = [format_duration(w) for w in sweep["window_s"]]
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
        subplot_titles=(
            "share of resends caught" if share == "share_resends_caught"
            else "share of judged sends dropped as duplicates",
            "distinct messages lost (dropped, never delivered)"
            if "messages_lost" in sweep else "duplicates dropped",
            "peak ids held at once",
        ),
    )  # fmt: skip
    lost = _sweep_curves(fig, sweep, share, x, labels)
    _sweep_marks(fig, sweep, x, target, chosen_s)
    fig.update_yaxes(title_text="%", row=1, col=1)
    fig.update_yaxes(title_text="messages" if lost == "messages_lost" else "sends", row=2, col=1)
    fig.update_yaxes(title_text="ids", row=3, col=1)
    low, high = float(sweep["window_s"].min()), float(sweep["window_s"].max())
    fig.update_xaxes(_duration_axis(low, high, "duplicate detection window (log scale)"), row=3)
    fig.update_xaxes(_duration_axis(low, high, ""), row=1)
    fig.update_xaxes(_duration_axis(low, high, ""), row=2)
    fig.update_layout(
        house_layout(
            title or "What each window catches, loses and costs", "share caught", height=750
        ),
        overwrite=True,
    )
    return figure(fig)


def _sweep_curves(
    fig: go.Figure, sweep: pd.DataFrame, share: str, x: Any, labels: list[str]
) -> str:
    """The sweep's curves in their panels: shares caught, what is lost, ids held; the column
    the second panel shows."""
    shares = [(share, "of all resends" if share == "share_resends_caught" else "caught")]
    if "share_catchable_caught" in sweep:
        shares.insert(0, ("share_catchable_caught", "of resends that reuse their id"))
    for column, name in shares:
        fig.add_trace(
            go.Scatter(x=x, y=100 * sweep[column], name=name, mode="lines+markers",
                       customdata=labels,
                       hovertemplate="window %{customdata}<br>%{y:.2f} % caught<extra>"
                       + name + "</extra>"),
            row=1, col=1,
        )  # fmt: skip
    lost = "messages_lost" if "messages_lost" in sweep else "duplicates"
    fig.add_trace(
        go.Scatter(x=x, y=sweep[lost], name=lost.replace("_", " "), mode="lines+markers",
                   customdata=labels, marker_color="#d62728", showlegend=False,
                   hovertemplate="window %{customdata}<br>%{y:,}<extra></extra>"),
        row=2, col=1,
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(x=x, y=sweep["peak_held"], name="peak ids held", mode="lines+markers",
                   customdata=labels, marker_color="#2ca02c", showlegend=False,
                   hovertemplate="window %{customdata}<br>%{y:,} ids at the peak<extra></extra>"),
        row=3, col=1,
    )  # fmt: skip
    return lost


def _sweep_marks(
    fig: go.Figure, sweep: pd.DataFrame, x: Any, target: float | None, chosen_s: float | None
) -> None:
    """The target share (in the legend) and the chosen window (a line through every panel)."""
    if target is not None:
        # Named in the legend: a label on the plot would sit on the share curves near it.
        fig.add_trace(
            go.Scatter(x=[x.min(), x.max()], y=[100 * target] * 2, mode="lines",
                       name=f"target {100 * target:g} %", hoverinfo="skip",
                       line={"color": "black", "dash": "dot", "width": 1}),
            row=1, col=1,
        )  # fmt: skip
    if chosen_s is not None:
        # Labelled once, inside the bottom panel (the cost, lowest left of the line): above a
        # panel the label would sit on that panel's title.
        span = math.log10(sweep["window_s"].max() / sweep["window_s"].min()) or 1.0
        right_half = math.log10(chosen_s / sweep["window_s"].min()) / span > 0.5
        for row in (1, 2):
            window_marker(fig, chosen_s, label=None, row=row, col=1)
        window_marker(fig, chosen_s, label="top left" if right_half else "top right", row=3, col=1)


def sends_per_entity(
    table: pd.DataFrame, *, title: str | None = None, scope: str = ANYWHERE
) -> go.Figure:
    """Sends per time bucket, one line per entity (``entity``, ``time``, ``sends``), from
    :func:`dedup_lib.analysis.summaries.sends_over_time`."""
    step = _bucket_label(table["time"].drop_duplicates()) if len(table) else "bucket"
    layout = house_layout(
        title or "Sends over time, per entity",
        "entity",
        xaxis=_TIME_AXIS,
        yaxis=axis_title(f"sends per {step}"),
    )
    spec: Spec = {"data": _lines_per_entity(table, "sends", "sends"), "layout": layout}
    return figure(say_empty(spec, f"No sends {scope}") if table.empty else spec)
