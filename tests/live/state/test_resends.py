"""Resends across micro-batches: a resend pairs with the last accepted copy of its content
before it, in its micro-batch or kept from earlier ones however many micro-batches between
had none, and what is kept goes once the horizon can no longer reach it. No Spark."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa

from dedup_lib.columns import C0, C1, KEYED_CONTENT, SEND_MICROS
from dedup_lib.live.state.resends import Resends
from dedup_lib.live.state.store import KeyedState

MINUTE = 60_000_000
HOUR = 60 * MINUTE


def verdicts(rows: list[tuple[str, int, int, str]]) -> pa.Table:
    """(content, minute, event id, verdict), on orders."""
    return pa.table(
        {
            "entity": ["orders"] * len(rows),
            "message_id": [f"m{e}" for _, _, e, _ in rows],
            "send_time": pa.array([m * MINUTE for _, m, _, _ in rows]).cast(
                pa.timestamp("us", tz="UTC")
            ),
            "event_id": pa.array([e for _, _, e, _ in rows], pa.int64()),
            "verdict": [v for *_, v in rows],
            "dedup_key": [f"m{e}" for _, _, e, _ in rows],
            SEND_MICROS: pa.array([m * MINUTE for _, m, _, _ in rows], pa.int64()),
            KEYED_CONTENT: [c for c, *_ in rows],
            C0: pa.array([ord(c[0]) for c, *_ in rows], pa.int64()),
            C1: pa.array([len(c) for c, *_ in rows], pa.int64()),
        }
    )


def test_a_resend_pairs_across_micro_batches_and_old_contents_go(tmp_path):
    resends = Resends(KeyedState(str(tmp_path)), timedelta(hours=1))
    first = [("old", 0, 1, "accepted"), ("a", 50, 2, "accepted"), ("a", 55, 3, "duplicate")]
    assert resends.alerts(0, verdicts(first), watermark=50 * MINUTE).num_rows == 0
    # micro-batch 1 judged only a duplicate; micro-batch 2 accepts "a" again, 30 min later
    assert resends.alerts(1, verdicts([("a", 60, 4, "duplicate")]), 60 * MINUTE).num_rows == 0
    found = resends.alerts(
        2, verdicts([("a", 80, 5, "accepted"), ("a", 81, 6, "accepted")]), 81 * MINUTE
    ).to_pylist()
    assert [(f["event_id"], f["original_event_id"]) for f in found] == [(5, 2), (6, 5)]
    assert "1,800.000 s before (MessageId m2)" in found[0]["why"]
    assert "60.000 s before (MessageId m5)" in found[1]["why"]
    # "old" (minute 0) is beyond the hour of the watermark: let go; "a" is kept, as of 81
    assert resends.state.keys == 1
    kept = resends.state.find(np.array([[ord("o"), len("old")], [ord("a"), len("a")]]))
    assert kept.held.tolist() == [False, True]


def test_a_copy_beyond_the_horizon_is_no_resend(tmp_path):
    resends = Resends(KeyedState(str(tmp_path)), timedelta(hours=1))
    resends.alerts(0, verdicts([("a", 0, 1, "accepted")]), None)
    assert resends.alerts(1, verdicts([("a", 61, 2, "accepted")]), None).num_rows == 0
    assert resends.alerts(2, verdicts([("a", 62, 3, "accepted")]), None).num_rows == 1
