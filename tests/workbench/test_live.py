"""sync: a FigureWidget brought to a new figure's state in place, in one update message."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from dedup_lib.workbench.live import live, sync


def _messages(widget: go.FigureWidget) -> list[tuple[str, dict]]:
    """Records what the widget sends to the browser (the ``_py2js_*`` traits it sets)."""
    sent: list[tuple[str, dict]] = []
    names = [n for n in widget.trait_names() if n.startswith("_py2js_")]
    widget.observe(lambda c: c["new"] is not None and sent.append((c["name"], c["new"])), names)
    return sent


def _without_uid(widget: go.FigureWidget) -> list[dict]:
    """The widget's traces as a figure's (no uid; an emptied container is an unset one)."""
    return [
        {k: v for k, v in t.items() if k != "uid" and v != {}} for t in widget.to_dict()["data"]
    ]


def _first() -> go.Figure:
    return go.Figure(
        [
            go.Bar(x=["a", "b"], y=[3, 4], name="sends", marker={"color": "red"}),
            go.Scatter(x=[1, 2], y=[2, 1], name="held"),
        ],
        layout={
            "title": {"text": "window 10m"},
            "shapes": [{"type": "line", "x0": 1, "x1": 1, "y0": 0, "y1": 1}],
            "annotations": [{"text": "10m", "x": 1, "y": 1}],
        },
    )


def test_same_traces_are_restyled_in_place_in_one_message():
    widget = live(_first())
    traces = list(widget.data)
    sent = _messages(widget)
    new = go.Figure(
        [go.Bar(x=["a", "b"], y=[5, 6], name="sends"), go.Scatter(x=[1, 2], y=[7, 8], name="held")],
        layout={"title": {"text": "window 1h"}, "annotations": [{"text": "1h", "x": 2, "y": 1}]},
    )
    sync(widget, new)
    assert [name for name, _ in sent] == ["_py2js_update"]
    assert all(a is b for a, b in zip(widget.data, traces, strict=True))
    assert _without_uid(widget) == new.to_dict()["data"]
    assert widget.data[0].marker.color is None
    assert widget.layout.title.text == "window 1h"
    assert widget.layout.shapes == ()
    assert [a.text for a in widget.layout.annotations] == ["1h"]


def test_an_unchanged_figure_sends_nothing():
    widget = live(_first())
    sent = _messages(widget)
    sync(widget, _first())
    assert sent == []


@pytest.mark.parametrize(
    ("traces", "messages"),
    [
        (
            [go.Bar(y=[1]), go.Scatter(y=[2]), go.Scatter(y=[3])],
            ["_py2js_update", "_py2js_addTraces"],
        ),
        ([go.Bar(y=[1])], ["_py2js_deleteTraces", "_py2js_update"]),
        (
            [go.Bar(y=[1]), go.Bar(y=[2])],
            ["_py2js_deleteTraces", "_py2js_update", "_py2js_addTraces"],
        ),
        ([], ["_py2js_deleteTraces", "_py2js_update"]),
    ],
    ids=["one more", "one fewer", "another type", "none"],
)
def test_traces_added_removed_or_of_another_type(traces, messages):
    widget = live(_first())
    sent = _messages(widget)
    new = go.Figure(traces, layout={"title": {"text": "other"}})
    sync(widget, new)
    assert [name for name, _ in sent] == messages
    assert _without_uid(widget) == new.to_dict()["data"]
    assert widget.layout.title.text == "other"


def test_dates_and_64_bit_numbers_reach_the_browser_as_plotly_js_reads_them():
    import base64

    import numpy as np
    import pandas as pd

    times = pd.date_range("2026-11-02", periods=3, freq="min").to_numpy()
    figure = go.Figure([go.Scatter(x=times, y=np.array([1, 2, 3], dtype="int64"))])
    widget = live(figure)
    assert str(widget.data[0].x[0]).startswith("2026-11-02")
    later = go.Figure([go.Scatter(x=times, y=np.array([4, 5, 6], dtype="int64"))])
    sync(widget, later)
    y = widget.data[0].y
    assert list(np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])) == [4, 5, 6]
    assert str(widget.data[0].x[2]).startswith("2026-11-02")


def test_a_live_chart_follows_its_container_width():
    widget = live(_first())
    assert widget._config["responsive"] is True
    assert widget.layout.width is None
