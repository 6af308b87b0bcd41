"""The live monitor's widget (``LiveMonitor``) started on a folder where nothing has landed yet:
it returns at once, its status says it waits for the first file, and what the input lacks is
said once that file has told the columns (here: no content, so no collision alerts). A line
of the resends' query (the state on the executors) draws its alerts and says what it paired."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pandas as pd
import pyarrow as pa

from dedup_lib import DedupPolicy, sample_path
from dedup_lib.live.options import ReadOptions, WatchOptions
from dedup_lib.live.output.lines import BatchLine, StateSize
from dedup_lib.workbench.monitor import LiveMonitor


def test_started_before_the_first_file_it_waits_then_says_what_the_input_lacks(spark, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    monitor = LiveMonitor()
    started = time.monotonic()
    watch = monitor.start(
        spark, landing, DedupPolicy("PT10M"), out=tmp_path / "out", checkpoint=tmp_path / "ck",
        options=WatchOptions(reading=ReadOptions(trigger=0.2)),
    )  # fmt: skip
    try:
        assert watch is not None
        assert watch.waiting
        assert time.monotonic() - started < 60, "no wait for verdicts that cannot come"
        assert monitor.status.value.endswith("nothing has landed yet; waiting for the first file.")
        assert monitor.lacks is None
        assert monitor.note.value == ""
        sends = pd.read_parquet(sample_path("incident.parquet")).drop(columns="payload_hash")
        sends.to_parquet(landing / ".sends.parquet", index=False)
        (landing / ".sends.parquet").rename(landing / "sends.parquet")
        deadline = time.monotonic() + 120
        while not monitor.status.value.startswith("Micro-batch 0 at "):
            assert time.monotonic() < deadline, (watch.error, monitor.status.value)
            time.sleep(0.2)
        assert monitor.lacks is not None
        assert "collisions" in monitor.lacks
        assert monitor.note.value
    finally:
        monitor.stop()


def test_a_line_of_resends_draws_its_alerts_and_says_what_it_paired():
    sent = datetime(2026, 11, 3, 21, 4, tzinfo=UTC)
    resent = pa.table(
        {
            "kind": ["resend"],
            "entity": ["<img src=x onerror=alert(1)>"],
            "send_time": pa.array([sent], pa.timestamp("us", tz="UTC")),
            "message_id": ["m-2"],
        }
    )
    monitor = LiveMonitor()
    monitor.update(BatchLine.of_resends(3, resent, StateSize(executors=True)))
    assert monitor.status.value.startswith("Resends' micro-batch 3 at ")
    assert monitor.status.value.endswith(
        ": 1 resends reached consumers again; state on the executors."
    )
    assert monitor.alerts()["kind"].tolist() == ["resend"]
    _sends, alerts = monitor.figures()
    assert [trace.name for trace in alerts.data] == ["resend"]
    assert "&lt;img" in monitor.table.value
