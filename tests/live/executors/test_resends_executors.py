"""The resends' query with the state on the executors: the judge's micro-batches' accepted
copies, written as its ``foreachBatch`` writes them, paired as the driver's ``Resends`` pairs
the same micro-batches (across micro-batches, a copy kept after the next one's first, the
horizon's edge, ties in time), once each across a restart; a copy file written once; a start
that fails releases the query's session."""

from __future__ import annotations

import os
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_lib.columns import C0, C1, KEYED_CONTENT, SEND_MICROS
from dedup_lib.live.executors import query as query_module
from dedup_lib.live.executors import resends as resends_module
from dedup_lib.live.executors.processor import load
from dedup_lib.live.executors.query import COPY
from dedup_lib.live.executors.resends import (
    BATCH,
    COPY_COLUMNS,
    ResendsQuery,
    copies_writer,
    found_alerts,
)
from dedup_lib.live.state.resends import Resends
from dedup_lib.live.state.store import KeyedState

pytestmark = pytest.mark.spark

MINUTE = 60_000_000
#: The judge's lateness covers the minutes below: every send it accepts is after its
#: watermark, which the second query's trails.
HOUR, LATENESS = timedelta(hours=1), timedelta(hours=6)
#: The judge's micro-batches: (content, minute, event id), all accepted. "b" at minute 300
#: is accepted before "b" at 280 (a send the rules decided at once): 280 pairs with nothing
#: and 300 not with it, as the driver pairs micro-batch by micro-batch; "c" ties in time,
#: paired by event id; "a" at 121 is past the hour of 60.
BATCHES = [
    [("a", 0, 1), ("a", 30, 2), ("b", 300, 3), ("c", 10, 5), ("c", 10, 4)],
    [],
    [("a", 60, 6), ("b", 280, 7), ("c", 20, 8)],
    [("a", 121, 9), ("a", 122, 10), ("b", 310, 11)],
]


def _table(rows: list[tuple[str, int, int]]) -> pa.Table:
    """The accepted sends of ``rows``, with the columns of both the driver's verdicts and
    the copies the judge writes."""
    micros = [m * MINUTE for _, m, _ in rows]
    return pa.table(
        {
            C0: pa.array([ord(c) for c, _, _ in rows], pa.int64()),
            C1: pa.array([1] * len(rows), pa.int64()),
            SEND_MICROS: pa.array(micros, pa.int64()),
            "event_id": pa.array([e for *_, e in rows], pa.int64()),
            "message_id": [f"m{e}" for *_, e in rows],
            "entity": ["orders"] * len(rows),
            "dedup_key": [f"m{e}" for *_, e in rows],
            "send_time": pa.array(micros, pa.timestamp("us", tz="UTC")),
            "verdict": ["accepted"] * len(rows),
            KEYED_CONTENT: [c for c, _, _ in rows],
        }
    )


def _driver(tmp_path) -> set[tuple[int, int]]:
    """The driver's resends over :data:`BATCHES`: (event id, original's event id)."""
    resends = Resends(KeyedState(str(tmp_path / "driver")), HOUR)
    found: set[tuple[int, int]] = set()
    for batch, rows in enumerate(BATCHES):
        alerts = resends.alerts(batch, _table(rows), None).to_pylist()
        found |= {(int(a["event_id"]), int(a["original_event_id"])) for a in alerts}
    return found


def _land(inbox, batch: int, rows: list[tuple[str, int, int]]) -> None:
    """Micro-batch ``batch``'s copies as the judge writes them (none: no file)."""
    if rows:
        table = _table(rows).select(list(COPY_COLUMNS))
        table = table.append_column(BATCH, pa.array([batch] * len(rows), pa.int64()))
        pq.write_table(table, os.path.join(inbox, f"batch-{batch:010d}.parquet"))


def _found(spark, query: ResendsQuery) -> list[tuple[int, int]]:
    """The resends the query wrote, as (event id, original's event id), then removed."""
    found = []
    for batch, folder in query.written():
        alerts = found_alerts(spark, folder).to_pylist()
        found += [(int(a["event_id"]), int(a["original_event_id"])) for a in alerts]
        query.forget(batch)
    return found


