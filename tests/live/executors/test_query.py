"""The streaming query's parts without a stream: a progress read as figures, and a
micro-batch's verdicts written again replacing, never adding to, the first."""

from __future__ import annotations

import glob
import os

import pytest

from dedup_lib.live.executors.query import Figures, verdict_folder, write_verdicts


def test_figures_read_a_progress():
    progress = {
        "batchId": 4,
        "numInputRows": 120,
        "stateOperators": [
            {
                "numRowsTotal": 37,
                "numRowsDroppedByWatermark": 0,
                "customMetrics": {"numExpiredTimers": 5},
            }
        ],
        "eventTime": {"watermark": "2026-11-03T20:09:00.000Z"},
    }
    assert Figures.of(progress) == Figures(4, 120, 37, 0, 5, "2026-11-03T20:09:00.000Z")
    assert verdict_folder("out", 4) == "out/batch-0000000004"


@pytest.mark.spark
def test_a_micro_batch_written_again_replaces_its_verdicts(spark, tmp_path):
    answered = spark.createDataFrame(
        [(1, "accepted", None, None, None, 7), (2, "late", None, None, 1_000, 7)],
        "event_id long, verdict string, original_micros long, original_event_id long, "
        "missed_ms long, __dedup_k0 long",
    )
    out = str(tmp_path / "out")
    os.makedirs(out)
    for _ in range(2):
        write_verdicts(answered, 3, out)
    assert sorted(os.listdir(out)) == ["batch-0000000003"]
    written = spark.read.parquet(verdict_folder(out, 3))
    assert written.columns == [
        "event_id",
        "verdict",
        "original_send_time",
        "original_event_id",
        "missed_watermark",
    ]
    rows = written.selectExpr("event_id", "verdict", "unix_millis(missed_watermark) AS missed")
    assert sorted(tuple(r) for r in rows.collect()) == [(1, "accepted", None), (2, "late", 1_000)]
    assert not glob.glob(os.path.join(out, ".*"))
