"""Chart builders: traces, titles, axis titles with units, the window marker."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from dedup_lib.workbench import charts

TIMES = pd.date_range("2026-11-02", periods=4, freq="1min", tz="UTC")


def _titles(fig):
    return fig.layout.title.text, fig.layout.xaxis.title.text, fig.layout.yaxis.title.text


def _window_lines(fig):
    return [s for s in fig.layout.shapes if s.type == "line" and s.line.dash == "dash"]


def test_sends_over_time_sums_entities_and_labels_its_unit():
    table = pd.DataFrame(
        {
            "entity": ["a"] * 4 + ["b"] * 4,
            "time": list(TIMES) * 2,
            "sends": [1, 2, 3, 4, 10, 10, 10, 10],
            "duplicates": [0, 1, 0, 2, 0, 0, 5, 0],
            "rejected": 0,
        }
    )
    fig = charts.sends_over_time(table)
    sends, dropped = fig.data
    assert list(sends.y) == [11, 12, 13, 14]
    # a step per bucket, the last one closed at its end (with no hover there)
    assert list(dropped.y) == [0, 1, 5, 2, 2]
    assert (dropped.line.shape, dropped.fill) == ("hv", "tozeroy")
    assert pd.Timestamp(dropped.x[-1]) - pd.Timestamp(dropped.x[-2]) == pd.Timedelta("1min")
    assert list(dropped.hoverinfo) == ["all"] * 4 + ["skip"]
    # duplicates in a panel of their own, on their own labelled axis
    assert (sends.yaxis, dropped.yaxis) == ("y", "y2")
    assert fig.layout.title.text
    assert fig.layout.xaxis.title.text == "time (UTC)"
    assert fig.layout.xaxis.anchor == "y2"  # under the bottom panel
    assert fig.layout.yaxis.title.text == "sends/1m"
    assert fig.layout.yaxis2.title.text == "dropped/1m"
    assert "UTC" in sends.hovertemplate


def test_figures_look_plotly_white_with_a_template_only_as_large_as_they_use():
    """Copying plotly_white whole into each figure took a third of the explorer's redraw in
    the kernel; its layout and bar and scatter defaults are all the charts use."""
    import plotly.io as pio

    white = pio.templates["plotly_white"]
    fig = charts.sends_over_time(pd.DataFrame({"time": TIMES, "sends": 1, "duplicates": 0}))
    template = fig.layout.template

    assert template.layout.plot_bgcolor == white.layout.plot_bgcolor == "white"
    assert template.layout.xaxis.update(ticklabeloverflow=None) == white.layout.xaxis
    assert template.layout.colorway == white.layout.colorway
    assert template.data.bar == white.data.bar
    assert template.data.scatter == white.data.scatter
    assert not template.data.heatmap
    assert not template.layout.polar.to_plotly_json()
    assert {type(trace).__name__ for trace in fig.data} <= {"Bar", "Scatter"}


def test_tick_labels_are_drawn_not_measured_to_be_hidden():
    """plotly.js measures every tick label on every redraw to hide those past the chart's
    edge, unless told to allow them: that measuring was a sixth of the explorer's redraw."""
    fig = charts.ids_held(pd.DataFrame({"entity": "q", "time": TIMES, "held": 1}), 60)
    template = fig.layout.template.layout
    assert template.xaxis.ticklabeloverflow == template.yaxis.ticklabeloverflow == "allow"
    assert fig.layout.xaxis.type == "date"


def test_sends_over_time_says_when_nothing_was_dropped():
    table = pd.DataFrame({"time": TIMES, "sends": [1, 2, 3, 4], "duplicates": 0})
    fig = charts.sends_over_time(table, scope="on audit")
    assert [a.text for a in fig.layout.annotations] == ["no duplicates dropped on audit"]
    assert tuple(fig.layout.yaxis2.range) == (0, 1)


