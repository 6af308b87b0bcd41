"""The executors' counts: records cumulative and numbered, written again from the one before
when a plan or a micro-batch runs again; a micro-batch's verdicts counted per minute, entity
and verdict by Spark; a plan's quarantined rows by reason category."""

from __future__ import annotations

from collections import Counter as Tally
from datetime import UTC, datetime

import pytest

from dedup_lib.live.executors import counts
from dedup_lib.live.output.labels import EntityLabels
from dedup_lib.live.output.totals import Totals


def test_a_record_is_the_one_before_and_what_it_counted_and_is_written_again_alike(tmp_path):
    root = str(tmp_path)
    assert counts.latest(root, counts.LOADS) == (-1, Totals(held=(0, 0)))
    counts.record(root, counts.LOADS, 0, Totals(rows=10, notes=Tally({"unfinished": 1})))
    counts.record(root, counts.LOADS, 1, Totals(rows=5))
    again = counts.record(root, counts.LOADS, 1, Totals(rows=5))  # plan 1 staged again
    assert again.rows == 15
    number, last = counts.latest(root, counts.LOADS)
    assert (number, last.rows, last.notes) == (1, 15, Tally({"unfinished": 1}))
    assert counts.latest(root, counts.LOADS, upto=0)[1].rows == 10
    counts.record(root, counts.LOADS, 2, Totals(rows=1))
    kept = sorted(p.name for p in (tmp_path / counts.LOADS).iterdir())
    assert kept == ["loads-0000000001.json", "loads-0000000002.json"], "older records go"
    assert counts.latest(root, counts.VERDICTS) == (-1, Totals(held=(0, 0))), "nothing held"
    counts.record(root, counts.VERDICTS, 0, Totals(held=(5, 2)))
    assert counts.record(root, counts.VERDICTS, 1, Totals(held=(-1, 1))).held == (4, 3)
    assert counts.record(root, counts.VERDICTS, 1, Totals(held=(-1, 1))).held == (4, 3)
    assert counts.record(root, counts.VERDICTS, 2, Totals()).held is None, "one not counted"


def test_a_record_after_a_gap_is_written_again_from_the_one_before_the_gap(tmp_path):
    """The resends' query records only the micro-batches that found a resend: record 9 follows
    5, and Spark running micro-batch 9 again writes it again from 5, not from nothing."""
    root = str(tmp_path)
    counts.record(root, counts.RESENDS, 4, Totals(rows=1))
    counts.record(root, counts.RESENDS, 5, Totals(rows=2))
    assert counts.record(root, counts.RESENDS, 9, Totals(rows=4)).rows == 7
    assert counts.record(root, counts.RESENDS, 9, Totals(rows=4)).rows == 7
    kept = sorted(p.name for p in (tmp_path / counts.RESENDS).iterdir())
    assert kept == ["resent-0000000005.json", "resent-0000000009.json"], "older records go"


@pytest.mark.spark
def test_a_micro_batch_is_counted_per_minute_entity_and_verdict(spark, tmp_path):
    minute = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    rows = [
        ("orders", "accepted", minute.replace(second=1)),
        ("orders", "duplicate", minute.replace(second=2)),
        ("orders", "late", minute.replace(minute=1)),
        (None, "rejected", minute.replace(minute=1, second=5)),
    ]
    folder = str(tmp_path / "batch-0000000003")
    spark.createDataFrame(rows, "entity string, verdict string, send_time timestamp").write.parquet(
        folder
    )
    line, totals = counts.counted_batch(spark, 3, folder, EntityLabels(), now=100.0)
    assert line is not None
    assert line.batch == 3
    assert line.minutes.to_dict("list") == {
        "minute": [minute, minute.replace(minute=1)],
        "sends": [2, 2],
        "duplicates": [1, 0],
        "late": [0, 1],
    }
    assert totals.sends == Tally(
        {("orders", "accepted"): 1, ("orders", "duplicate"): 1, ("orders", "late"): 1,
         ("", "rejected"): 1}
    )  # fmt: skip
    assert (totals.batches, totals.judged_at, totals.committed_at) == (1, 100.0, 100.0)
    empty = str(tmp_path / "batch-0000000004")
    spark.createDataFrame([], "entity string, verdict string, send_time timestamp").write.parquet(
        empty
    )
    line, totals = counts.counted_batch(spark, 4, empty, EntityLabels(), now=101.0)
    assert line is None
    assert (totals.batches, totals.judged_at, totals.committed_at) == (1, None, 101.0)


@pytest.mark.spark
def test_a_plan_s_quarantined_rows_are_counted_by_reason_category(spark):
    quarantine = spark.createDataFrame(
        [("timestamp: 'x' is not a time",), ("timestamp: '' is empty",), ("schema: no entity",)],
        "reason string",
    )
    counted = {"read": 10, "skipped": 2, "quarantined": 3}
    loads = counts.loads_of(counted, quarantine, Tally({"rewritten": 1}))
    assert loads.refused == Tally({"timestamp": 2, "schema": 1})
    assert (loads.rows, loads.skipped, loads.notes) == (10, 2, Tally({"rewritten": 1}))
    none = counts.loads_of({"read": 1, "skipped": 0, "quarantined": 0}, quarantine, Tally())
    assert none.refused == Tally()
