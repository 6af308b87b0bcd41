"""Telemetry formats with a structure of their own (OpenTelemetry traces, Application Insights
exports, Service Bus Explorer exports): each turns Spark's raw read of its files into one record
per message, in canonical column names, which :func:`dedup_lib.load_telemetry` then judges and
tallies like any other file.

A format module provides a :class:`RecordFormat`; :data:`RECORD_FORMATS` lists them by name:
:mod:`~dedup_lib.telemetry.formats.otlp` (the Collector's OTLP JSON Lines),
:mod:`~dedup_lib.telemetry.formats.app_insights` (Application Insights and Log Analytics
dependency exports, their two shapes one table by
:mod:`~dedup_lib.telemetry.formats.insights_table`) and
:mod:`~dedup_lib.telemetry.formats.sb_explorer` (Service Bus Explorer message exports).
Readers only read: the writers of these formats, for the samples and the tests, are
:mod:`dedup_lib.synth.exports`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The column naming the file each raw row and record came from, which ``records`` carries.
SOURCE_FILE = "source_file"


class RecordFormat(Protocol):
    """How one structured format is read.

    Contract of :meth:`records`: its input is :meth:`read`'s frame plus the column
    ``source_file`` (the file each raw row came from); its output has one row per record (a
    span, a table row, a message), carrying ``source_file`` over, the canonical columns it
    found (times as text, numbers or timestamps: the loader parses them), any extra columns
    worth keeping (trace and span ids, sequence numbers), :data:`NOT_SEND`, and the corrupt
    record column of the raw read when there is one (a damaged raw row becomes one record with
    it set, so that it is quarantined, not lost).
    """

    #: The name users pass as ``format=``.
    name: str
    #: What the files look like, for error messages ("OTLP JSON Lines, as the Collector's file
    #: exporter writes them").
    expected: str
    #: Canonical column -> the source key read for it unless the user maps another one.
    defaults: Mapping[str, str]

    def recognise(self, head: str) -> bool:
        """True when a file's first characters (decompressed, up to 64 KiB) are this format."""
        ...

    def read(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        """Spark's raw read of the files (already in Spark's path form)."""
        ...

    def records(
        self, raw: DataFrame, keys: Mapping[str, str], entity: str | None, *, keep: bool = False
    ) -> DataFrame:
        """One row per record. ``keys`` is :attr:`defaults` updated with the user's mapping
        (column -> source key; a column that is not canonical is carried as an extra one);
        ``entity`` is the user's: it fills the entity of records whose file does not name one,
        and never replaces a name the file gives. ``keep``: the records are built once for
        several reads (a batch load), so a format that joins what it parsed with itself keeps
        that (``localCheckpoint``, a Spark job) and parses the files once; False for a
        micro-batch or a frame of no rows."""
        ...


# The format modules import NOT_SEND from here, so they come after it.
from dedup_lib.telemetry.formats.app_insights import APP_INSIGHTS  # noqa: E402
from dedup_lib.telemetry.formats.otlp import OTLP  # noqa: E402
from dedup_lib.telemetry.formats.sb_explorer import SB_EXPLORER  # noqa: E402

#: The structured formats by name, in the order content is recognised (``RECORD_FORMAT_NAMES``).
RECORD_FORMATS: dict[str, RecordFormat] = {f.name: f for f in (OTLP, APP_INSIGHTS, SB_EXPLORER)}
