"""styled(): the one table style of the notebooks, and widget_html(), the same table for an
HTML widget (pandas only, no Spark)."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest

from dedup_lib import styled
from dedup_lib.workbench.style import is_duration, widget_html


def _cells(table: pd.DataFrame) -> list[list[str]]:
    """The table as displayed: header row, then one list of texts per row."""
    text = styled(table).to_string(delimiter="|")
    return [line.split("|") for line in text.splitlines()]


def test_counts_get_thousands_separators():
    table = pd.DataFrame({"entity": ["orders", "(all)"], "sends": [71975, 199839]})
    assert _cells(table) == [["entity", "sends"], ["orders", "71,975"], ["(all)", "199,839"]]


def test_share_columns_are_percentages():
    table = pd.DataFrame(
        {"share_caught": [0.168613, 1.0, np.nan], "share_guid_like": [0, 0.0557, 1]}
    )
    assert _cells(table)[1:] == [["16.9%", "0.0%"], ["100.0%", "5.6%"], ["—", "100.0%"]]


def test_seconds_columns_are_durations_without_float_noise():
    table = pd.DataFrame(
        {
            "window_s": [20.0, 600.0, 48342.0, 0.25],
            "longest_caught_from": [42640.974301, np.nan, 86400.0, 3.4],
            "delay": [59.9999, 7200.0, 90.0, 0.0],
        }
    )
    assert _cells(table)[1:] == [
        ["20s", "11h50m41s", "1m"],
        ["10m", "—", "2h"],
        ["13h25m42s", "1d", "1m30s"],
        ["250ms", "3.4s", "0s"],
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("window_s", True),
        ("delay_s", True),
        ("delay", True),
        ("median_delay", True),
        ("caught_from", True),
        ("longest_caught_from", True),
        ("sends", False),
        ("share_caught", False),
        ("messages", False),
    ],
)
def test_duration_columns_are_told_by_name(name, expected):
    assert is_duration(name) is expected


def test_other_columns_whole_floats_times_and_text():
    table = pd.DataFrame(
        {
            "message_id": ["00000000-0000-0000-0000-000000000000", "stock/140"],
            "resends": [77.0, np.nan],  # a count that became float through a missing value
            "sends_per_id": [60.01, 1.0816],
            "first": pd.to_datetime(["2026-11-02 07:39:36.467509", "2026-11-02 23:59:38.18"]),
            "value": ["199,839", "6.55%"],  # already text: left as it is
        }
    )
    assert _cells(table)[1:] == [
        ["00000000-0000-0000-0000-000000000000", "77", "60.01", "2026-11-02 07:39:36", "199,839"],
        ["stock/140", "—", "1.08", "2026-11-02 23:59:38", "6.55%"],
    ]


def test_index_is_hidden_and_the_table_untouched():
    table = pd.DataFrame({"sends": [1234]}, index=["should-not-show"])
    before = table.copy()
    html = styled(table).to_html()
    assert "should-not-show" not in html
    assert "1,234" in html
    pd.testing.assert_frame_equal(table, before)


def test_a_dict_of_counts_as_one_row():
    counts = {"read": 199895, "valid": 199839, "quarantined": 56}
    assert _cells(pd.DataFrame([counts])) == [
        ["read", "valid", "quarantined"],
        ["199,895", "199,839", "56"],
    ]


def test_numbers_align_right_and_text_left_their_labels_too():
    table = pd.DataFrame({"entity": ["orders"], "sends": [71975]})
    html = styled(table).to_html()
    aligned = dict(re.findall(r"_row0_(col\d) \{\s*text-align: (\w+);", html))
    assert aligned == {"col0": "left", "col1": "right"}
    labels = dict(re.findall(r"_level0_(col\d) \{\s*text-align: (\w+);", html))
    assert labels == aligned, "each label aligned as its column"


def test_a_label_may_wrap_after_its_underscores_and_reads_whole():
    """A column of counts is not as wide as its name: its label may break after an
    underscore between parts of three characters or more, by an element (``<wbr>``) that the
    label's text, and so a copy of it, leaves out; a hostile label stays text."""
    names = {"share_catchable_caught": [0.5], "window_s": [600], "<b>one_two</b>": ["x"]}
    table = pd.DataFrame(names)
    page = styled(table).to_html()
    labels = re.findall(r"<th [^>]*>(.*?)</th>", page)
    assert labels == [
        "share_<wbr>catchable_<wbr>caught",
        "window_s",
        "&lt;b&gt;one_<wbr>two&lt;/b&gt;",
    ]
    assert [html.unescape(label.replace("<wbr>", "")) for label in labels] == list(table)


def test_text_wraps_between_words_and_only_an_overlong_word_anywhere():
    """A kind, an entity, a time or a sentence is never broken within a word (wrapping
    anywhere let the browser squeeze "resend" to "resen" over "d" beside a long column); a
    column holding a word too long for a line wraps anywhere rather than widen the page."""
    table = pd.DataFrame(
        {
            "kind": ["resend"],
            "entity": ["notifications"],
            "send_time": pd.to_datetime(["2026-11-03 21:02:56"]),
            "why": ["the same content was accepted 1.491 s before (MessageId 0a78219d-7a75)"],
            "message_id": ["x" * 60],
        }
    )
    page = styled(table).to_html()
    rules = {
        cell: props
        for selectors, props in re.findall(r"([^{}]+)\{([^}]*)\}", page)
        for cell in re.findall(r"_row0_(col\d)", selectors)
    }
    assert ["overflow-wrap: anywhere" in rules[f"col{i}"] for i in range(5)] == [0, 0, 0, 0, 1]
    assert all("text-align: left" in rules[f"col{i}"] for i in range(5))


def test_data_and_column_labels_are_text_never_markup():
    from dedup_lib.text import shown
    from hostile_kit import BREAKOUT, IMG, LINK, LONG, RTL, SCRIPT, SVG

    hostile = [SCRIPT, IMG, SVG, LINK, BREAKOUT, RTL, LONG]
    table = pd.DataFrame({"entity": hostile, "sends": range(len(hostile))})
    table["ok"] = True
    table.columns = [IMG, "sends", SCRIPT]
    page = styled(table).to_html()
    assert "data-pwn" not in re.sub(r"&[^;]+;", "", re.sub(r">[^<]*<", "><", page))
    assert not re.search(r"<(script|img|svg|a|b)\b", page)
    cells = [[html.unescape(cell) for cell in row] for row in _cells(table)]
    assert cells[0] == [IMG, "sends", SCRIPT]
    assert [row[0] for row in cells[1:]] == [shown(v) for v in hostile]
    assert "…(10,240 characters)" in cells[-1][0]
    assert "\u202e" not in page


def test_a_widget_table_is_styled_with_its_caption_and_its_data_as_text():
    table = pd.DataFrame({"entity": ["<img src=x onerror=alert(1)>"], "sends": [1200]})
    page = widget_html(table, "Keys with the most sends dropped")
    assert "1,200" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<img" not in page
    assert re.search(r"<caption[^>]*>Keys with the most sends dropped</caption>", page)
    assert "border-collapse: collapse" in page
    assert "<caption" not in widget_html(table)
