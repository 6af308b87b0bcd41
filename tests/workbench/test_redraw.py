"""RedrawnCharts: several plotly charts in one widget, brought to new figures' state in place."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from dedup_lib.workbench import charts
from dedup_lib.workbench.redraw import RedrawnCharts, to_plotly_json


def _sent(widget: RedrawnCharts) -> list[list[dict]]:
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
    widget = RedrawnCharts(figures)
    assert widget.shown == [json.loads(f.to_json()) for f in figures]
    assert [f["layout"]["title"]["text"] for f in widget.shown] == ["one", "two"]
    assert widget.shown[0]["data"][0]["type"] == "bar"


def test_only_the_changed_chart_gets_a_new_revision_in_one_message():
    widget = RedrawnCharts([_chart("one", [1, 2]), _chart("two", [3, 4])])
    before = [f["revision"] for f in widget.figures]
    sent = _sent(widget)
    widget.show([_chart("one", [1, 2]), _chart("two, later", [5, 6])])
    assert len(sent) == 1
    after = [f["revision"] for f in sent[0]]
    assert after[0] == before[0]
    assert after[1] != before[1]
    assert widget.shown[1]["layout"]["title"]["text"] == "two, later"


def test_a_trace_keeps_its_key_while_its_content_does_not_change():
    """The browser gives plotly the trace object it already has where the key is the same,
    so plotly recomputes only what changed."""
    widget = RedrawnCharts([_chart("one", [1, 2])])
    (before,) = widget.figures
    widget.show([_chart("one, later", [1, 2])])
    (same,) = widget.figures
    assert same["revision"] != before["revision"]
    assert same["keys"] == before["keys"]
    widget.show([_chart("one, later", [3, 4])])
    (changed,) = widget.figures
    assert changed["keys"][0] != same["keys"][0]
    assert changed["keys"][1] == same["keys"][1]
    assert len(set(changed["keys"])) == 2
    assert "keys" not in widget.shown[0]


def test_unchanged_figures_send_nothing():
    widget = RedrawnCharts([_chart("one", [1, 2])])
    sent = _sent(widget)
    widget.show([_chart("one", [1, 2])])
    assert sent == []


def test_charts_can_be_added_and_removed():
    widget = RedrawnCharts([_chart("one", [1, 2])])
    widget.show([_chart("one", [1, 2]), _chart("two", [3, 4])])
    assert [f["layout"]["title"]["text"] for f in widget.shown] == ["one", "two"]
    widget.show([])
    assert widget.shown == []


def test_dates_and_64_bit_numbers_reach_the_browser_as_plotly_js_reads_them():
    times = pd.date_range("2026-11-02", periods=3, freq="min").to_numpy()
    figure = go.Figure([go.Scatter(x=times, y=np.array([4, 5, 6], dtype="int64"))])
    trace = RedrawnCharts([figure]).shown[0]["data"][0]
    assert str(trace["x"][0]).startswith("2026-11-02")
    y = trace["y"]
    assert list(np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])) == [4, 5, 6]


def test_plotly_js_comes_from_the_installed_package_beside_a_small_module():
    """anywidget gives a widget's module 2 s to load before it fails the model: the module
    is the rendering code alone, and plotly.js (the same text for every instance) rides in a
    trait that the module evaluates once per page."""
    one, two = RedrawnCharts(), RedrawnCharts()
    assert one._plotly is two._plotly
    assert "plotly.js v" in one._plotly[:2000]
    assert len(one._esm) < 20_000
    assert one._esm.rstrip().endswith("export default { render };")
    assert "Plotly.react" in one._esm
    assert "_plotly" in one.keys  # synced to the browser


def _tables(tz: str | None) -> dict[str, pd.DataFrame]:
    times = pd.date_range("2026-11-02", periods=6, freq="min", tz=tz)
    entities = ["orders"] * 3 + ["audit"] * 3
    return {
        "over": pd.DataFrame(
            {"entity": entities, "time": times, "sends": np.arange(6) * 1_000_000_000,
             "duplicates": [0, 1, 0, 2, 0, 0], "rejected": 0}
        ),
        "delays": pd.DataFrame(
            {"entity": entities, "time": times, "delay_s": [0.5, 3.0, 60.0, 900.0, 4e4, 1e-4],
             "cause": ["ack_lost_retry", "replay", "first", "other", "replay", "first"]}
        ),
        "held": pd.DataFrame({"entity": entities, "time": times, "held": [1, 2, 3, 4, 5, 6]}),
    }  # fmt: skip


def _decoded(array):
    if isinstance(array, dict):
        return list(np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]))
    return array


def _times_in_ms(figure: dict) -> dict:
    """``figure`` with each trace's ``x`` as milliseconds since the epoch, however written:
    plotly writes times as ISO text, the explorer as numbers."""
    for trace in figure["data"]:
        x = _decoded(trace.get("x"))
        if x and isinstance(x[0], str) and "T" in x[0]:
            x = list(pd.to_datetime(x).as_unit("ms").asi8.astype(float))
        trace["x"] = x
    return figure


@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Paris"])
@pytest.mark.parametrize("rows", [slice(None), slice(0, 0), slice(3, None)])
def test_a_spec_reaches_the_browser_as_its_validated_figure_would(tz, rows):
    """The explorer's charts are built as plain dicts and skip plotly's validation: what the
    browser gets must be what the same chart as a validated ``go.Figure`` gives it, times
    as numbers on a date axis instead of text."""
    tables = {name: table.iloc[rows] for name, table in _tables(tz).items()}
    specs = [
        charts.sends_over_time_spec(tables["over"], title="sends"),
        charts.resend_delays_spec(tables["delays"], 600.0),
        charts.ids_held_spec(tables["held"], 600.0),
    ]
    for spec in specs:
        assert _times_in_ms(to_plotly_json(spec)) == _times_in_ms(
            to_plotly_json(charts.figure(spec))
        )
        json.dumps(to_plotly_json(spec), allow_nan=False)
    # times as UTC wall clock, whatever their zone
    first = tables["over"]["time"].head(1)
    if tz is not None:
        first = first.dt.tz_convert("UTC").dt.tz_localize(None)
    x = _decoded(to_plotly_json(specs[0])["data"][0]["x"])
    assert x[:1] == list(first.astype("datetime64[ms]").astype("int64").astype(float))


def test_a_spec_sent_to_the_browser_has_its_texts_escaped():
    spec = {"data": [{"type": "bar", "name": "<img src=x onerror=alert(1)>", "y": [1]}],
            "layout": {"title": {"text": "orders <b>"}}}  # fmt: skip
    sent = to_plotly_json(spec)
    assert sent["data"][0]["name"] == "&lt;img src=x onerror=alert(1)&gt;"
    assert sent["layout"]["title"]["text"] == "orders &lt;b&gt;"
