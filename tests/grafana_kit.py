"""The Grafana dashboard the package ships for the live monitor, built with Grafana's own
Foundation SDK (``grafana-foundation-sdk``, in the ``test`` extra): its typed builders make
the JSON Grafana imports, so the shipped file is never edited by hand.

It lives with the tests, not in the package: the SDK is a development tool, and the shipped
JSON needs nothing to be imported. ``tests/live/test_grafana.py`` checks that the shipped file
is what :func:`dashboard_json` makes, and runs every query of it in a real Prometheus.
Rewrite the file after a change here::

    .venv/bin/python tests/grafana_kit.py
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common, stat, table, timeseries
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import common as look
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import prometheus as promql
from grafana_foundation_sdk.models import units

DASHBOARD = resources.files("dedup_lib") / "resources" / "grafana" / "dedup-monitor.json"
#: Where ``python tests/grafana_kit.py`` writes it: the checkout's copy.
SOURCE = Path(__file__).resolve().parents[1] / "src/dedup_lib/resources/grafana/dedup-monitor.json"

#: Every query runs on the data source the dashboard's first variable picks.
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
#: The series of the monitors picked: one scrape job, its instances (all, or some).
MONITOR = 'job="$job", instance=~"$instance"'
#: ... and of the entities picked.
ENTITIES = f'{MONITOR}, entity=~"$entity"'
RATE = "[$__rate_interval]"

Query = tuple[str, str]  # an expression, and its legend


def _target(expr: str, legend: str, ref: str = "A") -> prom.Dataquery:
    return prom.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE)


def _series(
    title: str, unit: str, queries: list[Query], description: str, *, width: int = 8
) -> timeseries.Panel:
    panel = (
        timeseries.Panel().title(title).description(description).unit(unit)
        .datasource(DATASOURCE).height(8).span(width)
        .legend(common.VizLegendOptions().show_legend(True)
                .display_mode(look.LegendDisplayMode.LIST).placement(look.LegendPlacement.BOTTOM))
    )  # fmt: skip
    for ref, (expr, legend) in zip("ABCDEF", queries, strict=False):
        panel = panel.with_target(_target(expr, legend, ref).range())
    return panel


def _stat(title: str, unit: str, expr: str, legend: str, description: str) -> stat.Panel:
    return (
        stat.Panel().title(title).description(description).unit(unit).decimals(0)
        .datasource(DATASOURCE).height(8).span(8)
        .graph_mode(look.BigValueGraphMode.NONE)
        .with_target(_target(expr, legend).instant())
    )  # fmt: skip


def _table(title: str, unit: str, expr: str, description: str, hide: list[str]) -> table.Panel:
    """A table of the series an instant query finds now: their labels, less ``hide``, and
    neither the time nor the value (always 1 for these)."""
    hidden = dict.fromkeys(["Time", "Value", "__name__", *hide], True)
    return (
        table.Panel().title(title).description(description).unit(unit)
        .datasource(DATASOURCE).height(8).span(8)
        .with_target(_target(expr, "").instant().format(promql.PromQueryFormat.TABLE))
        .with_transformation(model.DataTransformerConfig(
            id_val="organize", options={"excludeByName": hidden}))
    )  # fmt: skip


def _quantile(q: float) -> Query:
    buckets = f"dedup_micro_batch_duration_seconds_bucket{{{MONITOR}}}"
    return (
        f"histogram_quantile({q}, sum by (le, instance) (rate({buckets}{RATE})))",
        f"p{round(q * 100)} {{{{instance}}}}",
    )


def _rows() -> list[tuple[str, list[Builder[model.Panel]]]]:
    sends = f"dedup_sends_judged_total{{{ENTITIES}}}"
    alerts = f"dedup_alerts_total{{{ENTITIES}}}"
    quarantined = f"dedup_quarantined_rows_total{{{MONITOR}}}"
    read = f"dedup_rows_read_total{{{MONITOR}}}"
    lateness: Query = (f"dedup_lateness_seconds{{{MONITOR}}}", "lateness {{instance}}")
    return [
        ("Verdicts and alerts", [
            _series("Sends judged per second, by verdict", units.MessagesPerSecond, [
                (f"sum by (verdict) (rate({sends}{RATE}))", "{{verdict}}"),
            ], "The entities picked: accepted, duplicate (dropped by the broker), rejected, "
               "late (landed after the watermark, not judged).", width=12),
            _series("Sends judged per second, by entity", units.MessagesPerSecond, [
                (f"sum by (entity) (rate({sends}{RATE}))", "{{entity}}"),
            ], "Every verdict, by entity: (other) past the 200 entities the monitor names, "
               "(invalid) for names Service Bus refuses.", width=12),
            _series("Alerts raised per minute, by kind", units.CountsPerMinute, [
                (f"sum by (kind) (rate({alerts}{RATE})) * 60", "{{kind}}"),
            ], "collision: a different message dropped as a duplicate (data loss); resend: "
               "the same content accepted again; rejected: a send the broker refuses."),
            _stat("Alerts raised in the time range, by kind", units.Short,
                  f"sum by (kind) (increase({alerts}[$__range]))", "{{kind}}",
                  "How many alerts of each kind the monitor raised over the dashboard's "
                  "time range; the alerts file names each one."),
            _table("Firing alerts", units.NoUnit,
                   'ALERTS{alertname=~"Dedup.*", alertstate="firing", job=~"$job|", '
                   'instance=~"$instance|", entity=~"$entity|"}',
                   "The shipped alerting rules firing now (Prometheus's ALERTS series), with "
                   "their labels; those of rules that sum over every monitor have no job.",
                   ["alertstate"]),
        ]),
        ("Keeping up with the folder", [
            _series("Watermark lag", units.Seconds, [
                (f"dedup_watermark_lag_seconds{{{MONITOR}}}", "lag {{instance}}"), lateness,
            ], "How far the watermark trails the wall clock, beside the lateness it waits: "
               "the lag is about the lateness while the feed is live."),
            _series("Backlog", units.BytesIEC, [
                (f"dedup_backlog_bytes{{{MONITOR}}}", "{{instance}}"),
            ], "Bytes landed in the folder and not read yet."),
            _series("Backlog age", units.Seconds, [
                (f"dedup_backlog_age_seconds{{{MONITOR}}}", "age {{instance}}"), lateness,
            ], "How long the oldest unread bytes have waited (0: none). Above the lateness "
               "for 5 minutes, DedupMonitorTrailing pages."),
            _series("Micro-batch duration", units.Seconds, [
                _quantile(0.5), _quantile(0.9), _quantile(0.99),
            ], "Quantiles of how long each micro-batch took, from the histogram.", width=12),
            _series("Time since bytes landed, a send was judged, the folder was scanned",
                    units.Seconds, [
                (f"time() - dedup_last_landed_timestamp_seconds{{{MONITOR}}}",
                 "landed {{instance}}"),
                (f"time() - dedup_last_judged_timestamp_seconds{{{MONITOR}}}",
                 "judged {{instance}}"),
                (f"time() - dedup_last_scan_timestamp_seconds{{{MONITOR}}}",
                 "scanned {{instance}}"),
            ], "A quiet feed: bytes last landed long ago while the folder is still scanned "
               "(DedupFeedQuiet); a stalled monitor: the scan is old (DedupMonitorStalled).",
                    width=12),
        ]),
        ("The monitor", [
            _series("Up and ready", units.BoolYesNo, [
                (f"up{{{MONITOR}}}", "up {{instance}}"),
                (f"dedup_ready{{{MONITOR}}}", "ready {{instance}}"),
            ], "Prometheus scrapes it (up), and /-/ready answers 200: the state restored, "
               "the folder scanned within twice --every."),
            _stat("Restarts in the time range", units.Short,
                  f"changes(process_start_time_seconds{{{MONITOR}}}[$__range])",
                  "{{instance}}", "How often the process started again over the dashboard's "
                  "time range: 3 in 30 minutes pages (DedupMonitorRestarting)."),
            _table("Version", units.NoUnit, f"dedup_build_info{{{MONITOR}}}",
                   "What each monitor runs: dedup-lib, Python and PySpark.", ["job"]),
            _series("Resident memory", units.BytesIEC, [
                (f"process_resident_memory_bytes{{{MONITOR}}}", "{{instance}}"),
            ], "The Python process's resident memory (Spark's JVM is another process)."),
            _series("State keys and waiting sends", units.Short, [
                (f"dedup_state_keys{{{MONITOR}}}", "keys {{instance}}"),
                (f"dedup_waiting_sends{{{MONITOR}}}", "waiting {{instance}}"),
            ], "Keys held, each with its anchor; sends waiting for the watermark (with the state "
               "on the executors, as its judge counts them; neither when its checkpoint began "
               "before they were counted). Its size is the panel beside."),
            _series("State size, by store", units.BytesIEC, [
                (f"dedup_state_bytes{{{MONITOR}}}", "{{store}} {{instance}}"),
            ], "The state's bytes in memory and on disk."),
        ]),
        ("What the folder held", [
            _series("Notes about the folder, by kind", units.Short, [
                (f"sum by (kind) (increase(dedup_notes_total{{{MONITOR}}}{RATE}))", "{{kind}}"),
            ], "removed_unread, changed_after_read and rewritten: data never judged "
               "(DedupDataLost pages); unfinished: a file not whole yet, read when it is.",
                    width=6),
            _series("Quarantined rows per second, by reason", units.RowsPerSecond, [
                (f"sum by (reason) (rate({quarantined}{RATE}))", "{{reason}}"),
            ], "Rows the load refused, by reason.", width=6),
            _series("Quarantined share of rows read", units.PercentUnit, [
                (f"sum(rate({quarantined}{RATE})) / sum(rate({read}{RATE}))", "quarantined"),
            ], "Over 1 % for 15 minutes, DedupQuarantineHigh opens a ticket.", width=6),
            _series("Rows read per second", units.RowsPerSecond, [
                (f"sum(rate({read}{RATE}))", "read"),
                (f"sum(rate(dedup_records_skipped_total{{{MONITOR}}}{RATE}))",
                 "skipped (not sends)"),
            ], "Every row read from the folder, and the records among them that are not "
               "sends.", width=6),
        ]),
    ]  # fmt: skip


def _variables() -> list[Builder[model.VariableModel]]:
    def pick(name: str, label: str, query: str, *, many: bool) -> dash.QueryVariable:
        variable = (
            dash.QueryVariable(name).label(label).query(query).datasource(DATASOURCE)
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC)
        )  # fmt: skip
        if not many:
            return variable
        every = model.VariableOption(selected=True, text=["All"], value=["$__all"])
        return variable.multi(True).include_all(True).all_value(".*").current(every)

    return [
        dash.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        pick("job", "Job", "label_values(dedup_build_info, job)", many=False),
        pick("instance", "Instance", 'label_values(up{job="$job"}, instance)', many=True),
        pick("entity", "Entity", 'label_values(dedup_sends_judged_total{job="$job"}, entity)',
             many=True),
    ]  # fmt: skip


def build() -> model.Dashboard:
    """The dashboard, built by the SDK."""
    board = (
        dash.Dashboard("dedup-lib live monitor").uid("dedup-lib-live-monitor")
        .description("The live monitor's verdicts, alerts and health (dedup-lib watch "
                     "--metrics), from its Prometheus metrics.")
        .tags(["dedup-lib", "service-bus"]).editable()
        .time("now-6h", "now").refresh("30s").timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .variables(_variables())
    )  # fmt: skip
    # Expanded rows: each row, then its panels after it (panels inside a row are its
    # collapsed content, which Grafana hides).
    for title, panels in _rows():
        board = board.with_row(dash.Row(title))
        for builder in panels:
            board = board.with_panel(builder)
    built = board.build()
    for number, panel in enumerate(_panels(built), start=1):
        panel.id_val = number
    return built


def _panels(board: model.Dashboard) -> list[model.Panel | model.RowPanel]:
    found: list[model.Panel | model.RowPanel] = []
    for panel in board.panels or []:
        found.append(panel)
        if isinstance(panel, model.RowPanel):
            found.extend(panel.panels)
    return found


def encode(board: model.Dashboard) -> str:
    """The JSON text of a dashboard, as the shipped file holds it."""
    return JSONEncoder(sort_keys=True, indent=2).encode(board) + "\n"


def read(text: str) -> model.Dashboard:
    """A dashboard's JSON text in the SDK's model (each panel's options and field defaults
    in the model of its kind)."""
    register_default_plugins()
    return model.Dashboard.from_json(json.loads(text))


def dashboard_json() -> str:
    """The shipped file's text: the dashboard built, as the SDK's model reads it back (which
    gives each panel kind's own field defaults, ``custom``, their empty form)."""
    return encode(read(encode(build())))


def shipped() -> dict[str, Any]:
    """The shipped dashboard's JSON."""
    board: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return board


def queries(board: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Every panel query of a dashboard's JSON: the panel's title, the expression, and
    whether it is an instant query."""
    found = []
    for panel in board["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                found.append((inner["title"], target["expr"], bool(target.get("instant"))))
    return found


if __name__ == "__main__":
    SOURCE.parent.mkdir(parents=True, exist_ok=True)
    SOURCE.write_text(dashboard_json())
    print(f"wrote {SOURCE}")
