"""live.intake.micro_batch: the driver's side of a micro-batch's Spark pass: the rows Spark
brought split into valid sends and quarantined rows (each with the columns as read where typing
changed them), and refused if they are not the rows counted. The pass itself runs in Spark:
tests/live/test_watch.py and tests/cli/test_watch_cli.py run it. No Spark here."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dedup_lib.columns import QUARANTINED, VALID
from dedup_lib.errors import DedupLibError
from dedup_lib.live.intake.micro_batch import _split
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.quarantine import REASON

ORDER = ["message_id", "send_time"]
ROWS = pa.table(
    {
        "message_id": ["a", "b", None],
        "send_time": pa.array([1, None, 3], pa.int64()),
        SOURCE_FILE: ["f.csv"] * 3,
        VALID: [True, False, None],
        QUARANTINED + "send_time": [None, "yesterday", "3"],
        QUARANTINED + REASON: [None, "send_time unreadable", "message_id missing"],
        "verdict": [None, None, None],
    }
)


def test_valid_sends_and_quarantined_rows_go_apart() -> None:
    counts = {"read": 4, "valid": 1, "quarantined": 2, "skipped": 1}
    intake = _split(ROWS, counts, ORDER)
    assert intake.sends.column_names == ["message_id", "send_time", SOURCE_FILE, "verdict"]
    assert intake.sends["message_id"].to_pylist() == ["a"]
    assert intake.quarantine.column_names == [*ORDER, REASON, SOURCE_FILE]
    assert intake.quarantine.to_pydict() == {
        "message_id": ["b", None],
        "send_time": ["yesterday", "3"],
        REASON: ["send_time unreadable", "message_id missing"],
        SOURCE_FILE: ["f.csv", "f.csv"],
    }
    assert intake.counts == counts


def test_rows_that_are_not_the_rows_counted_are_refused() -> None:
    counts = {"read": 5, "valid": 2, "quarantined": 2, "skipped": 1}
    with pytest.raises(DedupLibError, match="rows would be lost in the micro-batch"):
        _split(ROWS, counts, ORDER)
