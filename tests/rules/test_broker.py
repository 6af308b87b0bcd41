"""The broker model itself: arrival order, and the history it keeps."""

from __future__ import annotations

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.rules.policy import REASON_MIXED_BATCH
from dedup_lib.testing import Broker, Message, broker_outcomes, send_calls
from replay_kit import at


def test_broker_refuses_sends_that_go_back_in_time():
    broker = Broker(DedupPolicy())
    broker.send(Message("a", at(10)))
    with pytest.raises(ValueError, match="time order"):
        broker.send(Message("b", at(5)))


def test_broker_rejected_sends_do_not_move_the_clock():
    broker = Broker(DedupPolicy())
    assert broker.send(Message("m", at(100), partition_key="p", session_id="s")).verdict == (
        "rejected"
    )
    assert broker.send(Message("m", at(5))).verdict == "accepted"


def test_replay_answers_in_input_order_whatever_the_order_of_sends():
    late, early = Message("m", at(60), event_id=1), Message("m", at(0), event_id=2)
    outcomes = broker_outcomes([late, early], DedupPolicy())
    assert [o.verdict for o in outcomes] == ["duplicate", "accepted"]
    assert outcomes[0].original is early


def test_window_expiry_makes_a_new_anchor():
    policy = DedupPolicy("PT20S")
    outcomes = broker_outcomes([Message("m", at(t)) for t in (0, 19, 20, 39, 40)], policy)
    assert [o.verdict for o in outcomes] == [
        "accepted",
        "duplicate",
        "accepted",
        "duplicate",
        "accepted",
    ]


def test_a_refused_batch_leaves_no_trace_in_the_history():
    broker = Broker(DedupPolicy(partitioning=True))
    call = [Message("a", at(0), batch_id="b"), Message("c", at(0), batch_id="b")]
    assert [broker.send(m, call).reason for m in call] == [REASON_MIXED_BATCH] * 2
    assert broker.send(Message("a", at(1))).verdict == "accepted"


def test_send_calls_group_by_entity_and_batch_id():
    messages = [
        Message("a", at(0), entity="q", batch_id="b"),
        Message("b", at(0), entity="r", batch_id="b"),
        Message("c", at(0), entity="q", batch_id="b"),
        Message("d", at(0), entity="q", batch_id=""),
        Message("e", at(0), entity="q", batch_id=""),
        Message("f", at(0), entity="q"),
    ]
    calls = send_calls(messages)
    assert [[m.message_id for m in call] for call in calls] == [
        ["a", "c"], ["b"], ["a", "c"], ["d"], ["e"], ["f"],
    ]  # fmt: skip
