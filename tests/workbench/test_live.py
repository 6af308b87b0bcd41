"""LiveCharts: several plotly charts in one widget, brought to new figures' state in place."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dedup_lib.workbench.live import LiveCharts


def _sent(widget: LiveCharts) -> list[list[dict]]:
    """Records each new value of ``figures`` the widget sends to the browser."""
    sent: list[list[dict]] = []
    widget.observe(lambda change: sent.append(change["new"]), "figures")
    return sent


def _chart(title: str, y: list[int]) -> go.Figure:
    return go.Figure(
        [go.Bar(x=["a", "b"], y=y, name="sends"), go.Scatter(x=[1, 2], y=[2, 1], name="held")],
        layout={"title": {"text": title}},
    )


def test_the_browser_gets_the_figures_as_plotly_js_reads_them():
    figures = [_chart("one", [1, 2]), _chart("two", [3, 4])]
    widget = LiveCharts(figures)
    assert widget.shown == [json.loads(f.to_json()) for f in figures]
    assert [f["layout"]["title"]["text"] for f in widget.shown] == ["one", "two"]
    assert widget.shown[0]["data"][0]["type"] == "bar"


def test_only_the_changed_chart_gets_a_new_revision_in_one_message():
    widget = LiveCharts([_chart("one", [1, 2]), _chart("two", [3, 4])])
    before = [f["revision"] for f in widget.figures]
    sent = _sent(widget)
    widget.show([_chart("one", [1, 2]), _chart("two, later", [5, 6])])
    assert len(sent) == 1
    after = [f["revision"] for f in sent[0]]
    assert after[0] == before[0]
    assert after[1] != before[1]
    assert widget.shown[1]["layout"]["title"]["text"] == "two, later"


def test_unchanged_figures_send_nothing():
    widget = LiveCharts([_chart("one", [1, 2])])
    sent = _sent(widget)
    widget.show([_chart("one", [1, 2])])
    assert sent == []


def test_charts_can_be_added_and_removed():
    widget = LiveCharts([_chart("one", [1, 2])])
    widget.show([_chart("one", [1, 2]), _chart("two", [3, 4])])
    assert [f["layout"]["title"]["text"] for f in widget.shown] == ["one", "two"]
    widget.show([])
    assert widget.shown == []


def test_dates_and_64_bit_numbers_reach_the_browser_as_plotly_js_reads_them():
    times = pd.date_range("2026-11-02", periods=3, freq="min").to_numpy()
    figure = go.Figure([go.Scatter(x=times, y=np.array([4, 5, 6], dtype="int64"))])
    trace = LiveCharts([figure]).shown[0]["data"][0]
    assert str(trace["x"][0]).startswith("2026-11-02")
    y = trace["y"]
    assert list(np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])) == [4, 5, 6]


def test_plotly_js_is_shipped_once_from_the_installed_package():
    one, two = LiveCharts(), LiveCharts()
    assert one._esm is two._esm
    assert "plotly.js v" in one._esm[:2000]
    assert one._esm.rstrip().endswith("export default { render };")
    assert "Plotly.react" in one._esm
