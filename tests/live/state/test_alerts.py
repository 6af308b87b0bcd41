"""live.state.alerts: a micro-batch's verdicts made alerts: every rejected send, and every
duplicate whose content differs from its original's (a collision); a duplicate of the same
content, or with no content to compare, raises none. No Spark."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from dedup_lib.columns import KEYED_CONTENT, ORIGINAL_CONTENT
from dedup_lib.live.state.alerts import COLLISION, FIELDS, alert_table, alerts_of

AT = datetime(2026, 12, 1, 19, 33, tzinfo=UTC)


def _verdicts(content: bool = True) -> pa.Table:
    rows = {
        "entity": ["orders"] * 5,
        "dedup_key": ["m1", "m1", "m2", "m3", "m4"],
        "message_id": ["m1", "m1", "m2", "m3", "m4"],
        "send_time": [AT] * 5,
        "event_id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "original_send_time": [None, AT, AT, None, AT],
        "original_event_id": pa.array([None, 1, 9, None, 8], pa.int64()),
        "verdict": ["accepted", "duplicate", "duplicate", "rejected", "duplicate"],
        "reason": [None, None, None, "MessageId longer than 128 characters", None],
        "other": ["x"] * 5,
    }
    if content:
        rows[KEYED_CONTENT] = ["a", "b", "c", "d", None]
        rows[ORIGINAL_CONTENT] = [None, "a", "c", None, None]
    return pa.table(rows)


def test_rejected_sends_then_collisions_each_say_why() -> None:
    alerts = alerts_of(_verdicts())
    assert tuple(alerts.column_names) == FIELDS
    assert alerts["kind"].to_pylist() == ["rejected", COLLISION]
    assert alerts["event_id"].to_pylist() == [4, 2]
    assert alerts["original_event_id"].to_pylist() == [None, 1]
    refused, collided = alerts["why"].to_pylist()
    assert refused == "refused: MessageId longer than 128 characters"
    assert collided.startswith("a different message (content b, original's a) reused the key")


def test_without_content_only_rejected_sends_are_raised() -> None:
    assert alerts_of(_verdicts(content=False))["kind"].to_pylist() == ["rejected"]


def test_an_alert_table_fills_the_fields_its_rows_lack() -> None:
    rows = pa.table({"event_id": pa.array([7], pa.int64()), "send_time": [AT]})
    table = alert_table(rows, "resend", pa.array(["again"]))
    assert tuple(table.column_names) == FIELDS
    assert table.to_pylist() == [
        {
            "kind": "resend",
            "entity": None,
            "dedup_key": None,
            "message_id": None,
            "send_time": datetime(2026, 12, 1, 19, 33, tzinfo=UTC),
            "event_id": 7,
            "original_send_time": None,
            "original_event_id": None,
            "why": "again",
        }
    ]
