"""The counts a commit keeps: a micro-batch's, added up, and read back as written."""

from __future__ import annotations

import json

import pyarrow as pa

from dedup_lib.live.output.labels import ENTITIES, INVALID, OTHER, EntityLabels
from dedup_lib.live.output.totals import Totals

COUNTS = {"skipped": 3, "read": ENTITIES + 10}


def test_a_micro_batch_s_counts_by_label_reason_and_time():
    verdicts = pa.table(
        {
            "entity": [f"queue-{i}" for i in range(ENTITIES + 5)] + ["<b>x</b>", None],
            "verdict": ["accepted"] * (ENTITIES + 5) + ["duplicate", "accepted"],
        }
    )
    alerts = pa.table({"entity": ["queue-0"], "kind": ["collision"]})
    refused = pa.table({"reason": pa.array(["unparseable send_time: 'x'", None])})
    labels = EntityLabels()
    totals = Totals.of(verdicts, alerts, refused, COUNTS, labels, now=1e9)
    assert len(labels.given) == ENTITIES
    assert totals.sends[(OTHER, "accepted")] == 5
    assert totals.sends[(INVALID, "duplicate")] == 1
    assert totals.sends[("", "accepted")] == 1
    assert sum(totals.sends.values()) == verdicts.num_rows
    assert totals.refused == {"unparseable send_time": 1, "": 1}
    assert totals.last_alert == {("queue-0", "collision"): 1e9}
    assert (totals.rows, totals.skipped, totals.batches) == (ENTITIES + 10, 3, 1)
    assert totals.judged_at == totals.committed_at == 1e9
    assert Totals.from_json(json.loads(json.dumps(totals.to_json()))) == totals


def test_added_up_counts_sum_and_times_keep_the_latest():
    empty = pa.table({"entity": pa.array([], pa.string()), "verdict": pa.array([], pa.string())})
    none = pa.table({"entity": pa.array([], pa.string()), "kind": pa.array([], pa.string())})
    refused = pa.table({"reason": pa.array([], pa.string())})
    labels = EntityLabels()
    first = Totals.of(empty.slice(0, 0), none, refused, COUNTS, labels, now=100.0)
    assert first.judged_at is None, "no send judged: the time of the last one stays"
    total = Totals(judged_at=50.0)
    total.notes["removed_unread"] += 1
    total.add(first)
    assert (total.judged_at, total.committed_at, total.batches) == (50.0, 100.0, 1)
    assert total.notes == {"removed_unread": 1}


def test_a_checkpoint_from_before_notes_and_times_reads():
    old = {"sends": [["orders", "accepted", 4]], "alerts": [], "refused": {}, "skipped": 0,
           "batches": 2, "last_alert": []}  # fmt: skip
    totals = Totals.from_json(old)
    assert totals.sends[("orders", "accepted")] == 4
    assert (totals.rows, totals.judged_at, totals.committed_at) == (0, None, None)
    assert not totals.notes
