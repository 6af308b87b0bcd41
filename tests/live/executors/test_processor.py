"""The judge on the executors, on a hand-made stream: the batch replay's verdicts for every
send judged (window edges, ties by event id, rejected and id-less sends, an anchor from an
earlier micro-batch), ``late`` for a send behind the watermark with Spark dropping none, each
send answered by the micro-batch that reads it when the watermark after it reaches the send
(by the next one that reads a plan otherwise), and each anchor let go once its window closes
(the state's rows fall), the state's anchors and waiting sends as the judge counts them
being what Spark's state store holds after each micro-batch."""

from __future__ import annotations

import glob
import json
import os
import zipfile
from datetime import timedelta

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.live.durable import write_json
from dedup_lib.live.executors import processor
from dedup_lib.live.executors.counts import held_in
from dedup_lib.live.executors.query import verdict_folder
from dedup_lib.testing import Message
from executors_kit import answers, keyed, replayed, run, start, stored, verdicts
from replay_kit import at, frame

pytestmark = pytest.mark.spark

POLICY = DedupPolicy("PT20S")
LATENESS = timedelta(seconds=2)


def test_the_jar_is_built_once_and_holds_the_judge():
    jar = processor.jar_path()
    with zipfile.ZipFile(jar) as archive:
        assert "dedup_lib/LiveMonitor.class" in archive.namelist()
    assert processor.jar_path() == jar


def _plans(spark):
    """Four plans: the watermark after each is 28 s, 58 s, 98 s and 9,998 s past T0."""
    plan0 = [
        Message("a", at(0), event_id=1),
        Message("a", at(10), event_id=2),  # duplicate of 1
        Message("a", at(20), event_id=3),  # at anchor + window exactly: accepted
        Message("c", at(1), event_id=5),
        Message("c", at(1), event_id=4),  # same time: the lower event id is the original
        Message("r", at(2), partition_key="p", session_id="s", event_id=6),  # rejected
        Message(None, at(3), event_id=7),  # no MessageId: accepted, unprotected
        Message("clock", at(30), event_id=8),
    ]
    plan1 = [
        Message("b", at(27), event_id=10),  # behind the watermark (28 s): late
        Message("a", at(25), event_id=11),  # late, although a's anchor would catch it
        Message("a", at(35), event_id=12),  # duplicate of 3, an anchor judged before
        Message("e", at(28.0005), event_id=13),  # half a millisecond after the watermark
        Message("f", at(40), event_id=14),
        Message("clock", at(60), event_id=15),
    ]
    plan2 = [
        Message("f", at(59), event_id=20),  # duplicate of 14, an anchor from the state
        Message("e", at(58.0005), event_id=21),  # 13's window closed at 48.0005 s: accepted
        Message("a", at(58.5), event_id=22),  # after the watermark by half a second
        Message("clock", at(100), event_id=23),
        Message("g", at(99), event_id=24),  # after the watermark: a timer judges it, later
        Message("k", at(90), event_id=25),  # judged at once, its window (to 110 s) held
    ]
    flush = [Message("clock", at(10_000), event_id=99)]
    return [frame(spark, plan) for plan in (plan0, plan1, plan2, flush)]


@pytest.fixture(scope="module")
def stream_root(tmp_path_factory):
    """Where :func:`stream` keeps its query's inbox, state and verdicts."""
    return str(tmp_path_factory.mktemp("hand"))


@pytest.fixture(scope="module")
def stream(spark, stream_root):
    """The four plans through one query: its plans, answers, rows and figures."""
    root = stream_root
    plans = _plans(spark)
    query = start(spark, root, LATENESS)
    try:
        run(query, plans, POLICY)
        figures = query.figures()
    finally:
        query.stop()
    rows = verdicts(spark, root)
    answered_in = {
        r["event_id"]: int(os.path.basename(folder).removeprefix("batch-"))
        for folder in glob.glob(os.path.join(root, "out", "batch-*"))
        for r in spark.read.parquet(folder).select("event_id").collect()
    }
    return plans, answers(rows), {r["event_id"]: r for r in rows}, figures, answered_in


def test_hand_stream_gives_the_batch_replays_verdicts(stream):
    plans, got, *_ = stream
    late = {k for k, v in got.items() if v[1] == "late"}
    assert late == {10, 11}
    on_time = plans[0].union(plans[1].where("event_id not in (10, 11)")).union(plans[2])
    expected = replayed(on_time.union(plans[3]), POLICY)
    del expected[99]  # after the last watermark: still waiting
    assert {k: v for k, v in got.items() if k not in late} == expected
    assert got[12][1:3] == ("duplicate", 3)
    assert got[20][1:3] == ("duplicate", 14)
    assert got[21][1] == "accepted"
    assert got[6][1] == "rejected"
    assert 99 not in got


