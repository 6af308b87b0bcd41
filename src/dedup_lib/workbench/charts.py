"""Plotly figures from small tables (pandas in, figure out; no Spark).

Every figure has a title, axis titles with units and hover text that names what a point is;
a figure coloured by a category names it in a legend, even for one value. Legends sit right of
the plot, where no axis title or label can be under them at any width. Durations are drawn on
a log scale labelled in human units (20 s, 10 min, 1 d). A table without rows gives a figure
that says so in words (``No resends on audit between ...``), its axes hidden: ``scope`` is
where the table was narrowed to, as words (default: in this selection).
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from dedup_lib.rules.durations import format_duration

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
_CAUSE_ORDER = {cause: n for n, cause in enumerate(CAUSE_LABELS)}


def _white() -> go.layout.Template:
    """``plotly_white`` as far as bar and scatter charts use it: its layout (colours, axes,
    fonts) and its bar and scatter defaults. The whole template costs 11 ms to copy into
    each figure, this one 3 ms: the explorer builds three figures on every control change."""
    white = pio.templates["plotly_white"]
    used = (
        "autotypenumbers", "colorway", "font", "hovermode", "hoverlabel", "paper_bgcolor",
        "plot_bgcolor", "xaxis", "yaxis", "shapedefaults", "annotationdefaults", "title",
    )  # fmt: skip
    return go.layout.Template(
        layout={name: white.layout[name] for name in used},
        data={"bar": white.data.bar, "scatter": white.data.scatter},
    )


_LAYOUT = {"template": _white(), "hovermode": "closest", "showlegend": True}
#: Where a table was narrowed to, when the caller does not say.
ANYWHERE = "in this selection"


def _legend(title: str) -> dict[str, object]:
    """A vertical legend right of the plot, titled with what its colours stand for."""
    return {"legend": {"title": {"text": title}, "orientation": "v", "x": 1.02, "y": 1}}


def _say_empty(fig: go.Figure, message: str) -> go.Figure:
    """``fig`` with every axis hidden and ``message`` in its middle: an empty table drawn as
    words, never as empty axes with made-up ranges."""
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(showlegend=False)
    fig.add_annotation(
        text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
        font={"size": 16},
    )  # fmt: skip
    return fig


def _log_duration_axis(fig: go.Figure, low: float, high: float, title: str, **where: int) -> None:
    ticks = [(s, label) for s, label in DURATION_TICKS if low / 1.5 <= s <= high * 1.5]
    fig.update_xaxes(
        title_text=title,
        tickvals=[math.log10(s) for s, _ in ticks],
        ticktext=[label for _, label in ticks],
        **where,
    )


def window_marker(
    fig: go.Figure, window_s: float, *, log: bool = True, label: str | None = "top", **where: int
) -> None:
    """A dashed vertical line at the window, labelled with it at ``label`` (a plotly annotation
    position; ``None``: no label)."""
    x = math.log10(window_s) if log else window_s
    annotation: dict[str, str] = {}
    if label:
        annotation = {
            "annotation_text": f"window {format_duration(window_s)}",
            "annotation_position": label,
            "annotation_bgcolor": "rgba(255,255,255,0.8)",
        }
    fig.add_vline(x=x, line_dash="dash", line_color="black", **annotation, **where)


def sends_over_time(
    table: pd.DataFrame, *, title: str | None = None, scope: str = ANYWHERE
) -> go.Figure:
    """Sends (top panel, a line) and the duplicates the broker dropped (bottom panel, red steps)
    per time bucket, summed over entities, from :meth:`ReplayCache.over_time` (``time``,
    ``sends``, ``duplicates``). Each panel has its own count axis: a few duplicates stay visible
    beside thousands of sends, and each axis says what it counts."""
    per_time = table.groupby("time", as_index=False)[["sends", "duplicates"]].sum()
    step = _bucket_label(per_time["time"])
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=per_time["time"],
            y=per_time["sends"],
            name="sends",
            mode="lines",
            line={"color": "#1f77b4"},
            yaxis="y",
            hovertemplate="%{x|%Y-%m-%d %H:%M} UTC<br>%{y:,} sends<extra></extra>",
        )
    )
    # Dropped duplicates as a solid step area: it looks like touching bars, one per bucket,
    # but is one SVG path where bars are one each (half of a redraw's time in the browser).
    # The last bucket is closed by a point at its end, which has no hover of its own.
    times = per_time["time"]
    ends = [times.iloc[-1] + pd.Timedelta(_bucket_seconds(times), "s")] if len(times) else []
    fig.add_trace(
        go.Scatter(
            x=pd.concat([times, pd.Series(ends, dtype=times.dtype)], ignore_index=True),
            y=np.append(per_time["duplicates"].to_numpy(), per_time["duplicates"].iloc[-1:]),
            name="dropped as duplicates",
            mode="lines",
            line={"shape": "hv", "width": 0, "color": "#d62728"},
            fill="tozeroy",
            fillcolor="#d62728",
            yaxis="y2",
            hoverinfo=["all"] * len(times) + ["skip"] * len(ends),
            hovertemplate="%{x|%Y-%m-%d %H:%M} UTC<br>%{y:,} dropped<extra></extra>",
        )
    )
    # One time axis under both panels (``xaxis``, as every time chart has), two count axes.
    fig.update_layout(
        title=title or "Sends and duplicates the broker drops, over time",
        bargap=0,
        xaxis={"title": {"text": "time (UTC)"}, "anchor": "y2"},
        yaxis={"title": {"text": f"sends/{step}"}, "domain": [0.45, 1], "rangemode": "tozero"},
        yaxis2={
            "title": {"text": f"dropped/{step}"},
            "domain": [0, 0.36],
            "anchor": "x",
            "rangemode": "tozero",
        },
        **_LAYOUT,
        **_legend("per time bucket"),
    )
    if per_time.empty:
        return _say_empty(fig, f"No sends {scope}")
    if not per_time["duplicates"].any():
        fig.update_layout(yaxis2={"range": [0, 1], "tickvals": [0]})
        fig.add_annotation(
            text=f"no duplicates dropped {scope}", x=0.5, y=0.5, xref="x domain",
            yref="y2 domain", showarrow=False,
        )  # fmt: skip
    return fig


def counts_over_time(
    table: pd.DataFrame, by: str, *, title: str, what: str = "sends", scope: str = ANYWHERE
) -> go.Figure:
    """Stacked bars per time bucket, one colour per value of ``by`` (``time``, ``by``,
    ``sends``, summed over entities), from
    :func:`dedup_lib.analysis.diagnostics.counts_over_time`; the legend names each value."""
    step = _bucket_label(pd.Series(table["time"].unique()))
    fig = go.Figure()
    for name, rows in table.groupby(by, sort=True):
        per_time = rows.groupby("time", as_index=False)["sends"].sum()
        fig.add_trace(
            go.Bar(
                x=per_time["time"],
                y=per_time["sends"],
                name=str(name),
                hovertemplate=f"%{{x|%Y-%m-%d %H:%M}} UTC<br>%{{y:,}} {what}<br>{name}"
                "<extra></extra>",
            )
        )
    fig.update_layout(
        title=title,
        barmode="stack",
        xaxis_title="time (UTC)",
        yaxis_title=f"{what} per {step}",
        **_LAYOUT,
        **_legend(by.replace("_", " ")),
    )
    return _say_empty(fig, f"No {what} {scope}") if table.empty else fig


def _bucket_seconds(times: pd.Series) -> float:
    """The width of the time buckets: the usual gap between two (a minute with one)."""
    if len(times) < 2:
        return 60.0
    return float(np.median(np.diff(times.sort_values().astype("int64")))) / 1e9


def _bucket_label(times: pd.Series) -> str:
    seconds = _bucket_seconds(times)
    return format_duration(seconds) if len(times) >= 2 and seconds >= 1 else "bucket"


def resend_delays(
    delays: pd.DataFrame, window_s: float, *, title: str | None = None, scope: str = ANYWHERE
) -> go.Figure:
    """Histogram of each resend's delay after the previous send of its key, on a log scale,
    stacked by ``cause`` when the table has it, with the window drawn: sends left of the line
    are caught (measured from their anchor), those right of it reach consumers again."""
    values = delays["delay_s"].clip(lower=1e-3)
    low, high = (
        float(values.min()) if len(values) else 1.0,
        float(values.max()) if len(values) else 1.0,
    )
    low, high = min(low, window_s), max(high, window_s)
    edges = np.linspace(math.log10(low) - 0.05, math.log10(high) + 0.05, 61)
    groups = (
        sorted(
            delays.groupby("cause"), key=lambda g: _CAUSE_ORDER.get(str(g[0]), len(_CAUSE_ORDER))
        )
        if "cause" in delays
        else [("resends", delays)]
    )
    fig = go.Figure()
    for cause, group in groups:
        counts, _ = np.histogram(np.log10(group["delay_s"].clip(lower=1e-3)), bins=edges)
        centres = (edges[:-1] + edges[1:]) / 2
        labels = [
            f"{format_duration(10**a)} to {format_duration(10**b)}" for a, b in pairwise(edges)
        ]
        fig.add_trace(
            go.Bar(
                x=centres,
                y=counts,
                width=float(edges[1] - edges[0]),
                name=CAUSE_LABELS.get(str(cause), str(cause)),
                marker_color=CAUSE_COLOURS.get(str(cause)),
                customdata=labels,
                hovertemplate="%{customdata}<br>%{y:,} sends<extra>%{fullData.name}</extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title=title or "Delay of each resend after the previous send with the same key",
        yaxis_title="sends",
        **_LAYOUT,
        **_legend("cause" if "cause" in delays else "sends"),
    )
    if delays.empty:
        return _say_empty(fig, f"No resends {scope}: no send reused a key sent before")
    _log_duration_axis(fig, low, high, "delay after the previous send (log scale)")
    window_marker(fig, window_s)
    return fig


def _lines_per_entity(
    table: pd.DataFrame, column: str, unit: str, *, stacked: bool = False
) -> go.Figure:
    """One line of ``column`` over ``time`` per entity, stacked if asked."""
    fig = go.Figure()
    for entity, group in table.groupby("entity"):
        fig.add_trace(
            go.Scatter(
                x=group["time"],
                y=group[column],
                name=str(entity),
                mode="lines",
                stackgroup=column if stacked else None,
                hovertemplate=f"%{{x|%Y-%m-%d %H:%M}} UTC<br>%{{y:,}} {unit}<extra>"
                + str(entity)
                + "</extra>",
            )
        )
    return fig


def ids_held(
    table: pd.DataFrame, window_s: float, *, title: str | None = None, scope: str = ANYWHERE
) -> go.Figure:
    """Ids in the duplicate history over time, stacked per entity (``entity``, ``time``,
    ``held``), from :meth:`ReplayCache.held_over_time`: the throughput cost of the window."""
    fig = _lines_per_entity(table, "held", "ids held", stacked=True)
    fig.update_layout(
        title=title or f"Ids held in the duplicate history, window {format_duration(window_s)}",
        xaxis_title="time (UTC)",
        yaxis_title="ids held (count)",
        **_LAYOUT,
        **_legend("entity"),
    )
    if table.empty:
        return _say_empty(fig, f"No ids held {scope}: no accepted send with a MessageId")
    return fig


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
    fig.update_yaxes(title_text="%", row=1, col=1)
    fig.update_yaxes(title_text="messages" if lost == "messages_lost" else "sends", row=2, col=1)
    fig.update_yaxes(title_text="ids", row=3, col=1)
    low, high = float(sweep["window_s"].min()), float(sweep["window_s"].max())
    _log_duration_axis(fig, low, high, "duplicate detection window (log scale)", row=3, col=1)
    _log_duration_axis(fig, low, high, "", row=1, col=1)
    _log_duration_axis(fig, low, high, "", row=2, col=1)
    fig.update_layout(
        title=title or "What each window catches, loses and costs",
        height=750,
        **_LAYOUT,
        **_legend("share caught"),
    )
    return fig


def sends_per_entity(
    table: pd.DataFrame, *, title: str | None = None, scope: str = ANYWHERE
) -> go.Figure:
    """Sends per time bucket, one line per entity (``entity``, ``time``, ``sends``), from
    :func:`dedup_lib.analysis.summaries.sends_over_time`."""
    step = _bucket_label(table["time"].drop_duplicates()) if len(table) else "bucket"
    fig = _lines_per_entity(table, "sends", "sends")
    fig.update_layout(
        title=title or "Sends over time, per entity",
        xaxis_title="time (UTC)",
        yaxis_title=f"sends per {step}",
        **_LAYOUT,
        **_legend("entity"),
    )
    return _say_empty(fig, f"No sends {scope}") if table.empty else fig


_EMBEDDED = {"plotly.js": False}


def show(fig: go.Figure, *, embed: bool = False) -> None:
    """Display a figure in a notebook. ``embed=True`` writes it as HTML with plotly.js inlined
    once per kernel, so a notebook converted to HTML shows its charts offline (reports)."""
    from IPython.display import HTML, display

    if not embed:
        fig.show()
        return
    include = not _EMBEDDED["plotly.js"]
    _EMBEDDED["plotly.js"] = True
    display(HTML(fig.to_html(include_plotlyjs=include, full_html=False)))  # type: ignore[no-untyped-call]
