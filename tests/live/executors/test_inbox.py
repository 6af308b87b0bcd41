"""Plans staged for the streaming query: one file each, in order, the first's columns kept
for every later one, and the last staged plan recorded."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest

from dedup_lib.live.executors.inbox import Inbox

pytestmark = pytest.mark.spark


def test_plans_are_one_file_each_in_order_with_the_first_columns(spark, tmp_path):
    inbox = Inbox(str(tmp_path / "executors"))
    assert inbox.staged == -1
    assert inbox.schema is None
    first = spark.createDataFrame([(1, "a"), (2, "b")], "event_id long, message_id string")
    later = spark.createDataFrame([(3, 7)], "event_id int, extra int")
    inbox.stage(0, first.repartition(2))
    inbox.stage(1, later)
    assert sorted(os.listdir(inbox.folder)) == [
        "plan-0000000000.parquet",
        "plan-0000000001.parquet",
    ]
    assert inbox.staged == 1
    assert inbox.schema == first.schema
    again = pq.read_table(inbox.file(1))
    assert again.column_names == ["event_id", "message_id"]
    assert again.to_pylist() == [{"event_id": 3, "message_id": None}]
    assert pq.read_table(inbox.file(0)).num_rows == 2
    assert os.stat(inbox.file(1)).st_mtime_ns - os.stat(inbox.file(0)).st_mtime_ns >= 1_000_000
    assert not os.listdir(os.path.join(inbox.root, "staging"))
