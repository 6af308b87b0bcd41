"""DataFrame helpers every layer uses: a frame to pandas, a frame hashed to partitions, an
observation's metrics where Spark kept them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dedup_lib.spark.failures import spark_errors

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame, Observation


def to_pandas(df: DataFrame) -> pd.DataFrame:
    """``df.toPandas()`` without what a Spark Connect client leaves in ``attrs`` (the plan's
    metrics, as objects): pandas writes ``attrs`` into a Parquet file's metadata as JSON, so
    ``to_parquet`` of a table returned under Connect failed."""
    table = df.toPandas()
    table.attrs.clear()
    return table


def hashed(df: DataFrame, *by: Column | str) -> DataFrame:
    """``df`` hashed by ``by`` into the session's shuffle partitions: before counting by a key
    that nearly every row has to itself (a message, an id), where Spark's partial
    aggregation within each input partition merges almost nothing and costs up to half the
    pass. The number is given, so adaptive execution does not merge the partitions into fewer
    than there are cores."""
    partitions = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)
    return df.repartition(partitions, *by)


def observed(observation: Observation) -> dict[str, Any] | None:
    """The metrics of ``observation`` once an action ran the frame it observes; None where
    Spark lost them. Adaptive execution replaces a query stage that produced no row (and
    the plan above it) with an empty relation, and the metrics of an ``observe`` inside that
    part of the plan go with it (SPARK-54620): on classic Spark ``get`` then fails on an
    empty row, on Spark Connect it says no action ran. The rows were read all the same: the
    caller counts them another way, never as none."""
    try:
        metrics = observation.get
    except spark_errors():
        return None
    return dict(metrics) or None
