"""The Grafana dashboard the package ships for the live monitor: what Grafana's Foundation SDK
builds (tests/grafana_kit.py), a model the SDK reads back unchanged, a title and a unit on
every panel, and every query of it answered with data by a real Prometheus server (Debian's
``prometheus`` package, which .ci/run installs) that scrapes a running monitor while the day
sample lands, the variables replaced as Grafana replaces them."""

from __future__ import annotations

import itertools
import math
import re

from grafana_kit import DASHBOARD, dashboard_json, encode, queries, read, shipped
from prometheus_kit import JOB, Prometheus

#: The kit's Prometheus scrapes every second: Grafana's $__rate_interval is then at least four
#: scrapes (max($__interval + scrape interval, 4 x scrape interval)), at a 1 s step.
SCRAPE, STEP = 1, 1


def test_the_shipped_dashboard_is_what_the_kit_builds():
    assert DASHBOARD.read_text() == dashboard_json(), "run: .venv/bin/python tests/grafana_kit.py"


def test_the_sdk_reads_the_shipped_dashboard_back_unchanged():
    """Grafana's schema, as the SDK's typed model holds it: a key it does not know, or a
    panel or query of a kind it has no model for, would not come back."""
    text = DASHBOARD.read_text()
    assert encode(read(text)) == text


def test_every_panel_has_a_title_a_unit_and_queries_on_the_picked_data_source():
    board = shipped()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert list(variables) == ["datasource", "job", "instance", "entity"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    for panel in panels:
        assert panel["title"], panel
        assert panel["description"], panel["title"]
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
    for title, expr, _ in queries(board):
        assert "vector(" not in expr, f"{title}: no padding, a query says what there is"
        assert "$job" in expr, f"{title}: one scrape job's monitors"


def _escape_regex(value: str) -> str:
    """A value of a multi-value variable in a Prometheus query, as Grafana writes it
    (prometheusSpecialRegexEscape): escaped for a regex inside a PromQL string."""
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), value)


def _substitute(expr: str, values: dict[str, str], span: float) -> str:
    """A panel query as Grafana sends it: its variables replaced by ``values`` (as written in
    the query), the interval ones for a ``span``-second range at a ``STEP``-second step."""
    rate = max(STEP + SCRAPE, 4 * SCRAPE)
    replaced = (
        expr.replace("$__rate_interval", f"{rate}s").replace("$__interval", f"{STEP}s")
        .replace("$__range", f"{math.ceil(span)}s")
    )  # fmt: skip
    for name, value in values.items():
        replaced = replaced.replace(f"${name}", value)
    assert "$" not in replaced, replaced
    return replaced


def _label_values(prometheus: Prometheus, query: str, values: dict[str, str]) -> list[str]:
    """What a ``label_values(series, label)`` variable query lists, as Grafana asks for it."""
    found = re.fullmatch(r"label_values\((.+), (\w+)\)", query)
    assert found, query
    series = found.group(1).replace("$job", values.get("job", ""))
    return list(prometheus.get(f"/api/v1/label/{found.group(2)}/values", **{"match[]": series}))


def test_every_panel_query_has_data_in_a_real_prometheus(paged_day):
    prometheus, host_port = paged_day.prometheus, "{}:{}".format(*paged_day.watch.metrics_address)
    board = shipped()
    variables = {v["name"]: v["query"] for v in board["templating"]["list"]}
    start, end = paged_day.started, paged_day.ended
    answers: dict[tuple[str, str, str], int] = {}
    # The variables, each from its own query, as the dashboard lists them.
    values: dict[str, str] = {}
    jobs = _label_values(prometheus, variables["job"], values)
    assert jobs == [JOB]
    values["job"] = jobs[0]
    assert _label_values(prometheus, variables["instance"], values) == [host_port]
    values["instance"] = host_port
    entities = _label_values(prometheus, variables["entity"], values)
    # An entity with a collision, so that the firing alerts are those of the one picked.
    collided = sorted({a["entity"] for a in paged_day.firing["DedupCollision"]} & set(entities))
    assert collided, (entities, paged_day.firing["DedupCollision"])
    values["entity"] = collided[0]
    # One value picked of each list (the job's has one: no regex escaping), and All.
    everything = {
        v["name"]: v["allValue"] for v in board["templating"]["list"] if v.get("includeAll")
    }
    picks = {
        "one": {
            "job": values["job"], "instance": _escape_regex(values["instance"]),
            "entity": _escape_regex(values["entity"]),
        },
        "all": {"job": values["job"], **everything},
    }  # fmt: skip
    for (title, expr, instant), (pick, chosen) in itertools.product(queries(board), picks.items()):
        query = _substitute(expr, chosen, end - start)
        if instant:
            result = prometheus.get("/api/v1/query", query=query, time=str(end))["result"]
            points = [r["value"] for r in result]
        else:
            result = prometheus.get(
                "/api/v1/query_range", query=query, start=str(start), end=str(end),
                step=str(STEP),
            )["result"]  # fmt: skip
            points = [v for r in result for v in r["values"]]
        answers[(title, expr, pick)] = sum(not math.isnan(float(v)) for _, v in points)
    empty = [f"{title} ({pick}): {expr}" for (title, expr, pick), n in answers.items() if not n]
    assert not empty, "no data for:\n" + "\n".join(empty)
    assert len(answers) == 2 * len(queries(board))
