"""What :func:`dedup_lib.load_telemetry` gives: the valid rows, the quarantine, the records
that are not sends, and the counts of every kind of record, per file and per reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from dedup_lib.columns import column
from dedup_lib.spark import to_pandas
from dedup_lib.telemetry.quarantine import REASON, category

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The kinds of record a load counts per file: read, then each record's fate.
KINDS = ("read", "valid", "quarantined", "skipped")


@dataclass(frozen=True)
class LoadedTelemetry:
    """Telemetry read by :func:`load_telemetry`, with every row accounted for.

    ``valid`` has the canonical columns (typed) and the other columns as read; ``quarantine``
    has every column as read plus ``reason`` and ``source_file``. ``mapping`` is the renames
    applied, source name to new name (for a structured format: the source key each column was
    read from). ``format`` is the format read, named or recognised from the content.
    ``files`` has, per data file, the records read and how many of them are valid, quarantined
    and skipped (each row counted once by its fate, a structured format's records read
    counted apart, and checked to add up when loading); ``ignored`` the hidden
    and bookkeeping entries not read, with why. ``not_sends`` has the records of a structured
    format that are not message sends (a span of another system, a send call whose messages
    are the records), with ``reason`` and ``source_file``; empty for the other formats.
    """

    valid: DataFrame
    quarantine: DataFrame
    path: str
    format: str
    mapping: dict[str, str]
    files: pd.DataFrame = field(repr=False, compare=False)
    ignored: dict[str, str] = field(default_factory=dict, compare=False)
    not_sends: DataFrame | None = field(default=None, repr=False, compare=False)
    #: Quarantined and skipped records per reason category, as counted when loading
    #: (``kind``, ``reason``, ``count``); None: counted from the frames when asked.
    reasons: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    #: What the load did to the data that the user should know, one sentence each: Parquet
    #: nanosecond timestamps (pandas' default) read as epoch nanoseconds.
    notes: tuple[str, ...] = field(default=(), compare=False)

    def counts(self) -> dict[str, int]:
        """Records read, valid, quarantined and skipped as not sends, as counted when loading."""
        return {name: int(self.files[name].sum()) for name in KINDS}

    def quarantine_reasons(self) -> pd.DataFrame:
        """Quarantined rows per reason category (the reason up to its first ':'), most first."""
        if self.reasons is not None:
            return _ordered(self.reasons, "quarantined")
        return _by_reason(self.quarantine)

    def not_send_reasons(self) -> pd.DataFrame:
        """Records skipped as not sends per reason category (``not a Service Bus span``),
        most first; empty for formats whose rows are all sends."""
        if self.reasons is not None:
            return _ordered(self.reasons, "skipped")
        if self.not_sends is None:
            return _ordered(pd.DataFrame(columns=["kind", REASON, "count"]), "skipped")
        return _by_reason(self.not_sends)


def _by_reason(frame: DataFrame) -> pd.DataFrame:
    counts: pd.DataFrame = to_pandas(frame.groupBy(category(column(REASON)).alias(REASON)).count())
    return _ordered(counts.assign(kind="any"), "any")


def _ordered(reasons: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The categories of one kind of record, with their counts, most first."""
    of_kind = reasons[reasons["kind"] == kind]
    table = pd.DataFrame(
        {
            REASON: of_kind[REASON].astype(str).to_numpy(),
            "count": of_kind["count"].astype("int64").to_numpy(),
        }
    )
    ordered = table.sort_values(["count", REASON], ascending=[False, True])
    return ordered.reset_index(drop=True)
