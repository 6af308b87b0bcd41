"""resend_alerts across micro-batches: a resend pairs with the last accepted copy of its
content before it, however many micro-batches between them had no accepted send (the watch
calls it only on those with one), and the table carried forward keeps only what the horizon
can still reach."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
from pyspark.sql import types as T

from dedup_lib.live.keyed import CONTENT
from dedup_lib.live.resends import resend_alerts

SCHEMA = T.StructType(
    [
        T.StructField("entity", T.StringType()),
        T.StructField("message_id", T.StringType()),
        T.StructField("send_time", T.TimestampType()),
        T.StructField("event_id", T.LongType()),
        T.StructField("verdict", T.StringType()),
        T.StructField("dedup_key", T.StringType()),
        T.StructField(CONTENT, T.StringType()),
    ]
)
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)


def micros(at: datetime) -> int:
    return int((at - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))


def batch(spark, rows: list[tuple[str, datetime, int, str]]):
    """Verdicts of one micro-batch: (content, send time, event id, verdict), on orders."""
    data = [("orders", f"m{e}", t, e, v, f"m{e}", c) for c, t, e, v in rows]
    return spark.createDataFrame(data, SCHEMA)


def test_a_resend_pairs_across_batches_without_accepted_sends_and_old_contents_go(spark, tmp_path):
    folder = str(tmp_path / "resends")
    first = [("old", T0, 1, "accepted"), ("a", T0 + 50 * MINUTE, 2, "accepted")]
    alerts = resend_alerts(batch(spark, first), folder, 0, HOUR, micros(T0 + 50 * MINUTE))
    assert alerts.count() == 0
    # micro-batches 1 and 2 judged only duplicates: no call, no table
    later = [("a", T0 + 80 * MINUTE, 3, "accepted")]
    found = resend_alerts(batch(spark, later), folder, 3, HOUR, micros(T0 + 80 * MINUTE))
    got = found.toPandas()
    assert got[["kind", "event_id", "original_event_id"]].to_dict("records") == [
        {"kind": "resend", "event_id": 3, "original_event_id": 2}
    ]
    assert "1,800.000 s before (MessageId m2)" in got["why"][0]
    carried = pd.read_parquet(tmp_path / "resends" / f"{3:010d}")
    # "old" was accepted 80 minutes before the latest send: beyond the hour, not carried
    assert sorted(carried[CONTENT]) == ["a"]
    assert carried["event_id"].tolist() == [3]
