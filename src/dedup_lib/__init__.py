"""Replay Azure Service Bus duplicate detection over message telemetry, on Spark.

The public API: notebooks and users import only these names.
"""

from __future__ import annotations

from dedup_lib import charts
from dedup_lib.analyses import (
    ground_truth_summary,
    id_quality,
    most_reused_ids,
    narrow,
    sends_over_time,
    summarize,
)
from dedup_lib.broker import Broker, Message, Outcome, replay
from dedup_lib.config import (
    EntityConfigError,
    EntitySettings,
    entity_policies,
    load_entity_policies,
    load_entity_settings,
)
from dedup_lib.diagnostics import (
    collision_groups,
    collisions,
    counts_over_time,
    id_pattern,
    missed_resends,
    missed_summary,
)
from dedup_lib.engine import detect_duplicates, detect_duplicates_by_count
from dedup_lib.explorer import WindowExplorer
from dedup_lib.jvm import JvmKernelUnavailable
from dedup_lib.policy import DedupPolicy, format_window, parse_window
from dedup_lib.replay_cache import ReplayCache, smallest_window, window_grid
from dedup_lib.report import run_postmortem, sample_path
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
from dedup_lib.whatif import by_content, compare_keys, count_sweep
from dedup_lib.workbench.tables import styled

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_ALIASES",
    "CANONICAL_COLUMNS",
    "Broker",
    "DedupPolicy",
    "EntityConfigError",
    "EntitySettings",
    "JavaNotFoundError",
    "JvmKernelUnavailable",
    "LoadedTelemetry",
    "Message",
    "Outage",
    "Outcome",
    "ReplayCache",
    "Scenario",
    "Sender",
    "WindowExplorer",
    "__version__",
    "by_content",
    "charts",
    "check_java",
    "collision_groups",
    "collisions",
    "compare_keys",
    "count_sweep",
    "counts_over_time",
    "day_scenario",
    "detect_duplicates",
    "detect_duplicates_by_count",
    "entity_policies",
    "format_window",
    "generate_telemetry",
    "get_spark",
    "ground_truth_summary",
    "id_pattern",
    "id_quality",
    "incident_scenario",
    "load_entity_policies",
    "load_entity_settings",
    "load_telemetry",
    "missed_resends",
    "missed_summary",
    "most_reused_ids",
    "narrow",
    "parse_window",
    "replay",
    "run_postmortem",
    "sample_path",
    "sends_over_time",
    "smallest_window",
    "styled",
    "summarize",
    "window_grid",
    "write_telemetry",
]
