"""The monitor's /metrics: the Prometheus text format, parsed back, says what the verdict and
alert files hold; an entity name full of markup and quotes comes back as it was; a restart
goes on from the counts the checkpoint keeps; labels stay bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_lib import DedupPolicy, sample_path
from dedup_lib.live.metrics import ENTITIES, OTHER, Totals
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
    outputs = {"out": str(tmp_path / "out"), "checkpoint": str(tmp_path / "ck"),
               "alerts": str(tmp_path / "alerts.jsonl")}  # fmt: skip
    policy = DedupPolicy("PT10M")
    land(landing, 2)
    first = watch_duplicates(spark, str(landing), policy, "PT1M", once=True, metrics="127.0.0.1:0",
                             **outputs)  # fmt: skip
    first.stop()
    land(landing, 2, first=2)
    watch = watch_duplicates(spark, str(landing), policy, "PT1M", once=True, metrics="127.0.0.1:0",
                             **outputs)  # fmt: skip
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
    alerts = pd.DataFrame(
        json.loads(line) for line in Path(outputs["alerts"]).read_text().splitlines()
    )
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
    assert HOSTILE in names, "the entity's name comes back as it was"


def test_an_entity_label_past_the_bound_is_counted_as_other():
    names: set[str] = set()
    verdicts = pa.table(
        {
            "entity": [f"queue-{i}" for i in range(ENTITIES + 5)],
            "verdict": ["accepted"] * (ENTITIES + 5),
        }
    )
    alerts = pa.table({"entity": pa.nulls(0, pa.string()), "kind": pa.nulls(0, pa.string())})
    refused = pa.table({"reason": pa.array(["unparseable send_time: 'x'", None])})
    totals = Totals.of(verdicts, alerts, refused, 3, names)
    assert len(names) == ENTITIES
    assert totals.sends[(OTHER, "accepted")] == 5
    assert sum(totals.sends.values()) == ENTITIES + 5
    assert totals.refused == {"unparseable send_time": 1, "": 1}
    assert Totals.from_json(json.loads(json.dumps(totals.to_json()))) == totals