def test_resend_delays_bins_on_a_log_scale_by_cause_and_marks_the_window():
    delays = pd.DataFrame(
        {
            "delay_s": [0.8, 1.6, 120.0, 7200.0, 7300.0],
            "cause": ["ack_lost_retry", "ack_lost_retry", "restart_resend", "replay", "replay"],
        }
    )
    fig = charts.resend_delays(delays, 600.0)
    assert [t.name for t in fig.data] == [
        charts.CAUSE_LABELS[c] for c in ("ack_lost_retry", "restart_resend", "replay")
    ]
    assert [int(sum(t.y)) for t in fig.data] == [2, 1, 2]
    assert fig.layout.barmode == "stack"
    _title, x, y = _titles(fig)
    assert "log scale" in x
    assert y == "sends"
    assert "10 min" in fig.layout.xaxis.ticktext
    (line,) = _window_lines(fig)
    assert line.x0 == pytest.approx(math.log10(600))
    assert any("window 10m" in a.text for a in fig.layout.annotations)
    assert fig.layout.legend.title.text == "cause"
    assert fig.layout.legend.orientation == "v"  # right of the plot, off the axis title


def test_ids_held_stacks_entities():
    table = pd.DataFrame(
        {"entity": ["a", "a", "b", "b"], "time": list(TIMES[:2]) * 2, "held": [1, 2, 3, 4]}
    )
    fig = charts.ids_held(table, 60.0)
    assert [t.name for t in fig.data] == ["a", "b"]
    assert all(t.stackgroup == "held" for t in fig.data)
    title, _x, y = _titles(fig)
    assert "window 1m" in title
    assert y == "ids held (count)"


def test_window_sweep_has_three_panels_the_target_and_the_chosen_window():
    sweep = pd.DataFrame(
        {
            "window_s": [20.0, 600.0, 86400.0],
            "share_resends_caught": [0.5, 0.8, 0.9],
            "share_catchable_caught": [0.6, 0.95, 1.0],
            "messages_lost": [10, 20, 30],
            "peak_held": [5, 50, 500],
        }
    )
    fig = charts.window_sweep(sweep, target=0.99, chosen_s=600.0)
    assert len(fig.data) == 5
    assert list(fig.data[-1].y) == [99.0, 99.0]
    assert fig.data[-1].name == "target 99 %"  # in the legend, off the curves
    assert list(fig.data[0].y) == [60.0, 95.0, 100.0]
    assert len(_window_lines(fig)) == 3
    # the window is named once, inside the bottom panel, never above a panel (its title)
    (label,) = [a for a in fig.layout.annotations if a.text.startswith("window")]
    assert label.text == "window 10m"
    assert (label.yref, label.y, label.yanchor) == ("y3 domain", 1, "top")
    assert fig.layout.xaxis3.title.text.startswith("duplicate detection window")
    assert fig.layout.yaxis.title.text == "%"
    assert fig.layout.title.text


def test_counts_over_time_stacks_one_trace_per_group_summed_over_entities():
    table = pd.DataFrame(
        {
            "time": [TIMES[0], TIMES[0], TIMES[1], TIMES[2]],
            "entity": ["a", "b", "a", "a"],
            "miss_cause": ["new MessageId", "new MessageId", "after the window", "new MessageId"],
            "sends": [2, 3, 1, 4],
        }
    )
    fig = charts.counts_over_time(table, "miss_cause", title="Missed resends", what="resends")
    assert [t.name for t in fig.data] == ["after the window", "new MessageId"]
    late, fresh = fig.data
    assert list(late.y) == [1]
    assert list(fresh.y) == [5, 4]
    assert fig.layout.barmode == "stack"
    assert _titles(fig) == ("Missed resends", "time (UTC)", "resends per 1m")
    # the hover names the group through the trace's name, never with data in its template
    assert "%{fullData.name}" in fresh.hovertemplate
    assert (fresh.meta, fresh.name) == ("resends", "new MessageId")
    assert fig.layout.legend.title.text == "miss cause"


def test_one_category_is_still_named_in_the_legend():
    table = pd.DataFrame(
        {"time": TIMES[:2], "entity": "a", "miss_cause": "after the window", "sends": [1, 2]}
    )
    fig = charts.counts_over_time(table, "miss_cause", title="Missed", what="resends")
    assert fig.layout.showlegend is True
    assert [t.name for t in fig.data] == ["after the window"]


