"""Replay Azure Service Bus duplicate detection over message telemetry, on Spark.

The public API: what an analyst calls, and all that the notebooks import. The broker model the
replay is tested against is in :mod:`dedup_lib.testing`; the generator's parts (senders,
scenarios, outages) in :mod:`dedup_lib.synth`.

Imports are lazy (PEP 562): ``import dedup_lib`` (and so ``dedup-lib --help``) loads no Spark,
pandas, plotly or widgets; a name loads its module when it is first used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from dedup_lib.lazy import lazy_names

if TYPE_CHECKING:
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

#: Each public name, and the module that defines it.
_WHERE: dict[str, str] = {
    "collision_groups": "dedup_lib.analysis.diagnostics",
    "collisions": "dedup_lib.analysis.diagnostics",
    "counts_over_time": "dedup_lib.analysis.diagnostics",
    "id_pattern": "dedup_lib.analysis.diagnostics",
    "missed_resends": "dedup_lib.analysis.diagnostics",
    "missed_summary": "dedup_lib.analysis.diagnostics",
    "Evidence": "dedup_lib.analysis.evidence",
    "Reconciliation": "dedup_lib.analysis.reconcile",
    "reconcile": "dedup_lib.analysis.reconcile",
    "narrow": "dedup_lib.analysis.selection",
    "ground_truth_summary": "dedup_lib.analysis.summaries",
    "id_quality": "dedup_lib.analysis.summaries",
    "most_reused_ids": "dedup_lib.analysis.summaries",
    "sends_over_time": "dedup_lib.analysis.summaries",
    "summarize": "dedup_lib.analysis.summaries",
    "by_content": "dedup_lib.analysis.whatif",
    "compare_keys": "dedup_lib.analysis.whatif",
    "count_sweep": "dedup_lib.analysis.whatif",
    "detect_duplicates_by_count": "dedup_lib.replay.by_count",
    "detect_duplicates": "dedup_lib.replay.engine",
    "JvmKernelUnavailable": "dedup_lib.replay.kernels.jvm",
    "format_duration": "dedup_lib.rules.durations",
    "format_window": "dedup_lib.rules.durations",
    "parse_window": "dedup_lib.rules.durations",
    "DedupPolicy": "dedup_lib.rules.policy",
    "load_entity_policies": "dedup_lib.settings.load",
    "EntityConfigError": "dedup_lib.settings.model",
    "JavaNotFoundError": "dedup_lib.spark",
    "get_spark": "dedup_lib.spark",
    "configurable_window": "dedup_lib.sweep.grid",
    "smallest_window": "dedup_lib.sweep.grid",
    "window_grid": "dedup_lib.sweep.grid",
    "ReplayCache": "dedup_lib.sweep.views",
    "generate_telemetry": "dedup_lib.synth",
    "LoadedTelemetry": "dedup_lib.telemetry.read",
    "load_telemetry": "dedup_lib.telemetry.read",
    "AsyncRecordingSender": "dedup_lib.telemetry.record",
    "RecordingSender": "dedup_lib.telemetry.record",
    "record_sends": "dedup_lib.telemetry.record",
    "notebook_input": "dedup_lib.telemetry.samples",
    "sample_path": "dedup_lib.telemetry.samples",
    "shipped_with": "dedup_lib.telemetry.samples",
    "BUILTIN_ALIASES": "dedup_lib.telemetry.schema",
    "CANONICAL_COLUMNS": "dedup_lib.telemetry.schema",
    "write_telemetry": "dedup_lib.telemetry.write",
    "escape": "dedup_lib.text",
    "WindowExplorer": "dedup_lib.workbench.explorer",
    "Incident": "dedup_lib.workbench.incident",
    "run_postmortem": "dedup_lib.workbench.report",
    "WindowSizing": "dedup_lib.workbench.sizing",
    "styled": "dedup_lib.workbench.tables",
}
#: The public names that are modules.
_MODULES = {"charts": "dedup_lib.workbench.charts", "findings": "dedup_lib.workbench.findings"}

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


__getattr__ = lazy_names(__name__, _WHERE, _MODULES)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
