"""summarize: the per-entity table of a detect_duplicates result."""

from __future__ import annotations

import math

import pytest

from dedup_lib import DedupPolicy, detect_duplicates, id_quality, sends_over_time, summarize
from dedup_lib.analysis.summaries import ground_truth_summary, has_ground_truth, most_reused_ids
from dedup_lib.testing import Message
from replay_kit import at, frame


@pytest.mark.connect
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


@pytest.mark.connect
def test_summarize_needs_a_result(spark):
    with pytest.raises(ValueError, match="verdict"):
        summarize(frame(spark, [Message("a", at(0))]))


def _truth_frame(spark, rows):
    """(entity, logical_id, attempt, verdict) rows as a result with ground truth."""
    return spark.createDataFrame(
        rows, "entity string, logical_id long, attempt int, verdict string"
    )


@pytest.mark.connect
def test_ground_truth_summary_counts_what_happened_to_each_message(spark):
    rows = [
        # message 1: sent three times, one delivery, two resends caught
        ("q", 1, 1, "accepted"), ("q", 1, 2, "duplicate"), ("q", 1, 3, "duplicate"),
        # message 2: resent after the window: delivered twice
        ("q", 2, 1, "accepted"), ("q", 2, 2, "accepted"),
        # message 3: its only send dropped as another message's duplicate: lost
        ("q", 3, 1, "duplicate"),
        # message 4: refused by the SDK every time
        ("q", 4, 1, "rejected"), ("q", 4, 2, "rejected"),
        # message 5: first send dropped (colliding id), resend delivered: not lost
        ("r", 5, 1, "duplicate"), ("r", 5, 2, "accepted"),
    ]  # fmt: skip
    table = ground_truth_summary(_truth_frame(spark, rows)).set_index("entity")
    assert list(table.index) == ["q", "r", "(all)"]
    q = table.loc["q"]
    assert q.messages == 4
    assert q.sends == 8
    assert q.resends == 4
    assert q.resends_caught == 2
    assert q.extra_deliveries == 1
    assert q.messages_lost == 1
    assert q.first_sends_dropped == 1
    assert q.messages_rejected == 1
    r = table.loc["r"]
    assert (r.messages_lost, r.first_sends_dropped, r.extra_deliveries) == (0, 1, 0)
    assert table.loc["(all)"].sends == 10


@pytest.mark.connect
def test_ground_truth_summary_needs_the_truth(spark):
    result = spark.createDataFrame([("q", "accepted")], "entity string, verdict string")
    assert not has_ground_truth(result)
    with pytest.raises(ValueError, match="logical_id, attempt"):
        ground_truth_summary(result)


@pytest.mark.connect
def test_id_quality_and_most_reused_ids(spark):
    guid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    messages = [
        Message(None, at(0), entity="q", event_id=1),
        Message("", at(1), entity="q", event_id=2),
        Message(guid, at(2), entity="q", event_id=3),
        Message("stock/1", at(3), entity="q", event_id=4),
        Message("stock/1", at(4), entity="q", event_id=5),
        Message("stock/1", at(5), entity="r", event_id=6),
    ]
    df = frame(spark, messages)
    table = id_quality(df).set_index("entity")
    q = table.loc["q"]
    assert (q.sends, q.without_message_id, q.guid_like, q.distinct_ids) == (5, 2, 1, 2)
    assert q.share_without_id == pytest.approx(0.4)
    assert q.sends_per_id == pytest.approx(1.5)
    assert table.loc["(all)", "distinct_ids"] == 3
    top = most_reused_ids(df, n=2)
    assert list(top.message_id) == ["stock/1", guid]
    assert list(top.sends) == [2, 1]
    over_time = sends_over_time(df, bucket="PT1M")
    assert over_time.groupby("entity").sends.sum().to_dict() == {"q": 5, "r": 1}