EMPTY = {
    "over_time": pd.DataFrame({"entity": [], "time": [], "sends": [], "duplicates": []}),
    "delays": pd.DataFrame({"entity": [], "time": [], "delay_s": [], "cause": []}),
    "held": pd.DataFrame({"entity": [], "time": [], "held": []}),
    "counts": pd.DataFrame({"time": [], "entity": [], "miss_cause": [], "sends": []}),
}


@pytest.mark.parametrize(
    ("draw", "words"),
    [
        (lambda s: charts.sends_over_time(EMPTY["over_time"], scope=s), "No sends"),
        (lambda s: charts.resend_delays(EMPTY["delays"], 600.0, scope=s), "No resends"),
        (lambda s: charts.ids_held(EMPTY["held"], 600.0, scope=s), "No ids held"),
        (
            lambda s: charts.counts_over_time(
                EMPTY["counts"], "miss_cause", title="t", what="resends", scope=s
            ),
            "No resends",
        ),
        (lambda s: charts.sends_per_entity(EMPTY["over_time"], scope=s), "No sends"),
    ],
    ids=["sends_over_time", "resend_delays", "ids_held", "counts_over_time", "sends_per_entity"],
)
def test_an_empty_selection_is_said_in_words_with_its_axes_hidden(draw, words):
    scope = "on audit between 2026-11-02 00:00 and 2026-11-03 00:00 UTC"
    fig = draw(scope)
    (note,) = fig.layout.annotations
    assert note.text.startswith(f"{words} {scope}")
    axes = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]
    assert axes
    assert all(axis.visible is False for axis in axes)
    assert charts.ANYWHERE in draw(charts.ANYWHERE).layout.annotations[0].text


def _texts(value, key=""):
    """Every (key, text) of a figure's JSON."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _texts(v, k)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _texts(v, key)


def _hostile_figures():
    from hostile_kit import BREAKOUT, IMG, LINK, LONG, RTL, SCRIPT, SVG

    names = [SCRIPT, IMG, SVG, LINK, BREAKOUT, RTL, LONG]
    times = [t for t in TIMES for _ in names]
    per_entity = pd.DataFrame(
        {"entity": names * len(TIMES), "time": times, "sends": 1, "held": 2, "duplicates": 1}
    )
    by = pd.DataFrame({"time": times, "id_pattern": names * len(TIMES), "sends": 1})
    delays = pd.DataFrame({"delay_s": [1.0] * len(names), "cause": names})
    scope = f"on {SCRIPT} between {IMG} and {LINK}"
    title = f"Sends of {SVG}, {BREAKOUT}"
    return names, [
        charts.sends_over_time(per_entity, title=title, scope=scope),
        charts.sends_over_time(per_entity.iloc[:0], title=title, scope=scope),
        charts.counts_over_time(by, "id_pattern", title=title, scope=scope),
        charts.resend_delays(delays, 60, title=title, scope=scope),
        charts.resend_delays(delays.iloc[:0], 60, title=title, scope=scope),
        charts.ids_held(per_entity, 60, title=title, scope=scope),
        charts.sends_per_entity(per_entity, title=title, scope=scope),
    ]


def test_texts_from_the_data_are_never_plotly_markup():
    from dedup_lib.text import SHORT, shown

    names, figures = _hostile_figures()
    for fig in figures:
        texts = list(_texts(fig.to_plotly_json()))
        for key, text in texts:
            if key in charts.TEMPLATES:
                # templates are markup, so they never hold data: it comes from name or meta
                assert not re.search("pwn|\u202e", text), (key, text)
            else:
                # plotly's line break is the one tag a text may hold: the module wrote it
                plain = text.replace("<br>", " ")
                assert not re.search("[<>\u202e]|L{1000}", plain), (key, text[:200])
        said = " ".join(t for _, t in texts)
        assert "&lt;" in said
        assert "data-pwn" in said
    legends = [t.name for t in figures[2].data]
    assert sorted(legends) == sorted(shown(n, SHORT).replace("&", "&amp;").replace("<", "&lt;")
                                     .replace(">", "&gt;") for n in names)  # fmt: skip
