"""synth.plan: what is decided before Spark runs: the shipped scenarios plan about the rows
asked, and the incident's crashes fall inside its outage."""

from __future__ import annotations

from dedup_lib.synth import RESTART_RESEND, day_scenario, incident_scenario, plan_telemetry


def test_day_and_incident_scenarios_plan_about_the_rows_asked() -> None:
    for scenario, rows in ((day_scenario(), 200_000), (incident_scenario(), 30_000)):
        plan = plan_telemetry(rows, 0, scenario)
        assert plan.logical_messages < rows
    incident = plan_telemetry(30_000, 0, incident_scenario())
    orders = next(p for p in incident.senders if p.sender.name == "orders-api")
    crashes = [at for cause, at, _ in orders.events if cause == RESTART_RESEND]
    outage = incident_scenario().outages[0]
    inside = [
        incident_scenario().offset(outage.start) <= at < incident_scenario().offset(outage.end)
        for at in crashes
    ]
    assert len(crashes) == 12
    assert all(inside)
