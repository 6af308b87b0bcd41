"""A streaming query's start: tried again only when a Connect server's ``foreachBatch``
process was late, up to the starts given, each retry warned about; late at every start, one
error saying what to do. Its stop: after the micro-batch in hand is committed."""

from __future__ import annotations

import threading
import time

import pytest

from dedup_lib.errors import DedupLibWarning
from dedup_lib.spark.streaming import (
    STARTS,
    WORKER_LATE,
    LateWorkerError,
    start_query,
    wait_for_micro_batch,
)


class _Writer:
    """A writer whose first starts fail with ``failures``, in order, then start."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.starts = 0

    def start(self) -> str:
        self.starts += 1
        if self.failures:
            raise self.failures.pop(0)
        return "query"


def _late() -> RuntimeError:
    return RuntimeError(f"{WORKER_LATE}.\n\nJVM stacktrace:\norg.apache.spark.SparkException")


def test_a_late_worker_s_start_is_tried_again_and_warned_about():
    writer = _Writer(_late())
    with pytest.warns(DedupLibWarning, match=r"tried again \(2 of 5\): Python worker failed to"):
        assert start_query(writer) == "query"
    assert writer.starts == 2


def test_a_worker_late_at_every_start_is_one_error_saying_what_to_do():
    writer = _Writer(*(_late() for _ in range(STARTS)))
    with pytest.warns(DedupLibWarning), pytest.raises(LateWorkerError) as raised:
        start_query(writer)
    assert writer.starts == STARTS
    assert str(raised.value).startswith(f"{WORKER_LATE}, {STARTS} starts in a row: the Spark")
    assert "run on classic Spark (--master)" in str(raised.value)
    assert WORKER_LATE in str(raised.value.__cause__), "chained to the server's failure"


def test_any_other_failure_is_raised_at_once():
    writer = _Writer(ValueError("no such column: send_time"), _late())
    with pytest.raises(ValueError, match="send_time"):
        start_query(writer)
    assert writer.starts == 1


def test_a_stop_waits_for_the_micro_batch_in_hand_to_be_committed(spark, tmp_path):
    """Stopped while its ``foreachBatch`` runs, the query commits that micro-batch first: the
    Spark job the function runs after its pause is not cancelled, and the checkpoint records
    the micro-batch as done (Spark's own stop, at once, cancels both)."""
    landing = tmp_path / "landing"
    spark.range(5).write.parquet(str(landing))
    started, finished = threading.Event(), []

    def write(frame, batch):
        started.set()
        time.sleep(1.5)
        finished.append((batch, frame.count()))

    checkpoint = tmp_path / "checkpoint"
    query = (
        spark.readStream.schema("id long").parquet(str(landing)).writeStream
        .foreachBatch(write).option("checkpointLocation", str(checkpoint)).start()
    )  # fmt: skip
    try:
        assert started.wait(60), query.exception()
        wait_for_micro_batch(query)
    finally:
        query.stop()
    assert finished == [(0, 5)]
    assert (checkpoint / "commits" / "0").is_file()
