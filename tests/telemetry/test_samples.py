"""The shipped samples: each shape of the incident gives the verdicts of its Parquet file, and
the broker export is what a broker with a one-minute window kept of it."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates, load_telemetry, reconcile, sample_path

POLICY = DedupPolicy("PT10M", partitioning=True)
JUDGED = ("entity", "message_id", "partition_key", "session_id", "verdict", "reason", "dedup_key")


def _verdicts(spark, name):
    """Each send's verdict, its time to the millisecond (the portal's CSV keeps no more)."""
    result = detect_duplicates(load_telemetry(spark, sample_path(name)).valid, POLICY)
    ms = F.date_format("send_time", "yyyy-MM-dd HH:mm:ss.SSS").alias("send_ms")
    return Counter(tuple(r) for r in result.select(*JUDGED, ms).collect())


SHAPES = ("incident-otlp.jsonl.gz", "incident-app-insights.csv.gz", "incident-app-insights.json.gz")


def test_each_shape_of_the_incident_gives_the_parquet_verdicts(spark):
    """Each shape loaded and replayed side by side (one job each, on one session): a file is
    read by one task, so one load alone leaves a core idle."""
    names = ("incident.parquet", *SHAPES)
    with ThreadPoolExecutor(len(names)) as pool:
        expected, *shapes = pool.map(lambda name: _verdicts(spark, name), names)
    assert {row[4] for row in expected} == {"accepted", "duplicate", "rejected"}
    for name, verdicts in zip(SHAPES, shapes, strict=True):
        assert verdicts == expected, name


def test_the_export_is_what_a_one_minute_broker_kept(spark):
    sends = load_telemetry(spark, sample_path("incident.parquet")).valid
    kept = load_telemetry(spark, sample_path("incident-kept/orders.json.gz"), format="sb-explorer")
    assert kept.format == "sb-explorer"
    broker = DedupPolicy("PT1M")
    agreed = reconcile(detect_duplicates(sends, broker), kept.valid, broker, entity="orders")
    assert agreed.counts()["contradictions"] == agreed.counts()["unexplained"] == 0
    assert agreed.counts()["explained"] == kept.counts()["valid"]
    assumed = DedupPolicy("PT10M")
    checked = reconcile(detect_duplicates(sends, assumed), kept.valid, assumed, entity="orders")
    assert checked.counts()["contradictions"] > 0
    assert checked.agreeing_window is not None
    assert timedelta(minutes=1) <= checked.agreeing_window < timedelta(minutes=2)
    advice = " ".join(checked.summary()["what to do"])
    assert "replay at 1m;" in advice  # rounded down: a window at most the bound agrees


def test_a_notebook_reads_its_input_else_make_labs_else_the_sample(monkeypatch, tmp_path):
    from dedup_lib import notebook_input
    from dedup_lib.telemetry.samples import INPUT_VARIABLE

    monkeypatch.delenv(INPUT_VARIABLE, raising=False)
    assert notebook_input(None, "day.parquet") == sample_path("day.parquet")
    monkeypatch.setenv(INPUT_VARIABLE, str(tmp_path / "mine.parquet"))
    assert notebook_input(None, "day.parquet") == str(tmp_path / "mine.parquet")
    assert notebook_input("given.csv", "day.parquet") == "given.csv"
    assert notebook_input(Path("given.csv"), "day.parquet") == "given.csv"


def test_what_ships_with_a_sample_never_goes_with_other_data(tmp_path):
    from dedup_lib import shipped_with
    from dedup_lib.telemetry.samples import is_shipped_sample

    assert shipped_with(sample_path("day.parquet"), "settings") == sample_path("entities-arm.json")
    assert shipped_with(sample_path("incident.parquet"), "kept").endswith("orders.json.gz")
    assert shipped_with(sample_path("incident.parquet"), "settings") is None
    mine = tmp_path / "day.parquet"  # named like the sample, but an analyst's own
    mine.write_bytes(b"")
    assert shipped_with(str(mine), "settings") is None
    assert is_shipped_sample(sample_path("incident-otlp.jsonl.gz"))
    assert not is_shipped_sample(str(mine))