def test_the_resends_are_the_driver_s_once_each_across_a_restart(spark, tmp_path):
    load(spark)
    want = _driver(tmp_path)
    assert want == {(2, 1), (5, 4), (6, 2), (8, 5), (10, 9), (11, 3)}
    schema = spark.createDataFrame(_table([("a", 0, 1)]).select(list(COPY_COLUMNS))).schema
    root = str(tmp_path / "executors")
    query = ResendsQuery(spark, root, schema, HOUR, LATENESS, trigger="0.2 seconds")
    for batch in (0, 1, 2):
        _land(query.inbox, batch, BATCHES[batch])
    query.settle()
    found = _found(spark, query)
    query.stop()
    again = ResendsQuery(spark, root, schema, HOUR, LATENESS, trigger="0.2 seconds")
    _land(again.inbox, 3, BATCHES[3])
    again.settle()
    found += _found(spark, again)
    again.stop()
    assert sorted(found) == sorted(want), "each resend once, paired as the driver pairs it"
    # each file read is deleted once the micro-batch after the one that read it commits
    assert set(os.listdir(again.inbox)) <= {"batch-0000000003.parquet"}


def test_a_micro_batch_s_copies_are_written_once(spark, tmp_path):
    inbox = str(tmp_path / "inbox")
    os.makedirs(inbox)
    sends = spark.createDataFrame(_table([("a", 0, 1), ("b", 1, 2)]).to_pandas())
    from pyspark.sql import functions as F

    answered = sends.withColumn(COPY, F.col("event_id") == 2)
    write = copies_writer(inbox)
    write(answered, 7)
    path = os.path.join(inbox, "batch-0000000007.parquet")
    first = os.path.getmtime(path)
    written = pq.read_table(path)
    assert written.column_names == [*COPY_COLUMNS, BATCH]
    assert written.to_pydict()["event_id"] == [2]
    assert written.to_pydict()[BATCH] == [7]
    write(answered.withColumn(COPY, F.lit(True)), 7)  # the same micro-batch run again
    assert os.path.getmtime(path) == first
    assert pq.read_table(path).num_rows == 1
    write(answered, 8)
    assert os.path.getmtime(os.path.join(inbox, "batch-0000000008.parquet")) > first
    assert sorted(os.listdir(inbox)) == ["batch-0000000007.parquet", "batch-0000000008.parquet"]


def test_a_copy_past_its_horizon_is_let_go_by_its_bucket_s_sweep(spark, tmp_path):
    """Each bucket's one timer sweeps it: once the watermark passes a copy's horizon, the
    copy leaves the state store (read by Spark's state reader); a copy within it stays and
    still pairs."""
    load(spark)
    schema = spark.createDataFrame(_table([("a", 0, 1)]).select(list(COPY_COLUMNS))).schema
    root = str(tmp_path / "executors")
    minute = timedelta(minutes=1)
    query = ResendsQuery(spark, root, schema, HOUR, minute, trigger="0.2 seconds")
    landed = [[("a", 0, 1), ("a", 30, 2)], [("b", 200, 3)], [("c", 400, 4), ("b", 430, 5)]]
    for batch, rows in enumerate(landed):
        _land(query.inbox, batch, rows)
        query.settle()
    found = _found(spark, query)
    query.stop()
    assert sorted(found) == [(2, 1)], "b at 430 is past the hour of b at 200"
    state = spark.read.format("statestore").option("stateVarName", "copies")
    held = state.load(os.path.join(root, "resends", "spark")).toPandas()
    times = sorted(v["micros"] // MINUTE for v in held["user_map_value"])
    assert times == [400, 430], "a's and b's first copies let go, once the watermark is 429"


def test_a_start_that_fails_releases_the_query_s_session(spark, tmp_path, monkeypatch):
    def late(writer):  # type: ignore[no-untyped-def]
        raise RuntimeError("Python worker failed to connect back.")

    released = []
    monkeypatch.setattr(resends_module, "start_query", late)
    monkeypatch.setattr(query_module, "release_session", released.append)
    schema = spark.createDataFrame(_table([("a", 0, 1)]).select(list(COPY_COLUMNS))).schema
    with pytest.raises(RuntimeError, match="connect back"):
        ResendsQuery(spark, str(tmp_path / "executors"), schema, HOUR, LATENESS)
    assert len(released) == 1
    assert released[0] is not spark, "the query's own session, not the monitor's"
