"""The broker model, message at a time: the oracle the Spark replay is tested against.

Plain Python and slow on purpose (:mod:`dedup_lib.rules.broker`); for checking a replay on a
few thousand hand-made sends, not for telemetry.
"""

from __future__ import annotations

from dedup_lib.rules.broker import (
    Broker,
    Message,
    Outcome,
    arrival_order,
    broker_outcomes,
    send_calls,
)

__all__ = ["Broker", "Message", "Outcome", "arrival_order", "broker_outcomes", "send_calls"]
