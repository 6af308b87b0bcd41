"""The monitor's /metrics: the Prometheus text format, parsed back, says what the verdict and
alert files hold; an entity name full of markup and quotes, which Service Bus refuses, is
counted as ``(invalid)``; a restart goes on from the counts the checkpoint keeps and serves no
time at 0; a new entity's series are served at 0 before its counts; labels stay bounded."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_lib import DedupPolicy, sample_path
from dedup_lib.live.landing.ledger import NOTE_KINDS
from dedup_lib.live.options import ReadOptions, ServeOptions, WatchOptions, WriteOptions
from dedup_lib.live.output.labels import ENTITIES, INVALID, OTHER, EntityLabels
from dedup_lib.live.output.lines import StateSize
from dedup_lib.live.output.totals import Totals
from dedup_lib.live.service.metrics import Metrics
from dedup_lib.live.state.budget import OVER_BUDGET
from dedup_lib.live.state.judge import Clock
from dedup_lib.live.watch import watch_duplicates
from metrics_kit import scrape, summed

HOSTILE = '<b>"ord\\ers"</b> & {x}'


def land(folder: Path, parts: int, first: int = 0) -> None:
    """The day sample (its inventory reuses ids: collisions; some rows are refused), its
    inventory renamed to a hostile name, in ``parts`` of four files."""
    table = pq.read_table(sample_path("day.parquet")).sort_by("send_time")
    entity = pa.array([HOSTILE if e == "inventory" else e for e in table["entity"].to_pylist()])
    table = table.set_column(table.schema.get_field_index("entity"), "entity", entity)
    size = -(-table.num_rows // 4)
    for i in range(first, first + parts):
        pq.write_table(table.slice(i * size, size), folder / f".part-{i}", coerce_timestamps="us")
        (folder / f".part-{i}").rename(folder / f"sends-{i}.parquet")


@pytest.mark.connect
def test_the_counters_say_what_the_files_hold_across_a_restart(spark, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    alerts = str(tmp_path / "alerts.jsonl")
    options = WatchOptions(writing=WriteOptions(alerts=alerts), serving=ServeOptions("127.0.0.1:0"))
    outputs = {"out": str(tmp_path / "out"), "checkpoint": str(tmp_path / "ck"),
               "options": options}  # fmt: skip
    policy = DedupPolicy("PT10M")
    land(landing, 2)
    first = watch_duplicates(spark, str(landing), policy, "PT1M", once=True, **outputs)
    first.stop()
    land(landing, 2, first=2)
    watch = watch_duplicates(spark, str(landing), policy, "PT1M", once=True, **outputs)
    try:
        samples = scrape(watch.metrics_address)
    finally:
        watch.stop()

    verdicts = pd.read_parquet(outputs["out"])
    refused = pd.read_parquet(str(tmp_path / "out-quarantine"))
    categories = refused["reason"].str.split(":").str[0].value_counts()
    for category, count in categories.items():
        assert summed(samples, "dedup_quarantined_rows_total", reason=category) == count
    assert summed(samples, "dedup_quarantined_rows_total") == len(refused) > 0
    alerts = pd.DataFrame(json.loads(line) for line in Path(alerts).read_text().splitlines())
    verdicts["entity"] = verdicts["entity"].replace(HOSTILE, INVALID)
    alerts = alerts.assign(entity=alerts["entity"].replace(HOSTILE, INVALID))
    for (entity, verdict), count in verdicts.groupby(["entity", "verdict"]).size().items():
        got = summed(samples, "dedup_sends_judged_total", entity=entity, verdict=verdict)
        assert got == count, (entity, verdict)
    assert summed(samples, "dedup_sends_judged_total") == len(verdicts)
    for (entity, kind), count in alerts.groupby(["entity", "kind"]).size().items():
        assert summed(samples, "dedup_alerts_total", entity=entity, kind=kind) == count
    assert summed(samples, "dedup_alerts_total", kind="collision") > 0
    assert summed(samples, "dedup_alerts_total") == len(alerts)
    assert summed(samples, "dedup_micro_batches_total") == 2
    assert summed(samples, "dedup_state_keys") > 0
    assert summed(samples, "dedup_watermark_seconds") > 1.7e9
    assert summed(samples, "dedup_last_micro_batch_timestamp_seconds") > 1.7e9
    assert summed(samples, "dedup_micro_batch_duration_seconds_count") == 1, "this process's"
    assert ("dedup_lateness_seconds", ()) in samples
    names = {dict(ls).get("entity") for (n, ls) in samples if n == "dedup_sends_judged_total"}
    assert INVALID in names, "a name Service Bus refuses is counted as (invalid)"
    assert HOSTILE not in names


def served(lateness: float = 60.0, every: float = 5.0, **kw) -> tuple[Metrics, tuple]:
    metrics = Metrics(lateness, every, **kw)
    return metrics, metrics.serve("127.0.0.1:0")


def one_batch(entity: str = "orders", verdicts: int = 3, at: float = 1.7e9) -> Totals:
    table = pa.table({"entity": [entity] * verdicts, "verdict": ["accepted"] * verdicts})
    alerts = pa.table({"entity": pa.array([], pa.string()), "kind": pa.array([], pa.string())})
    refused = pa.table({"reason": ["unparseable send_time: 'x'"]})
    return Totals.of(
        table, alerts, refused, {"skipped": 0, "read": verdicts + 1}, EntityLabels(), at
    )


def test_a_new_entity_is_served_at_zero_one_scrape_before_its_counts():
    metrics, address = served()
    try:
        metrics.restored(Totals(), StateSize(), None)
        metrics.committed(one_batch(), 0.5, StateSize(keys=3), Clock(60_000, None))
        first = scrape(address)
        assert summed(first, "dedup_sends_judged_total", entity="orders") == 0
        assert ("dedup_sends_judged_total", (("entity", "orders"), ("verdict", "late"))) in first
        assert summed(first, "dedup_quarantined_rows_total") == 0
        second = scrape(address)
        assert summed(second, "dedup_sends_judged_total", entity="orders", verdict="accepted") == 3
        assert summed(second, "dedup_quarantined_rows_total") == 1
        metrics.committed(one_batch(), 0.5, StateSize(keys=3), Clock(60_000, None))
        assert summed(scrape(address), "dedup_sends_judged_total", entity="orders") == 6, (
            "a series served already counts at once"
        )
    finally:
        metrics.close()


def test_counts_read_without_a_scrape_are_whole():
    metrics, _ = served()
    try:
        metrics.restored(Totals(), StateSize(), None)
        metrics.committed(one_batch(), 0.5, StateSize(), Clock(60_000, None))
        table = metrics.table()
        judged = table[table["metric"] == "dedup_sends_judged_total"]["value"].sum()
        assert judged == 3
    finally:
        metrics.close()


def test_a_restarted_monitor_serves_no_time_at_zero_and_is_not_ready_while_restoring():
    metrics, address = served(every=1.0)
    try:
        first = scrape(address)
        times = [n for n, _ in first if n.endswith("_timestamp_seconds") or "watermark" in n]
        assert times == [], "absent until known, never 1970"
        assert summed(first, "dedup_restoring") == 1
        assert summed(first, "dedup_ready") == 0
        assert metrics.ready() == (False, "restoring the state from the checkpoint")
        kept = Totals(judged_at=1.7e9, committed_at=1.7e9 + 1)
        metrics.restored(kept, StateSize(keys=5), watermark=int(1.69e15))
        restored = scrape(address)
        assert summed(restored, "dedup_last_micro_batch_timestamp_seconds") == 1.7e9 + 1
        assert summed(restored, "dedup_last_judged_timestamp_seconds") == 1.7e9
        assert summed(restored, "dedup_watermark_seconds") == 1.69e9
        assert ("dedup_last_scan_timestamp_seconds", ()) not in restored
        assert metrics.ready() == (False, "the folder has not been scanned yet")
        metrics.scanned(0, None, landed=1.7e9 + 2)
        ready = scrape(address)
        assert summed(ready, "dedup_ready") == 1
        assert summed(ready, "dedup_restoring") == 0
        assert summed(ready, "dedup_last_landed_timestamp_seconds") == 1.7e9 + 2
        assert 0 not in [v for (n, _), v in ready.items() if n.endswith("_timestamp_seconds")]
        metrics.last_scan = time.time() - 3
        assert metrics.ready() == (False, "the folder was last scanned 3 s ago")
    finally:
        metrics.close()


def test_the_state_s_counts_are_served_once_known():
    """Keys held and sends waiting: absent while the driver's state is restored, then its
    counts; for the state on the executors, the judge's counts, and none when its checkpoint
    did not count them from its start (a 0 would read as an empty state)."""
    metrics, address = served()
    try:
        counts = ("dedup_state_keys", ()), ("dedup_waiting_sends", ())
        assert not set(counts) & set(scrape(address)), "absent while restoring"
        metrics.restored(Totals(), StateSize(keys=5, waiting=2), watermark=None)
        assert [scrape(address).get(c) for c in counts] == [5, 2]
        metrics.sized(StateSize(7, 1 << 20, 5 << 30, 3, executors=True, counted=True))
        assert [scrape(address).get(c) for c in counts] == [7, 3]
        metrics.sized(StateSize(memory=3 << 20, disk=5 << 30, executors=True))
        served_now = scrape(address)
        assert not set(counts) & set(served_now), "a checkpoint that did not count them"
        assert summed(served_now, "dedup_state_bytes", store="disk") == 5 << 30
        assert "dedup_state_keys" not in set(metrics.table()["metric"])
    finally:
        metrics.close()


def test_build_info_the_process_s_metrics_and_no_created_series():
    metrics, address = served()
    try:
        samples = scrape(address)
        (info,) = [dict(ls) for n, ls in samples if n == "dedup_build_info"]
        assert set(info) == {"version", "python", "pyspark"}
        assert info["version"] != "unknown"
        assert summed(samples, "process_start_time_seconds") > 1.7e9
        assert summed(samples, "process_resident_memory_bytes") > 0
        assert not [n for n, _ in samples if n.endswith("_created")]
        kinds = {dict(ls)["kind"] for n, ls in samples if n == "dedup_notes_total"}
        assert kinds == {*NOTE_KINDS, OVER_BUDGET}, "every kind at 0 from the start"
        metrics.noted("removed_unread")
        assert summed(scrape(address), "dedup_notes_total", kind="removed_unread") == 1
    finally:
        metrics.close()


def test_configured_entities_keep_their_labels_past_the_budget():
    metrics = Metrics(60.0, reserved=["payments"])
    for i in range(ENTITIES):
        metrics.labels.label(f"queue-{i}")
    assert metrics.labels.label("payments") == "payments"
    assert metrics.labels.label("audit") == OTHER


@pytest.mark.slow
def test_a_real_prometheus_sees_a_new_entity_s_first_micro_batch(spark, tmp_path):
    """Without its series served at 0 first, a counter's first value is no increase to
    Prometheus: an entity's first collisions would never show in increase() or rate()."""
    from prometheus_kit import Prometheus

    landing = tmp_path / "landing"
    landing.mkdir()
    table = pq.read_table(sample_path("incident.parquet"))
    is_orders = pa.compute.equal(table["entity"], "orders")
    others = table.filter(pa.compute.invert(is_orders))
    pq.write_table(others, landing / "others.parquet", coerce_timestamps="us")
    watch = watch_duplicates(
        spark, landing, DedupPolicy("PT10M"), "PT1M", out=tmp_path / "out",
        checkpoint=tmp_path / "ck", options=WatchOptions(
            reading=ReadOptions(trigger=0.5), serving=ServeOptions(metrics="127.0.0.1:0")
        ),
    )  # fmt: skip
    host, port = watch.metrics_address
    (tmp_path / "prometheus").mkdir()
    prometheus = Prometheus(tmp_path / "prometheus", f"{host}:{port}")
    query = 'sum(increase(dedup_sends_judged_total{entity="orders"}[1m]))'
    try:
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "Prometheus never scraped the monitor"
            time.sleep(0.5)
            with contextlib.suppress(OSError):
                if prometheus.value("up") == 1:
                    break
        pq.write_table(table.filter(is_orders), landing / ".orders", coerce_timestamps="us")
        (landing / ".orders").rename(landing / "orders.parquet")
        # Prometheus alone scrapes: the zero is served to the first scrape after the series
        # appears, whoever makes it.
        while prometheus.value('sum(dedup_sends_judged_total{entity="orders"})') == 0:
            assert time.monotonic() < deadline, watch.error
            time.sleep(0.5)
        time.sleep(3)  # a few scrapes of the counts
        assert prometheus.value("sum(dedup_sends_judged_total)") > 0
        assert prometheus.value(query) > 0, "the first micro-batch is an increase"
    finally:
        prometheus.stop()
        watch.stop()


def test_counts_waiting_for_a_scrape_are_bounded_by_the_series_not_the_micro_batches():
    """/metrics served and nobody scraping (Prometheus down, or not set up yet) for a day of
    micro-batches: what waits is one sum per new series."""
    metrics, address = served()
    try:
        metrics.restored(Totals(), StateSize(), None)
        for _ in range(500):
            metrics.committed(one_batch(), 0.5, StateSize(), Clock(60_000, None))
        assert len(metrics._deferred) == 2, "accepted sends of orders; a reason's rows"
        scrape(address)
        samples = scrape(address)
        assert summed(samples, "dedup_sends_judged_total", entity="orders") == 1500
        assert summed(samples, "dedup_quarantined_rows_total") == 500
        assert metrics._deferred == {}
    finally:
        metrics.close()
