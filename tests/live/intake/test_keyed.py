"""live.intake.keyed: what the driver adds to the keyed sends Spark brings it: the send's time
in microseconds, the one window where every entity has it, the content where it is a text
column of the sends. The keying itself runs in Spark: tests/live/test_watch.py replays the
batch's verdicts through it. No Spark here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pyarrow as pa

from dedup_lib.columns import KEYED_CONTENT, SEND_MICROS, WINDOW
from dedup_lib.live.intake.keyed import MONITOR_COLUMNS, Keyed

AT = datetime(2026, 12, 1, 19, 33, 0, 250_000, tzinfo=UTC)
SENT = pa.table({"send_time": pa.array([AT], pa.timestamp("us", tz="UTC")), "body": ["hello"]})


def test_the_driver_adds_the_time_the_window_and_the_content() -> None:
    keyed = Keyed(cast(Any, None), window=600_000_000, content_of="body")
    table = keyed.completed(SENT)
    assert table[SEND_MICROS].to_pylist() == [int(AT.timestamp()) * 1_000_000 + 250_000]
    assert table[WINDOW].to_pylist() == [600_000_000]
    assert table[KEYED_CONTENT].to_pylist() == ["hello"]
    assert {SEND_MICROS, WINDOW, KEYED_CONTENT} <= set(MONITOR_COLUMNS)


def test_a_window_per_entity_and_content_spark_made_are_spark_s() -> None:
    table = Keyed(cast(Any, None), window=None, content_of=None).completed(SENT)
    assert table.column_names == ["send_time", "body", SEND_MICROS]
