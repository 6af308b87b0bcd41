"""summarize: the per-entity table of a detect_duplicates result."""

from __future__ import annotations

import math

import pytest

from dedup_lib import DedupPolicy, Message, detect_duplicates, summarize
from replay_kit import at, frame


def test_summarize_counts_per_entity_and_in_total(spark):
    messages = [
        Message("a", at(0), entity="orders", event_id=0),
        Message("a", at(1), entity="orders", event_id=1),
        Message("a", at(2), entity="orders", event_id=2),
        Message(None, at(3), entity="orders", event_id=3),
        Message("b", at(0), entity="payments", event_id=4, partition_key="p", session_id="s"),
        Message("b", None, entity=None, event_id=5),
    ]
    table = summarize(detect_duplicates(frame(spark, messages), DedupPolicy()))
    assert list(table["entity"]) == ["(none)", "orders", "payments", "(all)"]
    rows = table.set_index("entity")
    assert rows.loc["orders", ["sends", "accepted", "duplicates", "rejected"]].tolist() == [
        4,
        2,
        2,
        0,
    ]
    assert rows.loc["orders", "without_message_id"] == 1
    assert rows.loc["orders", "share_caught"] == pytest.approx(0.5)
    assert rows.loc["payments", "rejected"] == 1
    assert math.isnan(rows.loc["payments", "share_caught"])
    assert rows.loc["(all)", "sends"] == 6
    assert (
        rows.loc["(all)", "sends"]
        == rows.loc["(all)", ["accepted", "duplicates", "rejected"]].sum()
    )


def test_summarize_needs_a_result(spark):
    with pytest.raises(ValueError, match="verdict"):
        summarize(frame(spark, [Message("a", at(0))]))
