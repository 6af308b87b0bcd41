"""A streaming query's start: tried again only when a Connect server's ``foreachBatch``
process was late, up to the starts given, each retry warned about; late at every start, one
error saying what to do."""

from __future__ import annotations

import pytest

from dedup_lib.errors import DedupLibWarning
from dedup_lib.spark.streaming import STARTS, WORKER_LATE, LateWorkerError, start_query


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
