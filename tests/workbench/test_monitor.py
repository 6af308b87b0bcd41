"""The live monitor's widget (``LiveMonitor``) started on a folder where nothing has landed yet:
it returns at once, its status says it waits for the first file, and what the input lacks is
said once that file has told the columns (here: no content, so no collision alerts)."""

from __future__ import annotations

import time

import pandas as pd

from dedup_lib import DedupPolicy, sample_path
from dedup_lib.live.options import ReadOptions, WatchOptions
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
