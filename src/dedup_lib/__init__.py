"""Replay Azure Service Bus duplicate detection over message telemetry, on Spark.

The public API: what an analyst calls, and all that the notebooks import. The broker model the
replay is tested against is in :mod:`dedup_lib.testing`; the generator's parts (senders,
scenarios, outages) in :mod:`dedup_lib.synth`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from dedup_lib.analysis.diagnostics import (
    collision_groups,
    collisions,
    counts_over_time,
    id_pattern,
    missed_resends,
    missed_summary,
)
from dedup_lib.analysis.evidence import Evidence
from dedup_lib.analysis.reconcile import Reconciliation, reconcile
from dedup_lib.analysis.selection import narrow
from dedup_lib.analysis.summaries import (
    ground_truth_summary,
    id_quality,
    most_reused_ids,
    sends_over_time,
    summarize,
)
from dedup_lib.analysis.whatif import by_content, compare_keys, count_sweep
from dedup_lib.replay.by_count import detect_duplicates_by_count
from dedup_lib.replay.engine import detect_duplicates
from dedup_lib.replay.kernels.jvm import JvmKernelUnavailable
from dedup_lib.rules.durations import format_duration, format_window, parse_window
from dedup_lib.rules.policy import DedupPolicy
from dedup_lib.settings.load import load_entity_policies
from dedup_lib.settings.model import EntityConfigError
from dedup_lib.spark import JavaNotFoundError, get_spark
from dedup_lib.sweep.grid import configurable_window, smallest_window, window_grid
from dedup_lib.sweep.views import ReplayCache
from dedup_lib.synth import generate_telemetry
from dedup_lib.telemetry.read import LoadedTelemetry, load_telemetry
from dedup_lib.telemetry.record import AsyncRecordingSender, RecordingSender, record_sends
from dedup_lib.telemetry.samples import notebook_input, sample_path, shipped_with
from dedup_lib.telemetry.schema import BUILTIN_ALIASES, CANONICAL_COLUMNS
from dedup_lib.telemetry.write import write_telemetry
from dedup_lib.text import escape
from dedup_lib.workbench import charts, findings
from dedup_lib.workbench.explorer import WindowExplorer
from dedup_lib.workbench.incident import Incident
from dedup_lib.workbench.report import run_postmortem
from dedup_lib.workbench.sizing import WindowSizing
from dedup_lib.workbench.tables import styled

try:
    __version__ = version("dedup-lib")
except PackageNotFoundError:  # pragma: no cover - a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "BUILTIN_ALIASES",
    "CANONICAL_COLUMNS",
    "AsyncRecordingSender",
    "DedupPolicy",
    "EntityConfigError",
    "Evidence",
    "Incident",
    "JavaNotFoundError",
    "JvmKernelUnavailable",
    "LoadedTelemetry",
    "Reconciliation",
    "RecordingSender",
    "ReplayCache",
    "WindowExplorer",
    "WindowSizing",
    "__version__",
    "by_content",
    "charts",
    "collision_groups",
    "collisions",
    "compare_keys",
    "configurable_window",
    "count_sweep",
    "counts_over_time",
    "detect_duplicates",
    "detect_duplicates_by_count",
    "escape",
    "findings",
    "format_duration",
    "format_window",
    "generate_telemetry",
    "get_spark",
    "ground_truth_summary",
    "id_pattern",
    "id_quality",
    "load_entity_policies",
    "load_telemetry",
    "missed_resends",
    "missed_summary",
    "most_reused_ids",
    "narrow",
    "notebook_input",
    "parse_window",
    "reconcile",
    "record_sends",
    "run_postmortem",
    "sample_path",
    "sends_over_time",
    "shipped_with",
    "smallest_window",
    "styled",
    "summarize",
    "window_grid",
    "write_telemetry",
]
