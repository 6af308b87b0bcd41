"""Chart builders: traces, titles, axis titles with units, the window marker."""

from __future__ import annotations

import math

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
    assert list(dropped.y) == [0, 1, 5, 2]
    title, x, y = _titles(fig)
    assert title
    assert x == "time (UTC)"
    assert y == "sends per 1m"
    assert "UTC" in sends.hovertemplate


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
    assert len(fig.data) == 4
    assert list(fig.data[0].y) == [60.0, 95.0, 100.0]
    assert len(_window_lines(fig)) == 3
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
    assert "new MessageId" in fresh.hovertemplate
