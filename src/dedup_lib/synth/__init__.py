"""``generate_telemetry``: message telemetry whose duplicates arise as they do in production,
labelled with what really happened.

Senders produce logical messages over a time span and send each one or more times: retries
after a lost acknowledgement (exponential back-off with jitter), resends of the last
unacknowledged messages after a crash and restart (log-normal restart delay), and operator
replays of a batch hours or days later. Each sender has an id policy (business ids, a GUID per
message, a fresh GUID per attempt, a constant or a reused id, or none), and may set sessions,
partition keys (occasionally mismatched), schedule messages and send them in batches (one
``batch_id`` per send call, retried whole).

Everything random about a row is a hash of the seed and the row's identity, computed in Spark
SQL, so the same seed gives the same rows on any number of partitions or cores. The few random
events of a whole sender (crashes, replays, bursts) are drawn in Python from a seeded
generator and joined in as a small broadcast table. No Python UDF: runs on Spark Connect too.

Ground truth columns: ``sender``, ``logical_id`` (the message the sender meant), ``attempt``
(1 for the first send, then in time order), ``cause`` (:data:`CAUSES`) and ``payload_hash``
(the same for every send of one logical message, different between messages).

The parts: :mod:`~dedup_lib.synth.scenario` (senders, outages, the shipped scenarios),
:mod:`~dedup_lib.synth.plan` (what is decided before Spark runs),
:mod:`~dedup_lib.synth.frame` (the sends, in Spark SQL) and :mod:`~dedup_lib.synth.exports`
(the sends written in the structured formats the loader reads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dedup_lib.lazy import lazy_names
from dedup_lib.synth.scenario import (
    ACK_LOST_RETRY,
    CAUSES,
    CONSTANT_ID,
    FIRST,
    ID_POLICIES,
    MALFORMED_TIMES,
    REPLAY,
    RESTART_RESEND,
    SCENARIOS,
    SYNTH_COLUMNS,
    IdPolicy,
    Outage,
    Scenario,
    Sender,
    day_scenario,
    incident_scenario,
)

if TYPE_CHECKING:
    from dedup_lib.synth.frame import generate_telemetry
    from dedup_lib.synth.plan import TelemetryPlan, plan_telemetry

#: What needs numpy or Spark, imported when first used (PEP 562): the command line lists the
#: scenarios without loading either.
_LAZY = {
    "generate_telemetry": "dedup_lib.synth.frame",
    "TelemetryPlan": "dedup_lib.synth.plan",
    "plan_telemetry": "dedup_lib.synth.plan",
}

__all__ = [
    "ACK_LOST_RETRY",
    "CAUSES",
    "CONSTANT_ID",
    "FIRST",
    "ID_POLICIES",
    "MALFORMED_TIMES",
    "REPLAY",
    "RESTART_RESEND",
    "SCENARIOS",
    "SYNTH_COLUMNS",
    "IdPolicy",
    "Outage",
    "Scenario",
    "Sender",
    "TelemetryPlan",
    "day_scenario",
    "generate_telemetry",
    "incident_scenario",
    "plan_telemetry",
]


__getattr__ = lazy_names(__name__, _LAZY)
