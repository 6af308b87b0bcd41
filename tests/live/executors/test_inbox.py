"""Plans staged for the streaming query: one file each, in order, the first's columns kept
for every later one, each row carrying the latest send time before its plan and with it, and
the last staged plan recorded."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from dedup_lib.columns import SEND_MICROS
from dedup_lib.live.executors.inbox import Inbox
from dedup_lib.live.executors.processor import SEEN_AFTER, SEEN_BEFORE, SPLIT_BYTES, STATE_SETTINGS

SPLIT = "spark.sql.files.maxPartitionBytes"

pytestmark = pytest.mark.spark


def test_plans_are_one_file_each_in_order_with_the_first_columns(spark, tmp_path):
    inbox = Inbox(str(tmp_path / "executors"))
    assert inbox.staged == -1
    assert inbox.schema is None
    first = spark.createDataFrame(
        [(1, "a", 50), (2, "b", 90)], f"event_id long, message_id string, {SEND_MICROS} long"
    )
    later = spark.createDataFrame([(3, 7, 60)], f"event_id int, extra int, {SEND_MICROS} long")
    inbox.stage(0, first.repartition(2))
    inbox.stage(1, later)
    assert sorted(os.listdir(inbox.folder)) == [
        "plan-0000000000.parquet",
        "plan-0000000001.parquet",
    ]
    assert inbox.staged == 1
    columns = ["event_id", "message_id", SEND_MICROS, SEEN_BEFORE, SEEN_AFTER]
    assert inbox.schema is not None
    assert inbox.schema.fieldNames() == columns
    again = pq.read_table(inbox.file(1))
    assert again.column_names == columns
    # the latest before plan 1 is plan 0's (90); with it, still 90: plan 1's 60 is earlier
    assert again.to_pylist() == [dict(zip(columns, (3, None, 60, 90, 90), strict=True))]
    meta = pq.ParquetFile(inbox.file(0)).metadata.row_group(0)
    encodings = {e for i in range(meta.num_columns) for e in meta.column(i).encodings}
    assert not any("DICTIONARY" in e for e in encodings), encodings  # WRITE_OPTIONS
    first_file = pq.read_table(inbox.file(0)).to_pylist()
    assert [(r[SEEN_BEFORE], r[SEEN_AFTER]) for r in first_file] == [(None, 90)] * 2
    assert os.stat(inbox.file(1)).st_mtime_ns - os.stat(inbox.file(0)).st_mtime_ns >= 1_000_000
    assert not os.listdir(os.path.join(inbox.root, "staging"))


def test_a_plan_is_written_in_row_groups_the_query_reads_apart(spark, tmp_path):
    """A staged file larger than SPLIT_BYTES holds several row groups, and the query's
    settings read it as as many tasks: its sends reach the state store from every core."""
    inbox = Inbox(str(tmp_path / "executors"))
    wide = spark.range(240_000).select(
        F.col("id").alias("event_id"),
        F.sha2(F.col("id").cast("string"), 256).alias("message_id"),
        F.sha2(F.col("id").cast("string"), 512).alias("payload_hash"),
        F.col("id").alias(SEND_MICROS),
    )
    path = inbox.stage(0, wide)
    size, groups = os.path.getsize(path), pq.ParquetFile(path).metadata.num_row_groups
    assert size > 2 * SPLIT_BYTES, size
    assert groups >= size // SPLIT_BYTES >= 2, (size, groups)
    session = spark.newSession()
    session.conf.set(SPLIT, STATE_SETTINGS[SPLIT])
    tasks = session.read.parquet(path).select(F.spark_partition_id().alias("task"))
    assert tasks.distinct().count() == groups
