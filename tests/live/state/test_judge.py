"""judge, the monitor's walk of one micro-batch, on each rule of docs/rules.md sections 1 and
8, without Spark: keyed sends built by hand, micro-batch after micro-batch, the watermark
moved by the sends themselves (the latest send time seen minus the lateness)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dedup_lib.columns import DECIDED, K0, K1, KEYED_CONTENT, ORIGINAL_CONTENT, SEND_MICROS, WINDOW
from dedup_lib.live.state.judge import Clock, judge
from dedup_lib.live.state.store import KeyedState

S = 1_000_000  # a second, in microseconds
WINDOW_10S = 10 * S
LATENESS_MS = 2_000
KEYS = {"a": 1, "b": 2, "c": 3, "clock": 99}


def sends(*rows: tuple, content: bool = False) -> pa.Table:
    """(event id, micros, key) or (event id, micros, key, decided or content)."""
    ids, times, keys, decided, contents = [], [], [], [], []
    for row in rows:
        ids.append(row[0])
        times.append(row[1])
        keys.append(row[2])
        extra = row[3] if len(row) > 3 else None
        decided.append(extra is True)
        contents.append(extra if isinstance(extra, str) else None)
    columns = {
        "event_id": pa.array(ids, pa.int64()),
        "send_time": pa.array(times, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        SEND_MICROS: pa.array(times, pa.int64()),
        WINDOW: pa.array([WINDOW_10S] * len(ids), pa.int64()),
        DECIDED: pa.array(decided, pa.bool_()),
        K0: pa.array(
            [None if d else KEYS[k] for k, d in zip(keys, decided, strict=True)], pa.int64()
        ),
        K1: pa.array([None if d else 7 for d in decided], pa.int64()),
        "verdict": pa.array(["accepted" if d else None for d in decided], pa.string()),
        "reason": pa.nulls(len(ids), pa.string()),
        "dedup_key": pa.array(
            [None if d else k for k, d in zip(keys, decided, strict=True)], pa.string()
        ),
    }
    if content:
        columns[KEYED_CONTENT] = pa.array(contents, pa.string())
    return pa.table(columns)


class Monitor:
    """judge, micro-batch after micro-batch, with its state in a folder."""

    def __init__(self, folder, content: bool = False) -> None:
        self.state = KeyedState(str(folder))
        self.clock = Clock(LATENESS_MS)
        self.pending = sends(content=content).slice(0, 0)
        self.batch = 0
        self.content = content

    def land(self, *rows: tuple) -> dict[int, dict]:
        judged = judge(
            self.batch, sends(*rows, content=self.content), self.pending, self.clock, self.state
        )
        self.batch += 1
        self.pending, self.clock = judged.pending, judged.clock
        return {r["event_id"]: r for r in judged.answered.to_pylist()}

    def at(self, micros: int) -> dict[int, dict]:
        """Move the watermark to ``micros`` with a send of a key of its own."""
        got = self.land((-self.batch - 1, micros + LATENESS_MS * 1000, "clock"))
        return {e: r for e, r in got.items() if e >= 0}


def verdicts(answered: dict[int, dict]) -> dict[int, tuple]:
    return {e: (r["verdict"], r["original_event_id"]) for e, r in answered.items()}


@pytest.fixture
def monitor(tmp_path):
    return Monitor(tmp_path)


def test_sends_wait_for_the_watermark_then_go_in_time_order(monitor):
    assert monitor.land((2, 5 * S, "a"), (1, 4 * S, "a")) == {}
    assert verdicts(monitor.at(6 * S)) == {1: ("accepted", None), 2: ("duplicate", 1)}


def test_a_micro_batch_judges_what_its_own_sends_moved_the_watermark_past(monitor):
    got = monitor.land((1, 1 * S, "a"), (2, 4 * S, "a"), (3, 9 * S, "b"))
    assert verdicts(got) == {1: ("accepted", None), 2: ("duplicate", 1)}


def test_the_window_is_half_open(monitor):
    got = monitor.land((1, S, "a"), (2, S + WINDOW_10S - 1, "a"), (3, S + WINDOW_10S, "a"))
    got = verdicts({**got, **monitor.at(20 * S)})
    assert got == {1: ("accepted", None), 2: ("duplicate", 1), 3: ("accepted", None)}


def test_a_duplicate_does_not_extend_the_window(monitor):
    got = monitor.land((1, S, "a"), (2, 9 * S, "a"), (3, 12 * S, "a"))
    assert verdicts({**got, **monitor.at(20 * S)})[3] == ("accepted", None)


def test_an_anchor_from_an_earlier_micro_batch_catches_and_its_row_is_given(monitor):
    monitor.land((1, S, "a"))
    assert verdicts(monitor.at(2 * S)) == {1: ("accepted", None)}
    got = {**monitor.land((2, 5 * S, "a"), (3, 12 * S, "a")), **monitor.at(13 * S)}
    got = {e: r for e, r in got.items() if e > 0}
    assert verdicts(got) == {2: ("duplicate", 1), 3: ("accepted", None)}
    assert got[2]["original_send_time"].timestamp() == 1.0


def test_ties_go_by_event_id_whatever_the_arrival(monitor):
    monitor.land((9, 2 * S, "a"))
    monitor.land((4, 2 * S, "a"))
    assert verdicts(monitor.at(3 * S)) == {4: ("accepted", None), 9: ("duplicate", 4)}


def test_keys_keep_their_own_history(monitor):
    got = monitor.land((1, S, "a"), (2, 2 * S, "b"), (3, 3 * S, "a"))
    got = verdicts({**got, **monitor.at(4 * S)})
    assert got == {1: ("accepted", None), 2: ("accepted", None), 3: ("duplicate", 1)}


def test_a_late_send_is_answered_late_and_stays_out_of_the_history(monitor):
    monitor.land((1, 5 * S, "a"))
    monitor.at(6 * S)
    late = monitor.land((2, 4 * S, "a"))[2]
    assert (late["verdict"], late["missed_watermark"].timestamp()) == ("late", 6.0)
    monitor.land((3, 7 * S, "a"))
    assert verdicts(monitor.at(8 * S)) == {3: ("duplicate", 1)}


def test_a_send_at_the_watermark_is_late(monitor):
    monitor.at(6 * S)
    assert monitor.land((1, 6 * S, "a"))[1]["verdict"] == "late"


def test_decided_sends_are_answered_at_once_and_late_ones_late(monitor):
    got = monitor.land((1, 5 * S, "a", True))
    assert (got[1]["verdict"], got[1]["original_event_id"]) == ("accepted", None)
    monitor.at(6 * S)
    assert monitor.land((2, 5 * S, "a", True))[2]["verdict"] == "late"


def test_the_state_lets_a_key_go_when_its_window_closes(monitor):
    monitor.land((1, S, "a"), (2, 3 * S, "b"))
    monitor.at(4 * S)
    assert monitor.state.keys == 2  # a and b: the clock's own send waits
    monitor.at(12 * S)  # a's window closed at 11 s
    assert monitor.state.find(np.array([[1, 7], [2, 7]])).held.tolist() == [False, True]
    monitor.at(14 * S)
    assert not monitor.state.find(np.array([[2, 7]])).held.any()


def test_a_duplicate_carries_its_originals_content_for_the_collision_alerts(tmp_path):
    monitor = Monitor(tmp_path, content=True)
    monitor.land((1, S, "a", "x"))
    monitor.at(2 * S)
    got = monitor.land((2, 3 * S, "a", "y"), (3, 4 * S, "b", "z"), (4, 5 * S, "b", "z"))
    got = {**got, **monitor.at(6 * S)}
    assert {e: r[ORIGINAL_CONTENT] for e, r in got.items()} == {2: "x", 3: None, 4: "z"}
