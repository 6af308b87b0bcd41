"""Replay Azure Service Bus duplicate detection over message telemetry, on Spark.

The public API: notebooks and users import only these names.
"""

from __future__ import annotations

from dedup_lib.analyses import ground_truth_summary, summarize
from dedup_lib.broker import Broker, Message, Outcome, replay
from dedup_lib.engine import detect_duplicates
from dedup_lib.policy import DedupPolicy, format_window, parse_window
from dedup_lib.spark import JavaNotFoundError, check_java, get_spark
from dedup_lib.synth import (
    Outage,
    Scenario,
    Sender,
    day_scenario,
    generate_telemetry,
    incident_scenario,
)
from dedup_lib.telemetry import (
    BUILTIN_ALIASES,
    CANONICAL_COLUMNS,
    LoadedTelemetry,
    load_telemetry,
    write_telemetry,
)

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_ALIASES",
    "CANONICAL_COLUMNS",
    "Broker",
    "DedupPolicy",
    "JavaNotFoundError",
    "LoadedTelemetry",
    "Message",
    "Outage",
    "Outcome",
    "Scenario",
    "Sender",
    "__version__",
    "check_java",
    "day_scenario",
    "detect_duplicates",
    "format_window",
    "generate_telemetry",
    "get_spark",
    "ground_truth_summary",
    "incident_scenario",
    "load_telemetry",
    "parse_window",
    "replay",
    "summarize",
    "write_telemetry",
]