def test_late_send_is_answered_and_spark_drops_none(stream):
    _, _, rows, figures, _ = stream
    assert rows[10]["verdict"] == "late"
    assert rows[10]["missed_watermark"] == at(28).replace(tzinfo=None)
    assert rows[10]["original_send_time"] is None
    assert rows[12]["missed_watermark"] is None
    assert sum(f.dropped for f in figures) == 0
    assert sum(f.sends for f in figures) == 21


def test_each_send_is_answered_by_the_first_micro_batch_whose_watermark_after_reaches_it(
    stream,
):
    """Plan by plan, the watermark after it is 28, 58, 98 and 9,998 s: a send at or before it
    is answered by the micro-batch that reads the plan, not the one after it that fires the
    timers; a later one by the micro-batch that reads the next plan of its key, else by a
    timer in the micro-batch whose watermark reaches it."""
    *_, figures, answered_in = stream
    reading = [f.batch for f in figures if f.sends]
    assert len(reading) == 4
    expected = {
        reading[0]: {1, 2, 3, 4, 5, 6, 7},  # the clock's 30 s is after 28 s
        reading[1]: {8, 10, 11, 12, 13, 14},  # 15 (60 s) after 58 s
        reading[2]: {15, 20, 21, 22, 25},  # 23 (100 s) and 24 (99 s) after 98 s
        reading[3]: {23},  # 99 waits for a watermark to come
        reading[3] + 1: {24},  # no plan of its key again: the timer, once 9,998 s passes it
    }
    got: dict[int, set[int]] = {}
    for event, batch in answered_in.items():
        got.setdefault(batch, set()).add(event)
    assert got == expected


def test_a_checkpoint_staged_without_the_latest_send_times_is_judged_alike(spark, tmp_path, stream):
    """A checkpoint whose stream began before the inbox wrote the latest send times: its
    columns lack them, so the judge has Spark's watermark alone and answers a send in the
    micro-batch after the one that reads it, with the same verdicts."""
    _, got, *_ = stream
    plans = _plans(spark)
    executors = tmp_path / "executors"
    (executors / "inbox").mkdir(parents=True)
    before = json.loads(keyed(plans[0], POLICY).schema.json())
    write_json(str(executors / "schema.json"), before)
    query = start(spark, str(tmp_path), LATENESS)
    try:
        run(query, plans, POLICY)
        figures = query.figures()
    finally:
        query.stop()
    assert answers(verdicts(spark, str(tmp_path))) == got
    first = next(f.batch for f in figures if f.sends)
    answered = spark.read.parquet(verdict_folder(str(tmp_path / "out"), first))
    assert {r["event_id"] for r in answered.collect()} == {6, 7}  # the rules' own: at once


def test_anchors_are_let_go_when_their_windows_close(stream):
    *_, figures, _ = stream
    held = [f.state_rows for f in figures]
    # k's and g's anchors by timers (the others' windows closed by the watermark after their
    # own micro-batch, or by a later send of their key), with g's send
    assert sum(f.timers for f in figures) == 2
    # At the end only the last send waits: its row, its key's held value (no anchor, the
    # timer's time) and the timer; before, anchors and waiting sends of several keys.
    assert max(held) >= 5
    assert held[-1] <= 3


def test_the_judge_counts_the_anchors_and_waiting_sends_its_state_holds(spark, stream, stream_root):
    """After each micro-batch, the changes its verdicts' folders record add up to the anchors
    and waiting sends in the state store, read by Spark's state reader at that micro-batch:
    anchors come and go with sends and timers, sends wait and are judged."""
    *_, figures, _ = stream
    checkpoint = os.path.join(stream_root, "executors", "spark")
    keys = waiting = 0
    seen = []
    for figure in figures:
        anchors, waits = held_in(verdict_folder(os.path.join(stream_root, "out"), figure.batch))
        keys, waiting = keys + anchors, waiting + waits
        in_store = stored(spark, checkpoint, figure.batch)
        assert (keys, waiting) == in_store, figure
        seen.append(in_store)
    assert len(set(seen)) >= 3, seen  # anchors and waiting sends came and went
    assert seen[-1] == (0, 1), seen  # at the end, 99 waits alone
