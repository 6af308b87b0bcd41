"""The streaming query's parts without a stream: a progress read as figures, a micro-batch's
verdicts written again replacing, never adding to, the first, and the function that writes
them loaded where ``dedup_lib`` is not installed (a Spark Connect server's Python), and the
micro-batches written looked for after the last counted; a query that failed between two
checks, its failure raised by the stop, not cleared with the query; and the query's own
session released by the stop (on Spark Connect, a clone with a channel of its own)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import sysconfig
import time

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from dedup_lib.live.executors.counts import held_in
from dedup_lib.live.executors.query import (
    SECONDS,
    Figures,
    RunningQuery,
    query_session,
    verdict_columns,
    verdict_folder,
    verdicts_writer,
    written_since,
)
from dedup_lib.live.executors.resends import copies_writer, found_writer
from dedup_lib.live.state.alerts import USED, alerts_of
from dedup_lib.spark import is_connect


def test_figures_read_a_progress():
    progress = {
        "batchId": 4,
        "numInputRows": 120,
        "stateOperators": [
            {
                "numRowsTotal": 37,
                "numRowsDroppedByWatermark": 0,
                "customMetrics": {"numExpiredTimers": 5},
            }
        ],
        "eventTime": {"watermark": "2026-11-03T20:09:00.000Z"},
    }
    assert Figures.of(progress) == Figures(4, 120, 37, 0, 5, "2026-11-03T20:09:00.000Z")
    assert verdict_folder("out", 4) == "out/batch-0000000004"


@pytest.mark.spark
def test_a_micro_batch_written_again_replaces_its_verdicts_and_alerts(spark, tmp_path):
    """Each send's content (``payload_hash``) against its original's: the duplicate of
    other content (a collision) and the rejected send are the alerts' rows, in the alerts'
    columns; the verdicts carry neither content of the original nor the flag. What the state
    gained is summed beside them, the tally row that holds no send among it, not written."""
    answered = spark.createDataFrame(
        [
            (1, "accepted", None, None, None, None, None, "a", 7, 1, 0, False),
            (2, "late", None, None, None, 1_000, None, "b", 7, 0, 0, False),
            (3, "duplicate", None, 2_000, 1, None, "a", "a", 7, 0, -2, False),
            (4, "duplicate", None, 2_000, 1, None, "a", "z", 7, 0, 0, False),
            (5, "rejected", "size", None, None, None, None, "c", 7, 0, 0, False),
            (None, None, None, None, None, None, None, None, None, -3, 1, True),
        ],
        "event_id long, verdict string, reason string, original_micros long, "
        "original_event_id long, missed_ms long, original_content string, payload_hash string, "
        "__dedup_k0 long, __dedup_held_change long, __dedup_waiting_change long, "
        "__dedup_tally boolean",
    )
    out, alerts = str(tmp_path / "out"), str(tmp_path / "alerts")
    os.makedirs(out)
    os.makedirs(alerts)
    told = []
    frame = verdict_columns(answered, "payload_hash")
    kept = [c for c in frame.columns if c in USED]
    write = verdicts_writer(out, lambda *said: told.append(said), alerts, kept)
    for _ in range(2):
        write(frame, 3)
    assert sorted(os.listdir(out)) == ["batch-0000000003"]
    assert sorted(os.listdir(alerts)) == ["batch-0000000003"]
    assert [said[:2] for said in told] == [(3, verdict_folder(out, 3))] * 2
    with open(os.path.join(verdict_folder(out, 3), SECONDS)) as seconds:
        assert float(seconds.read()) == pytest.approx(told[-1][2], abs=1e-5)
    assert held_in(verdict_folder(out, 3)) == (-2, -1)
    written = spark.read.parquet(verdict_folder(out, 3))
    assert written.count() == 5, "the tally row is no verdict"
    assert written.columns == [
        "event_id",
        "verdict",
        "reason",
        "payload_hash",
        "original_send_time",
        "original_event_id",
        "missed_watermark",
    ]
    rows = written.selectExpr("event_id", "verdict", "unix_millis(missed_watermark) AS missed")
    assert sorted(tuple(r) for r in rows.collect())[:2] == [
        (1, "accepted", None),
        (2, "late", 1_000),
    ]
    assert not glob.glob(os.path.join(out, ".*"))
    raised = alerts_of(spark.read.parquet(verdict_folder(alerts, 3)).toArrow())
    kinds = zip(raised["kind"].to_pylist(), raised["event_id"].to_pylist(), strict=True)
    assert sorted(kinds) == [
        ("collision", 4),
        ("rejected", 5),
    ]


def test_the_writer_travels_to_a_python_without_dedup_lib(tmp_path):
    """The verdicts' writer, with the copies' for the resends, and the resends' own,
    pickled as Spark Connect pickles a ``foreachBatch`` function, loaded in this
    interpreter without its ``site`` hooks (no editable ``dedup_lib``), as the cluster's."""
    from pyspark import cloudpickle

    pickled = tmp_path / "writer.pickle"
    folders = [str(tmp_path / name) for name in ("out", "alerts", "copies", "found")]
    writers = [
        verdicts_writer(folders[0], None, folders[1], ["event_id"], copies_writer(folders[2])),
        found_writer(folders[3]),
    ]
    pickled.write_bytes(cloudpickle.dumps(writers))
    load = (
        "import pickle, sys\n"
        f"write = pickle.loads(open({str(pickled)!r}, 'rb').read())\n"
        "assert all(map(callable, write))\n"
        "assert not any(m.split('.')[0] == 'dedup_lib' for m in sys.modules), 'imported'\n"
        "try:\n    import dedup_lib\nexcept ImportError:\n    print('no dedup_lib')\n"
    )
    packages = sysconfig.get_paths()["purelib"]
    env = {**os.environ, "PYTHONPATH": packages}
    done = subprocess.run(
        [sys.executable, "-S", "-c", load], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no dedup_lib"


def test_the_micro_batches_written_are_those_after_the_last_counted(tmp_path):
    out = str(tmp_path)
    for batch, seconds in ((0, "1.5"), (1, "2.25"), (2, "junk"), (4, "9")):
        os.makedirs(verdict_folder(out, batch))
        with open(os.path.join(verdict_folder(out, batch), SECONDS), "w") as took:
            took.write(seconds)
    os.makedirs(os.path.join(out, ".batch-0000000003.part"))  # being written
    assert written_since(out, 0) == [
        (1, verdict_folder(out, 1), 2.25),
        (2, verdict_folder(out, 2), 0.0),
    ]
    assert written_since(out, 2) == []  # 3 not yet there: 4 waits for it
    assert written_since(out, -1)[0] == (0, verdict_folder(out, 0), 1.5)


def _failing(spark, tmp_path):  # type: ignore[no-untyped-def]
    """A streaming query whose first micro-batch fails, once it has failed."""
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    query = (
        stream.select(F.raise_error(F.lit("the disk is full")).alias("x"))
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    deadline = time.monotonic() + 60
    while query.exception() is None:
        assert time.monotonic() < deadline, "the query did not fail"
        time.sleep(0.1)
    return query


def test_a_failure_no_check_told_is_raised_by_the_stop(spark, tmp_path):
    running = RunningQuery()
    running.query = _failing(spark, tmp_path)
    with pytest.raises(StreamingQueryException, match="the disk is full"):
        running.stop()
    assert running.query is None
    running.stop()  # stopped: nothing more to tell


def test_a_failure_a_check_told_is_not_raised_again_by_the_stop(spark, tmp_path):
    running = RunningQuery()
    running.query = _failing(spark, tmp_path)
    with pytest.raises(StreamingQueryException, match="the disk is full"):
        running.check()
    running.stop()
    assert running.query is None


@pytest.mark.connect
def test_a_stop_releases_the_query_s_own_session(spark, tmp_path):
    running = RunningQuery()
    running.session = own = query_session(spark, {})
    running.query = (
        own.readStream.format("rate").load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )  # fmt: skip
    running.stop()
    assert running.session is None
    # On Connect, its channel closed and its session on the server gone, not left to the
    # interpreter's exit; a classic one shares the context of the monitor's session.
    assert own.is_stopped if is_connect(spark) else own.range(1).count() == 1
    assert spark.range(2).count() == 2, "the monitor's own session goes on"
