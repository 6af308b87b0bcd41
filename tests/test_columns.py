"""columns: what the driver computes as Spark's column functions do."""

from __future__ import annotations

from pyspark.sql import functions as F

from dedup_lib.columns import spark_xxhash64


def test_the_hash_is_sparks(spark):
    """The driver names what Spark grouped by ``xxhash64`` (files, entities) by hashing here."""
    texts = ["", "file:/tmp/a%20b.csv", 'ü#?[1]"><img>', "日本語", "x" * 1000, "12345678"]
    frame = spark.createDataFrame([(t,) for t in texts], "t string")
    hashed = dict(frame.select("t", F.xxhash64("t")).collect())
    assert {t: spark_xxhash64(t) for t in texts} == hashed
