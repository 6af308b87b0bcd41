"""synth.scenario: senders and scenarios refuse settings that cannot be generated, each named
with what is wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dedup_lib.synth import Outage, Scenario, Sender, plan_telemetry

START = datetime(2026, 3, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ack_loss": 1.0}, "ack_loss 1.0 must be in [0, 1)"),
        ({"id_policy": "uuid"}, "id_policy 'uuid' is not one of"),
        ({"entities": ()}, "entities must be one or more names"),
        ({"unacked": 0}, "unacked must be at least 1"),
        ({"share": 0}, "share must be positive"),
        ({"resend_rekey_share": 0.5}, "need sessions or partition keys"),
        ({"retry_rekey_share": 2.0}, "retry_rekey_share 2.0 must be in [0, 1]"),
    ],
)
def test_bad_sender_settings_are_named(change: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"name": "s", "entities": ("q",), **change}
    with pytest.raises(
        ValueError,
        match=f"Sender 's': .*{message.replace('[', '.').replace(')', '.').replace('(', '.')}",
    ):
        Sender(**settings)  # type: ignore[arg-type]


def test_bad_scenarios_are_named() -> None:
    a = Sender("a", ("q",), kind="x")
    with pytest.raises(ValueError, match="sender names must be unique"):
        Scenario(START, timedelta(days=1), (a, a))
    with pytest.raises(ValueError, match="distinct kinds"):
        Scenario(START, timedelta(days=1), (a, Sender("b", ("q",), kind="x")))
    with pytest.raises(ValueError, match="unknown senders"):
        Scenario(
            START,
            timedelta(days=1),
            (a,),
            outages=(Outage(START, START + timedelta(hours=1), senders=("nobody",)),),
        )
    with pytest.raises(ValueError, match="rows must be at least 1"):
        plan_telemetry(0)
