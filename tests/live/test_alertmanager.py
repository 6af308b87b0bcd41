"""The example Alertmanager configuration the package ships: ``amtool`` checks it and its
routes; a real Alertmanager (Debian's ``prometheus-alertmanager``, which .ci/run installs)
configured from it, with only its webhooks' URLs (and ``group_wait``) changed, pages and
tickets a webhook of the test's own and inhibits what a down monitor cannot say; and, end to
end, a real Prometheus evaluating the rules ``dedup-lib rules`` wrote on a running monitor
that judged a collision pages through it."""

from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
import time
import urllib.request

import pandas as pd
import pytest

from prometheus_kit import (
    ALERTMANAGER,
    JOB,
    RUNBOOKS,
    Alertmanager,
    Webhook,
    for_test,
    shipped_alertmanager,
    tool,
)


def test_the_test_configuration_changes_only_the_urls_and_the_first_wait():
    config, shipped = for_test("http://127.0.0.1:9"), shipped_alertmanager()
    restored = copy.deepcopy(config)
    restored["route"]["group_wait"] = shipped["route"]["group_wait"]
    for receiver, original in zip(restored["receivers"], shipped["receivers"], strict=True):
        for hook, kept in zip(
            receiver["webhook_configs"], original["webhook_configs"], strict=True
        ):
            assert hook["url"] != kept["url"]
            hook["url"] = kept["url"]
    assert restored == shipped


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        ({"alertname": "DedupCollision", "severity": "page"}, "page"),
        ({"alertname": "DedupFeedQuiet", "severity": "ticket"}, "ticket"),
        ({"alertname": "SomethingElse"}, "ticket"),
    ],
)
def test_amtool_passes_the_configuration_and_its_routes(labels, receiver):
    amtool = tool("amtool")
    checked = subprocess.run(
        [amtool, "check-config", str(ALERTMANAGER)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    routed = subprocess.run(
        [amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER}",
         f"--verify.receivers={receiver}", *(f"{k}={v}" for k, v in labels.items())],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert routed.returncode == 0, routed.stdout + routed.stderr


def post(alertmanager: Alertmanager, *alerts: dict[str, str]) -> None:
    """Fire ``alerts`` (their labels) in Alertmanager, as Prometheus does (API v2)."""
    now = dt.datetime.now(dt.UTC).isoformat()
    body = json.dumps([{"labels": a, "startsAt": now} for a in alerts]).encode()
    request = urllib.request.Request(
        f"http://{alertmanager.address}/api/v2/alerts", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5):
        pass


def test_a_real_alertmanager_pages_tickets_and_inhibits(tmp_path):
    """Down pages; the stall of the same monitor is silenced, another's is not; a quiet feed
    is a ticket; a crash loop pages as restarting, not also as flapping."""
    webhook = Webhook()
    alertmanager = Alertmanager(tmp_path, for_test(webhook.url))
    try:
        alertmanager.ready()
        a, b = {"job": JOB, "instance": "a:9464"}, {"job": JOB, "instance": "b:9464"}
        post(
            alertmanager,
            {"alertname": "DedupMonitorDown", "severity": "page", **a},
            {"alertname": "DedupMonitorStalled", "severity": "page", **a},
            {"alertname": "DedupMonitorStalled", "severity": "page", **b},
            {"alertname": "DedupFeedQuiet", "severity": "ticket", **b},
            {"alertname": "DedupMonitorRestarting", "severity": "page", **b},
            {"alertname": "DedupMonitorFlapping", "severity": "page", **b},
        )
        deadline = time.monotonic() + 30
        while len(webhook.received) < 4:
            assert time.monotonic() < deadline, webhook.received
            time.sleep(0.2)
        time.sleep(2)  # what else would come, in a group_wait or two
    finally:
        alertmanager.stop()
        webhook.stop()

    def said(path: str) -> set[tuple[str, str]]:
        return {(x["labels"]["alertname"], x["labels"]["instance"]) for x in webhook.alerts(path)}

    assert said("/page") == {
        ("DedupMonitorDown", "a:9464"),
        ("DedupMonitorStalled", "b:9464"),
        ("DedupMonitorRestarting", "b:9464"),
    }
    assert said("/ticket") == {("DedupFeedQuiet", "b:9464")}


def test_a_real_prometheus_pages_a_collision_through_alertmanager(paged_day):
    raised = pd.DataFrame(paged_day.raised)
    collided = set(raised.loc[raised["kind"] == "collision", "entity"])
    paged = paged_day.webhook.alerts("/page")
    assert {a["labels"]["alertname"] for a in paged} == {"DedupCollision"}
    for alert in paged:
        assert alert["status"] == "firing"
        assert alert["labels"]["severity"] == "page"
        assert alert["labels"]["job"] == JOB
        assert alert["labels"]["entity"] in collided
        assert alert["annotations"]["runbook_url"] == f"{RUNBOOKS}/DedupCollision"
    tickets = paged_day.webhook.alerts("/ticket")
    assert not [a for a in tickets if a["labels"]["severity"] == "page"]
