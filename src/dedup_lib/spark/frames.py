"""DataFrame helpers every layer uses: a frame to pandas, a frame hashed to partitions."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame


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
