"""The alert rules the package ships, tested by promtool, and run by a real Prometheus server
(Debian's ``prometheus`` package, which .ci/run installs) that scrapes a running monitor while
the day sample lands: the collision alert fires, the stall alert does not, and what
Prometheus holds equals the alerts file."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from dedup_lib import DedupPolicy, sample_path
from dedup_lib.live.feed import land_in_steps
from dedup_lib.live.watch import watch_duplicates
from prometheus_kit import RULES, Prometheus, tool

RULE_TESTS = Path(__file__).resolve().parents[1] / "prometheus" / "dedup-rules-test.yml"


def test_the_rules_pass_their_promtool_tests():
    promtool = tool("promtool")
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_rule_tests_use_the_rules_the_package_ships():
    tests = yaml.safe_load(RULE_TESTS.read_text())
    (shipped,) = tests["rule_files"]
    assert (RULE_TESTS.parent / shipped).resolve() == Path(str(RULES)).resolve()
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = {t["alertname"] for case in tests["tests"] for t in case["alert_rule_test"]}
    assert alerts == tested, "every alert has a test"


@pytest.mark.slow
def test_a_real_prometheus_pages_on_collisions_and_not_on_a_stall(spark, tmp_path):
    landing, alerts = tmp_path / "landing", tmp_path / "alerts.jsonl"
    # The day sample: its inventory reuses ids, so different messages collide.
    land_in_steps(sample_path("day.parquet"), str(landing), files=6, every=1.0)
    total = pq.read_metadata(sample_path("day.parquet")).num_rows
    watch = watch_duplicates(
        spark, str(landing), DedupPolicy("PT10M"), "PT1M", out=str(tmp_path / "out"),
        checkpoint=str(tmp_path / "ck"), alerts=str(alerts), trigger=0.5,
        metrics="127.0.0.1:0",
    )  # fmt: skip
    host, port = watch.metrics_address
    (tmp_path / "prometheus").mkdir()
    prometheus = Prometheus(tmp_path / "prometheus", f"{host}:{port}")
    try:
        deadline = time.monotonic() + 180
        firing: dict[str, list[dict]] = {}
        while "DedupCollision" not in firing or sum(c["read"] for c in watch.loads) < total:
            assert time.monotonic() < deadline, (firing, watch.loads)
            assert watch.active, watch.error
            time.sleep(1)
            try:
                firing = prometheus.firing()
            except OSError:
                continue
        time.sleep(3)  # a few more scrapes of the last micro-batch
        collisions = prometheus.value('sum(dedup_alerts_total{kind="collision"})')
        firing = prometheus.firing()
    finally:
        watch.stop()
        prometheus.stop()
    raised = pd.DataFrame(json.loads(line) for line in alerts.read_text().splitlines())
    assert collisions == (raised["kind"] == "collision").sum() > 0
    entities = {labels["entity"] for labels in firing["DedupCollision"]}
    assert entities == set(raised.loc[raised["kind"] == "collision", "entity"])
    assert "DedupMonitorStalled" not in firing
    assert "DedupMonitorDown" not in firing
