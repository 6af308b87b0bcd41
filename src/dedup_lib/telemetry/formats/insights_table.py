"""The two shapes of an Application Insights export as one table of named columns: the
portal's CSV, whose columns are the frame's, and the query API's JSON response, whose rows are
positional and read by the index of their column's name, per table (see
:mod:`dedup_lib.telemetry.formats.app_insights`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import CORRUPT, INSIGHTS_NAMES, INSIGHTS_ROW, column
from dedup_lib.telemetry.formats import SOURCE_FILE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The query API's response, as Spark reads it: the tables' names, columns and rows as text.
RESPONSE = T.StructType(
    [
        T.StructField(
            "tables",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("name", T.StringType()),
                        T.StructField(
                            "columns",
                            T.ArrayType(
                                T.StructType(
                                    [
                                        T.StructField("name", T.StringType()),
                                        T.StructField("type", T.StringType()),
                                    ]
                                )
                            ),
                        ),
                        T.StructField("rows", T.ArrayType(T.ArrayType(T.StringType()))),
                    ]
                )
            ),
        ),
        T.StructField(CORRUPT, T.StringType()),
    ]
)


def normalise(name: str) -> str:
    """A column name as matched: no byte-order mark, `` [UTC]`` suffix, ``_`` or spaces, lower
    case."""
    name = re.sub(r"(?i)\s*\[utc\]\s*$", "", name.strip().lstrip("\ufeff"))
    return re.sub(r"[\s_]", "", name).lower()


def _normalised(name: Column) -> Column:
    without = F.regexp_replace(F.trim(name), r"(?i)^\x{feff}|\s*\[utc\]\s*$", "")
    return F.lower(F.regexp_replace(without, r"[\s_]", ""))


class InsightsTable:
    """The values of a raw frame's columns by normalised name: CSV columns, or the positional
    rows of a query API response (looked up per row, since each table has its own columns)."""

    def __init__(self, frame: DataFrame) -> None:
        self.frame = frame
        self.positional = INSIGHTS_ROW in frame.columns
        self.columns: dict[str, str] = {}
        if not self.positional:
            for name in frame.columns:
                if name not in (SOURCE_FILE, CORRUPT):
                    self.columns.setdefault(normalise(name), name)

    def has(self, name: str) -> Column | bool:
        """Whether the table has the column ``name`` (normalised): per row where rows are
        positional, else known before any row is read."""
        if self.positional:
            return F.array_contains(column(INSIGHTS_NAMES), name)
        return name in self.columns

    def value(self, *names: str) -> Column:
        """The first of ``names`` the table has, as text; null when it has none."""
        if self.positional:
            found: Column | None = None
            for name in names:
                cell = F.get(
                    column(INSIGHTS_ROW),
                    F.array_position(column(INSIGHTS_NAMES), name).cast("int") - 1,
                )
                condition = F.array_contains(column(INSIGHTS_NAMES), name)
                found = F.when(condition, cell) if found is None else found.when(condition, cell)
            return found if found is not None else F.lit(None).cast("string")
        for name in names:
            if name in self.columns:
                return column(self.columns[name]).cast("string")
        return F.lit(None).cast("string")


def query_rows(raw: DataFrame) -> DataFrame:
    """A query API response as one row per table row: the row's values and its table's
    normalised column names. A damaged file stays one row, with its corrupt record. Each step
    keeps only small columns beside what it explodes, so a row never carries its table."""
    tables = raw.select(
        column(SOURCE_FILE),
        column(CORRUPT),
        F.explode_outer(column("tables")).alias("__table"),
    )
    split = tables.select(
        column(SOURCE_FILE),
        column(CORRUPT),
        F.transform(F.col("__table.columns"), lambda c: _normalised(c.getField("name"))).alias(
            INSIGHTS_NAMES
        ),
        F.col("__table.rows").alias("__rows"),
    )
    rows = split.select(
        column(SOURCE_FILE),
        column(CORRUPT),
        column(INSIGHTS_NAMES),
        F.explode_outer(column("__rows")).alias(INSIGHTS_ROW),
    )
    return rows.where(column(INSIGHTS_ROW).isNotNull() | column(CORRUPT).isNotNull())
