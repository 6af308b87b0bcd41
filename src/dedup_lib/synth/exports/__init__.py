"""Canonical telemetry written in the structured formats the loader reads (OTLP traces,
Application Insights exports, Service Bus Explorer exports): how the samples and the tests
make such files. The readers, in :mod:`dedup_lib.telemetry.formats`, only read.

- :mod:`~dedup_lib.synth.exports.otlp`: OTLP JSON Lines, as the Python SDK traces sends.
- :mod:`~dedup_lib.synth.exports.app_insights`: Application Insights dependency rows.
- :mod:`~dedup_lib.synth.exports.sb_explorer`: what a broker kept, as Service Bus Explorer
  saves messages.
- :mod:`~dedup_lib.synth.exports.single_file`: one local file written piece by piece, for the
  formats whose file is one document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dedup_lib.synth.exports.app_insights import write_app_insights
from dedup_lib.synth.exports.otlp import write_otlp
from dedup_lib.synth.exports.sb_explorer import write_sb_explorer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: A writer by the format's name (``format=`` of :func:`dedup_lib.load_telemetry`).
WRITERS: dict[str, Callable[[DataFrame, str], None]] = {
    "otlp": write_otlp,
    "app-insights": write_app_insights,
    "sb-explorer": write_sb_explorer,
}

__all__ = ["WRITERS", "write_app_insights", "write_otlp", "write_sb_explorer"]
