"""Figures in the house style, as plotly.js reads them, with every text made safe.

A :data:`Spec` is a figure as plain dicts (what the explorer redraws from, without plotly's
validation); :func:`figure` makes it a ``go.Figure``, :func:`show` displays one. Every text of
a figure is plain text, never markup: titles, legend entries, annotations and hover values
(entity names, MessageIds, causes) are escaped (:func:`safe`) when a figure is made
(:func:`figure`) or sent to the browser (:mod:`dedup_lib.workbench.redraw`). Only the hover
templates are read as plotly's markup, and they never hold data: the data they show comes
from the trace's name, ``meta`` or ``customdata``.
"""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from dedup_lib.text import escape
from dedup_lib.workbench import csp

__all__ = [
    "ANYWHERE",
    "TEMPLATES",
    "Spec",
    "axis_title",
    "figure",
    "house_layout",
    "safe",
    "say_empty",
    "show",
]


def _white() -> dict[str, Any]:
    """``plotly_white`` as far as bar and scatter charts use it (its layout: colours, axes,
    fonts; its bar and scatter defaults), with tick labels never hidden. The whole template
    made each figure larger and slower to build and to draw."""
    white = pio.templates["plotly_white"]
    used = (
        "autotypenumbers", "colorway", "font", "hovermode", "hoverlabel", "paper_bgcolor",
        "plot_bgcolor", "xaxis", "yaxis", "shapedefaults", "annotationdefaults", "title",
    )  # fmt: skip
    template = go.layout.Template(
        layout={name: white.layout[name] for name in used},
        data={"bar": white.data.bar, "scatter": white.data.scatter},
    )
    # Tick labels past the chart's edge are drawn, not measured one by one to be hidden: the
    # measuring was a sixth of a redraw, and the margins leave room for the labels.
    for axis in (template.layout.xaxis, template.layout.yaxis):
        axis.ticklabeloverflow = "allow"
    plain: dict[str, Any] = template.to_plotly_json()
    return plain


#: A figure as plotly.js reads it: ``data`` (traces) and ``layout``, built from dicts, lists
#: and numbers, with numeric columns and times (``datetime64``) as numpy arrays. The explorer's
#: charts are built this way, not as ``go.Figure``: on every control change plotly's
#: validation of three figures costs more than the rest of the change.
Spec = dict[str, Any]

_LAYOUT: dict[str, Any] = {"template": _white(), "hovermode": "closest", "showlegend": True}
#: Where a table was narrowed to, when the caller does not say.
ANYWHERE = "in this selection"


#: The keys whose texts plotly.js reads as templates (``%{y}``, ``<br>``): written by the
#: chart builders, never holding data, so never escaped.
TEMPLATES = frozenset({"hovertemplate", "texttemplate"})


def safe(value: Any) -> Any:
    r"""``value`` (a :data:`Spec`, or any part of one) with every text but the templates
    escaped for plotly (:func:`dedup_lib.text.escape`): markup from the data shows as its
    characters. A line break (``\n``) is plotly's ``<br>``; one in the data is shown as an
    escape (``\x0a``) before it gets here. Not cut: the chart builders cut a long value from
    the data where they name a trace with it (:func:`dedup_lib.text.shown`, to
    :data:`~dedup_lib.text.SHORT`), and the callers where they put one in a title. A new copy;
    numeric arrays are shared, not copied."""
    if isinstance(value, str):
        return "<br>".join(escape(line, "plotly", limit=None) for line in value.split("\n"))
    if isinstance(value, dict):
        return {k: v if k in TEMPLATES else safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype.kind in "OUS":
        return np.array([safe(v) for v in value.tolist()], dtype=object)
    return value


def figure(spec: Spec | go.Figure) -> go.Figure:
    """``spec`` as a ``go.Figure`` (validated), its texts escaped (:func:`safe`): what a
    notebook shows, exports or edits."""
    if isinstance(spec, go.Figure):
        # Per part: the whole figure's JSON has its arrays as base64 text, these keep numpy's.
        spec = {
            "data": [t.to_plotly_json() for t in spec.data],
            "layout": spec.layout.to_plotly_json(),
        }
    return go.Figure(safe(spec))


def house_layout(title: str, legend: str, **more: Any) -> dict[str, Any]:
    """A layout with the house template, ``title`` and a vertical legend right of the plot
    titled ``legend`` (what its colours stand for)."""
    return {
        **_LAYOUT,
        "title": {"text": title},
        "legend": {"title": {"text": legend}, "orientation": "v", "x": 1.02, "y": 1},
        **more,
    }


def axis_title(text: str) -> dict[str, Any]:
    """An axis's title, as a layout's axis takes it."""
    return {"title": {"text": text}}


def say_empty(spec: Spec, message: str) -> Spec:
    """``spec`` with every axis hidden and ``message`` in its middle: an empty table drawn as
    words, never as empty axes with made-up ranges."""
    layout = spec["layout"]
    for name in {"xaxis", "yaxis", *(n for n in layout if n.startswith(("xaxis", "yaxis")))}:
        layout[name] = {**layout.get(name, {}), "visible": False}
    layout["showlegend"] = False
    layout.setdefault("annotations", []).append(
        {"text": textwrap.fill(message, 72), "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper",
         "showarrow": False, "font": {"size": 16}}
    )  # fmt: skip
    return spec


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
    html = fig.to_html(include_plotlyjs=include, full_html=False)
    # The scripts written here, by hash: the report's Content-Security-Policy runs these only.
    scripts = {"dedup_lib": {csp.META: csp.script_hashes(html)}}
    display(HTML(html), metadata=scripts)  # type: ignore[no-untyped-call]
