"""Charts that redraw in place: a plotly ``FigureWidget`` made once and brought to the state
of a freshly built ``go.Figure`` on every change.

Rebuilding a figure in an ``Output`` widget makes the browser tear down and re-create the
plot (most of a second per chart); :func:`sync` instead sends the differences as one
``Plotly.update`` message (plus ``deleteTraces``/``addTraces`` when the number or types of
traces change), which plotly.js applies to the plot already on the page. Plotly skips
properties whose value did not change, so an unchanged template or axis costs nothing."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
from plotly.utils import PlotlyJSONEncoder

_KEEP = frozenset({"type", "uid"})


def live(figure: go.Figure) -> go.FigureWidget:
    """A ``FigureWidget`` showing ``figure``, for :func:`sync` to update later. It is
    responsive: plotly.js sizes it to its container, not to its 700-pixel default, and
    again when the window is resized."""
    widget = go.FigureWidget(_plain(figure))
    widget._config = {**widget._config, "responsive": True}
    return widget


def _plain(figure: go.Figure) -> dict[str, Any]:
    """``figure`` as plotly.js reads it: dates as ISO text, numbers as typed-array specs. The
    widget's own serializer sends datetime64 arrays as integers and drops int64 arrays, which
    leaves the browser an empty plot."""
    plain: dict[str, Any] = json.loads(figure.to_json())
    return plain


def sync(widget: go.FigureWidget, figure: go.Figure) -> None:
    """Make ``widget`` show ``figure``: traces of the same type at the same index are
    restyled in place, extra ones removed, missing ones added; the layout (axes, shapes,
    annotations, title) is replaced. The restyles and the relayout go in one batch."""
    plain = _plain(figure)
    new = plain.get("data", [])
    keep = 0
    while keep < min(len(widget.data), len(new)) and widget.data[keep].type == new[keep]["type"]:
        keep += 1
    if len(widget.data) > keep:
        widget.data = widget.data[:keep]
    with widget.batch_update():
        for old, trace in zip(widget.data, new[:keep], strict=True):
            _replace(old, trace)
        _replace(widget.layout, plain.get("layout", {}), only_changed=True)
    if len(new) > keep:
        widget.add_traces(new[keep:])


def _replace(target: Any, props: dict[str, Any], *, only_changed: bool = False) -> None:
    """Give ``target`` (a trace or the layout) exactly ``props``: properties it has and
    ``props`` lacks are unset, the others overwritten whole (no merge with the old value).
    ``only_changed`` first compares each property as plotly.js reads it and leaves equal ones
    alone: validating the layout's template again costs more than the rest of a redraw."""
    current = target.to_plotly_json()
    for name in list(current):
        if name not in props and name not in _KEEP:
            target[name] = None
    if only_changed:
        current = json.loads(json.dumps(current, cls=PlotlyJSONEncoder))
    changed = {
        k: v
        for k, v in props.items()
        if k not in _KEEP and not (only_changed and current.get(k) == v)
    }
    target.update(changed, overwrite=True)
