"""Replay Azure Service Bus duplicate detection over message telemetry, on Spark.

The public API: what an analyst calls, by task, and all that the notebooks import. The rest is
in the modules that define it (``dedup_lib.analysis.summaries.ground_truth_summary``,
``dedup_lib.rules.durations.parse_window``, ...); the broker model the replay is tested against
is in :mod:`dedup_lib.testing`, the generator's parts in :mod:`dedup_lib.synth`.

Imports are lazy (PEP 562): ``import dedup_lib`` (and so ``dedup-lib --help``) loads no Spark,
pandas, plotly or widgets; a name loads its module when it is first used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from dedup_lib.lazy import lazy_names

if TYPE_CHECKING:
    from dedup_lib.analysis.diagnostics import collisions, missed_resends
    from dedup_lib.analysis.evidence import Evidence
    from dedup_lib.analysis.reconcile import reconcile
    from dedup_lib.analysis.summaries import id_quality, sends_over_time, summarize
    from dedup_lib.analysis.whatif import by_content, count_sweep
    from dedup_lib.errors import DedupLibError, DedupLibWarning
    from dedup_lib.live.landing.feed import land_in_steps
    from dedup_lib.live.options import (
        JudgeOptions,
        ReadOptions,
        ServeOptions,
        StateOptions,
        WatchOptions,
        WriteOptions,
    )
    from dedup_lib.live.watch import Watch, watch_duplicates
    from dedup_lib.recorder import record_sends
    from dedup_lib.replay.engine import detect_duplicates
    from dedup_lib.rules.policy import DedupPolicy
    from dedup_lib.settings.load import load_entity_policies
    from dedup_lib.spark import get_spark
    from dedup_lib.sweep.cache import ReplayCache
    from dedup_lib.synth import generate_telemetry
    from dedup_lib.telemetry.loader import load_telemetry
    from dedup_lib.telemetry.samples import notebook_input, sample_path, shipped_with
    from dedup_lib.text import escape
    from dedup_lib.workbench import charts, findings
    from dedup_lib.workbench.explorer import WindowExplorer
    from dedup_lib.workbench.incident import Incident
    from dedup_lib.workbench.monitor import LiveMonitor
    from dedup_lib.workbench.report import KeptExport, PostmortemOptions, run_postmortem
    from dedup_lib.workbench.sizing import WindowSizing
    from dedup_lib.workbench.style import styled

#: Each public name, and the module that defines it.
_WHERE: dict[str, str] = {
    # Start Spark, and what every error and warning of the library is
    "get_spark": "dedup_lib.spark",
    "DedupLibError": "dedup_lib.errors",
    "DedupLibWarning": "dedup_lib.errors",
    # Load telemetry
    "load_telemetry": "dedup_lib.telemetry.loader",
    "sample_path": "dedup_lib.telemetry.samples",
    "notebook_input": "dedup_lib.telemetry.samples",
    "shipped_with": "dedup_lib.telemetry.samples",
    # Replay the broker's rules
    "DedupPolicy": "dedup_lib.rules.policy",
    "detect_duplicates": "dedup_lib.replay.engine",
    "load_entity_policies": "dedup_lib.settings.load",
    # What the verdicts say
    "summarize": "dedup_lib.analysis.summaries",
    "id_quality": "dedup_lib.analysis.summaries",
    "sends_over_time": "dedup_lib.analysis.summaries",
    "missed_resends": "dedup_lib.analysis.diagnostics",
    "collisions": "dedup_lib.analysis.diagnostics",
    "Evidence": "dedup_lib.analysis.evidence",
    # Windows and what-ifs
    "ReplayCache": "dedup_lib.sweep.cache",
    "by_content": "dedup_lib.analysis.whatif",
    "count_sweep": "dedup_lib.analysis.whatif",
    # As sends land: the live monitor
    "watch_duplicates": "dedup_lib.live.watch",
    "Watch": "dedup_lib.live.watch",
    "WatchOptions": "dedup_lib.live.options",
    "ReadOptions": "dedup_lib.live.options",
    "JudgeOptions": "dedup_lib.live.options",
    "WriteOptions": "dedup_lib.live.options",
    "ServeOptions": "dedup_lib.live.options",
    "StateOptions": "dedup_lib.live.options",
    "land_in_steps": "dedup_lib.live.landing.feed",
    "LiveMonitor": "dedup_lib.workbench.monitor",
    # Against the broker
    "reconcile": "dedup_lib.analysis.reconcile",
    # The workbench's views
    "WindowExplorer": "dedup_lib.workbench.explorer",
    "WindowSizing": "dedup_lib.workbench.sizing",
    "Incident": "dedup_lib.workbench.incident",
    "styled": "dedup_lib.workbench.style",
    "escape": "dedup_lib.text",
    "run_postmortem": "dedup_lib.workbench.report",
    "PostmortemOptions": "dedup_lib.workbench.report",
    "KeptExport": "dedup_lib.workbench.report",
    # Synthetic telemetry, and recording sends
    "generate_telemetry": "dedup_lib.synth",
    "record_sends": "dedup_lib.recorder",
}
#: The public names that are modules.
_MODULES = {"charts": "dedup_lib.workbench.charts", "findings": "dedup_lib.workbench.findings"}

try:
    __version__ = version("dedup-lib")
except PackageNotFoundError:  # pragma: no cover - a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "DedupLibError",
    "DedupLibWarning",
    "DedupPolicy",
    "Evidence",
    "Incident",
    "JudgeOptions",
    "KeptExport",
    "LiveMonitor",
    "PostmortemOptions",
    "ReadOptions",
    "ReplayCache",
    "ServeOptions",
    "StateOptions",
    "Watch",
    "WatchOptions",
    "WindowExplorer",
    "WindowSizing",
    "WriteOptions",
    "__version__",
    "by_content",
    "charts",
    "collisions",
    "count_sweep",
    "detect_duplicates",
    "escape",
    "findings",
    "generate_telemetry",
    "get_spark",
    "id_quality",
    "land_in_steps",
    "load_entity_policies",
    "load_telemetry",
    "missed_resends",
    "notebook_input",
    "reconcile",
    "record_sends",
    "run_postmortem",
    "sample_path",
    "sends_over_time",
    "shipped_with",
    "styled",
    "summarize",
    "watch_duplicates",
]


__getattr__ = lazy_names(__name__, _WHERE, _MODULES)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
