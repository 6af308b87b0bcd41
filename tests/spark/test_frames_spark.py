"""spark.frames: DataFrame helpers on classic and Connect: rows hashed into the session's
shuffle partitions, pandas tables that write to Parquet."""

from __future__ import annotations

import pytest

from codegen_kit import configured


@pytest.mark.connect
@pytest.mark.usefixtures("spread_keys")
def test_hashed_keeps_every_row_in_the_sessions_shuffle_partitions(spark):
    """Hashed by a key before counting by it: every row kept, each key in one partition, and
    as many partitions as the session shuffles to, even where adaptive execution would merge
    a repartition of so few rows into one."""
    from pyspark.sql import functions as F

    from dedup_lib.spark import hashed

    rows = spark.range(2_000).select((F.col("id") % 500).alias("k"))
    where = F.spark_partition_id().alias("p")
    with configured(spark, {"spark.sql.adaptive.enabled": "true"}):
        placed = hashed(rows, "k").select("k", where).toPandas()
        merged = rows.repartition("k").select(where).distinct().count()
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert len(placed) == 2_000
    assert placed.groupby("k")["p"].nunique().max() == 1
    assert placed["p"].nunique() == partitions > merged


@pytest.mark.connect
def test_to_pandas_tables_write_to_parquet_on_classic_and_connect(spark, tmp_path):
    """A Spark Connect client leaves the plan's metrics in ``attrs``, which pandas writes as
    JSON into Parquet metadata: a table from the library must write as any other."""
    import pandas as pd
    from pyspark.sql import functions as F

    from dedup_lib.analysis.summaries import summarize
    from dedup_lib.spark import to_pandas

    table = to_pandas(spark.range(3).select(F.col("id").alias("n")))
    assert table.attrs == {}
    table.to_parquet(tmp_path / "n.parquet")
    assert pd.read_parquet(tmp_path / "n.parquet")["n"].tolist() == [0, 1, 2]

    verdicts = spark.createDataFrame(
        [("orders", "accepted", None)], "entity string, verdict string, reason string"
    )
    summarize(verdicts).to_parquet(tmp_path / "summary.parquet")


@pytest.mark.connect
def test_observed_metrics_are_none_where_spark_lost_them(spark):
    """Adaptive execution replaces a shuffle stage that produced no row, and the ``observe``
    below it, with an empty relation: the metrics of its rows, all read and filtered out,
    are lost, and ``observed`` says so (None) on classic and Connect rather than failing or
    answering zero; a stage that keeps a row keeps them."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from dedup_lib.spark import observed

    def counted(keep: int) -> dict | None:
        seen = Observation("rows")
        rows = spark.range(5).observe(seen, F.count(F.lit(1)).alias("read"))
        kept = rows.where(F.col("id") < keep).repartition(2, "id").groupBy("id").count()
        with configured(spark, {"spark.sql.adaptive.enabled": "true"}):
            kept.write.format("noop").mode("overwrite").save()
        return observed(seen)

    assert counted(1) == {"read": 5}
    assert counted(0) is None
