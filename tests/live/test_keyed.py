"""KeyWatch, the live monitor's state, on each rule of SPEC sections 1 and 8, without Spark:
pyspark's TwsTester runs the processor as transformWithState would, with the watermark set
by hand."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.sql import types as T

pytest.importorskip("pyspark.sql.streaming.tws_tester")
from pyspark.sql.streaming.tws_tester import TwsTester

from dedup_lib.live.keyed import (
    ANSWER,
    DECIDED,
    GROUP,
    MISSED,
    ORIGINAL_ID,
    TIME,
    WINDOW,
    KeyWatch,
)

SCHEMA = T.StructType(
    [
        T.StructField("event_id", T.LongType()),
        T.StructField(GROUP, T.StringType()),
        T.StructField(TIME, T.LongType()),
        T.StructField(WINDOW, T.LongType()),
        T.StructField(DECIDED, T.BooleanType()),
    ]
)
S = 1_000_000  # a second, in microseconds
WINDOW_10S = 10 * S
BUCKET = ("orders", 3)


def send(event_id: int, micros: int, key: str = "m1", decided: bool = False) -> Row:
    return Row(
        **{"event_id": event_id, GROUP: key, TIME: micros, WINDOW: WINDOW_10S, DECIDED: decided}
    )


@pytest.fixture
def tester() -> TwsTester:
    # Spark's own late filter is off in the monitor (the watermark column never reaches the
    # state), so the tester's is kept off too: every row reaches the processor.
    return TwsTester(KeyWatch(SCHEMA), timeMode="EventTime", eventTimeExtractor=lambda _: 2**62)


def answers(rows: list[Row]) -> dict[int, tuple[str, int | None]]:
    return {r["event_id"]: (r[ANSWER], r[ORIGINAL_ID]) for r in rows}


def watermark_at(tester: TwsTester, micros: int) -> list[Row]:
    return tester.setWatermark(micros // 1000)


def test_sends_wait_for_the_watermark_then_go_in_time_order(tester):
    assert tester.test(BUCKET, [send(2, 5 * S), send(1, 1 * S)]) == []
    got = answers(watermark_at(tester, 6 * S))
    assert got == {1: ("accepted", None), 2: ("duplicate", 1)}


def test_the_window_is_half_open(tester):
    tester.test(BUCKET, [send(1, 0 + S), send(2, S + WINDOW_10S - 1), send(3, S + WINDOW_10S)])
    got = answers(watermark_at(tester, 20 * S))
    assert got == {1: ("accepted", None), 2: ("duplicate", 1), 3: ("accepted", None)}


def test_a_duplicate_does_not_extend_the_window(tester):
    tester.test(BUCKET, [send(1, S), send(2, 9 * S), send(3, 12 * S)])
    got = answers(watermark_at(tester, 20 * S))
    assert got[3] == ("accepted", None)


def test_ties_go_by_event_id_whatever_the_arrival(tester):
    tester.test(BUCKET, [send(9, 2 * S)])
    tester.test(BUCKET, [send(4, 2 * S)])
    got = answers(watermark_at(tester, 3 * S))
    assert got == {4: ("accepted", None), 9: ("duplicate", 4)}


def test_keys_of_one_bucket_keep_their_own_history(tester):
    tester.test(BUCKET, [send(1, S, "a"), send(2, 2 * S, "b"), send(3, 3 * S, "a")])
    got = answers(watermark_at(tester, 4 * S))
    assert got == {1: ("accepted", None), 2: ("accepted", None), 3: ("duplicate", 1)}


def test_a_late_send_is_answered_late_and_stays_out_of_the_history(tester):
    tester.test(BUCKET, [send(1, 5 * S)])
    watermark_at(tester, 6 * S)
    (late,) = tester.test(BUCKET, [send(2, 4 * S)])
    assert (late[ANSWER], late[MISSED]) == ("late", 6 * S)
    tester.test(BUCKET, [send(3, 7 * S)])
    assert answers(watermark_at(tester, 8 * S)) == {3: ("duplicate", 1)}


def test_a_send_at_the_watermark_is_late(tester):
    watermark_at(tester, 6 * S)
    (late,) = tester.test(BUCKET, [send(1, 6 * S)])
    assert late[ANSWER] == "late"


def test_decided_sends_are_answered_at_once(tester):
    (row,) = tester.test(("orders", -1), [send(1, 5 * S, key=None, decided=True)])
    assert row[ANSWER] is None
    assert row["event_id"] == 1


def test_the_state_is_dropped_when_the_window_closes(tester):
    tester.test(BUCKET, [send(1, S), send(2, 3 * S, "b")])
    watermark_at(tester, 4 * S)
    assert {a[0] for a in tester.peekListState("anchors", BUCKET)} == {"m1", "b"}
    watermark_at(tester, 12 * S)
    assert [a[0] for a in tester.peekListState("anchors", BUCKET)] == ["b"]
    watermark_at(tester, 14 * S)
    assert tester.peekListState("anchors", BUCKET) == []
    assert tester.peekListState("pending", BUCKET) == []
