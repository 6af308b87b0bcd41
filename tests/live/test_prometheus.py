"""The alert rules the package ships (the template ``dedup-lib rules`` writes for a job),
tested by promtool, each alert with its runbook, and run by a real Prometheus server
(Debian's ``prometheus`` package, which .ci/run installs) that scrapes a running monitor while
the day sample lands: the collision alert fires, the stall alert does not, and what
Prometheus holds equals the alerts file."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from dedup_lib.cli import rules as rules_command
from prometheus_kit import (
    RESOURCES,
    RULES,
    tool,
)

ROOT = Path(__file__).resolve().parents[2]
RULE_TESTS = ROOT / "tests" / "prometheus" / "dedup-rules-test.yml"
RUNBOOKS = ROOT / "docs" / "runbooks"


def shipped_alerts() -> dict[str, dict]:
    """The template's alerting rules, by alert name."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}


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
    """The promtool tests load the template, which is what ``dedup-lib rules`` writes with its
    defaults; every alert is tested firing and not firing."""
    tests = yaml.safe_load(RULE_TESTS.read_text())
    (shipped,) = tests["rule_files"]
    assert (RULE_TESTS.parent / shipped).resolve() == Path(str(RULES)).resolve()
    assert rules_command.rules_for("dedup-lib", rules_command.DEFAULT_RUNBOOK_URL) == (
        yaml.safe_load(RULES.read_text())
    )
    cases = [t for case in tests["tests"] for t in case["alert_rule_test"]]
    fired = {t["alertname"] for t in cases if t.get("exp_alerts")}
    quiet = {t["alertname"] for t in cases if not t.get("exp_alerts")}
    assert set(shipped_alerts()) == fired == quiet, "every alert is tested firing and not"


def test_every_alert_has_a_severity_and_links_its_runbook():
    """Each alert pages or makes a ticket, and links ``BASE/AlertName``: a runbook shipped in
    the package (resources/runbooks/AlertName.md), whose page on the documentation site
    (docs/runbooks/AlertName.md) includes that file, listed in the runbooks' index."""
    index = (RUNBOOKS / "index.md").read_text()
    packaged = RESOURCES / "runbooks"
    for name, rule in shipped_alerts().items():
        assert rule["labels"]["severity"] in ("page", "ticket"), name
        url = f"{rules_command.DEFAULT_RUNBOOK_URL}/{name}"
        assert rule["annotations"]["runbook_url"] == url
        runbook = (packaged / f"{name}.md").read_text()
        assert runbook.startswith(f"# {name}\n"), name
        for section in ("What it means", "What to check first", "How to fix"):
            assert f"\n## {section}\n" in runbook, (name, section)
        page = (RUNBOOKS / f"{name}.md").read_text()
        include = f"../../src/dedup_lib/resources/runbooks/{name}.md"
        assert f"```{{include}} {include}\n```" in page, name
        assert (RUNBOOKS / include).resolve() == Path(str(packaged / f"{name}.md")).resolve()
        assert re.search(rf"^{name}$", index, re.MULTILINE), f"{name} is not in the index"
    listed = {p.stem for p in RUNBOOKS.glob("Dedup*.md")}
    shipped = {p.name.removesuffix(".md") for p in packaged.iterdir() if p.name.endswith(".md")}
    assert listed == shipped == set(shipped_alerts()), "a runbook per alert, no other"


def test_a_real_prometheus_pages_on_collisions_and_not_on_a_stall(paged_day):
    query = 'sum(dedup_alerts_total{kind="collision"})'
    collisions = paged_day.prometheus.value(query, at=paged_day.ended)
    raised = pd.DataFrame(paged_day.raised)
    assert collisions == (raised["kind"] == "collision").sum() > 0
    entities = {labels["entity"] for labels in paged_day.firing["DedupCollision"]}
    assert entities == set(raised.loc[raised["kind"] == "collision", "entity"])
    assert "DedupMonitorStalled" not in paged_day.firing
    assert "DedupMonitorDown" not in paged_day.firing
