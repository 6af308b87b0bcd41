"""``reconcile``: a replay against what a broker with another window (or none) kept.

The kept sets are what the broker model (:mod:`dedup_lib.testing`) or the replay itself at
the real window accepts, so every category is known before the reconciliation runs.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates, generate_telemetry, reconcile
from dedup_lib.errors import InputError, InputTypeError
from dedup_lib.rules.policy import ACCEPTED, is_set
from dedup_lib.testing import Message, broker_outcomes
from replay_kit import at, frame, mixed_scenario

KEPT_SCHEMA = (
    "message_id string, send_time timestamp, entity string, partition_key string, "
    "session_id string, scheduled_enqueue_time timestamp, sequence_number long"
)
CATEGORIES = ("explained", "contradictions", "unexplained")


def numbered(messages: list[Message]) -> list[Message]:
    return [replace(m, event_id=i) for i, m in enumerate(messages)]


def kept_by(messages: list[Message], real: Any, *, skew: float = 0.0, drop=()) -> list[tuple]:
    """What a broker with policy ``real`` holds, as an export lists it: each accepted message
    at its enqueue time (the scheduled time when set), ``skew`` seconds off, in enqueue order."""
    rows = []
    for i, (m, o) in enumerate(zip(messages, broker_outcomes(messages, real), strict=True)):
        if o.verdict == ACCEPTED and is_set(m.message_id) and i not in drop:
            enqueued = (m.scheduled_enqueue_time or m.send_time) + timedelta(seconds=skew)
            rows.append(
                [m.message_id, enqueued, m.entity, m.partition_key, m.session_id,
                 m.scheduled_enqueue_time]
            )  # fmt: skip
    rows.sort(key=lambda r: r[1])
    return [(*r, n) for n, r in enumerate(rows)]


def check(spark, messages, kept_rows, window, **options):
    result = detect_duplicates(frame(spark, messages), window)
    kept = spark.createDataFrame(kept_rows, KEPT_SCHEMA)
    return reconcile(result, kept, window, **options)


def adds_up(found) -> dict[str, int]:
    """The counts, checked against the frames: every kept message in one category."""
    counts = found.counts()
    assert counts["kept"] == sum(counts[c] for c in CATEGORIES)
    for name in (*CATEGORIES, "pairs", "not_kept"):
        assert getattr(found, name).count() == counts[name], name
    rows = [r.category for name in CATEGORIES for r in getattr(found, name).collect()]
    assert len(rows) == counts["kept"]
    return counts


def ids(frame_, *columns: str) -> list[tuple]:
    """Some columns of a frame's rows, sorted; times as UTC (the sessions' zone)."""
    chosen = columns or ("message_id",)
    return sorted(tuple(utc(r[c]) for c in chosen) for r in frame_.collect())


def utc(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


# a: resent at 100 s and 250 s; b: a retry after 30 s. A broker with a 1-minute window keeps
# a three times and b once; the replay at 10 minutes keeps each once.
SHORT = numbered(
    [Message("a", at(0), "q"), Message("a", at(100), "q"), Message("a", at(250), "q"),
     Message("b", at(0), "q"), Message("b", at(30), "q")]
)  # fmt: skip


def test_a_broker_with_the_replays_window_agrees_with_it(spark):
    policy = DedupPolicy("PT1M")
    found = check(spark, SHORT, kept_by(SHORT, policy), policy)
    counts = adds_up(found)
    assert counts == {
        "kept": 4, "explained": 4, "contradictions": 0, "unexplained": 0,
        "contradicted_duplicates": 0, "contradicted_rejections": 0, "originals_kept": 0,
        "pairs": 0, "accepted": 4, "not_kept": 0,
    }  # fmt: skip
    assert found.agreeing_window is None
    assert "agrees with the replay at 1m" in found.verdict()
    summary = found.summary()
    assert list(summary.columns) == ["category", "count", "what it means", "what to do"]
    assert summary["count"].tolist() == [4, 4, 0, 0, 0, 0]
    assert len(found.table("explained", limit=3)) == 3
    with pytest.raises(InputError, match="table: expected one of explained, contradictions"):
        found.table("kept")  # type: ignore[arg-type]


def test_a_shorter_real_window_shows_as_contradictions_and_the_window_that_agrees(spark):
    replayed = DedupPolicy("PT10M")
    kept = kept_by(SHORT, DedupPolicy("PT1M"))
    found = check(spark, SHORT, kept, replayed)
    counts = adds_up(found)
    assert (counts["explained"], counts["contradictions"], counts["pairs"]) == (2, 2, 2)
    assert ids(found.contradictions, "send_time", "gap_s", "original_kept") == [
        (at(100), 100.0, True),
        (at(250), 250.0, True),
    ]
    assert ids(found.contradictions, "replay_verdict", "original_event_id") == [
        ("duplicate", 0),
        ("duplicate", 0),
    ]
    assert ids(found.pairs, "first_send_time", "send_time", "gap_s", "largest_window_s") == [
        (at(0), at(100), 100.0, 100.0),
        (at(100), at(250), 150.0, 150.0),
    ]
    assert found.agreeing_window == timedelta(seconds=100)
    assert found.shortest_gap == timedelta(seconds=100)
    assert found.verdict() == (
        "The broker kept 2 messages the replay at 10m calls duplicates: its window is at "
        "most 1m40s, or detection is off."
    )
    # SPEC section 1: half-open, so a replay at exactly the gap accepts the later send ...
    agreeing = DedupPolicy(found.agreeing_window, bounds="none")
    again = adds_up(check(spark, SHORT, kept, agreeing))
    assert (again["contradictions"], again["pairs"], again["explained"]) == (0, 0, 4)
    # ... and a microsecond more drops it.
    longer = DedupPolicy(found.agreeing_window + timedelta(microseconds=1), bounds="none")
    assert adds_up(check(spark, SHORT, kept, longer))["contradictions"] == 1


def test_detection_off_on_the_broker_shows_as_pairs(spark):
    retries = numbered([Message("r", at(t), "q") for t in (0, 0.8, 2.4)])
    found = check(spark, retries, kept_by(retries, {"q": None}), DedupPolicy("PT10M"))
    counts = adds_up(found)
    assert (counts["explained"], counts["contradictions"], counts["pairs"]) == (1, 2, 2)
    assert ids(found.pairs, "gap_s") == [(pytest.approx(0.8),), (pytest.approx(1.6),)]
    assert found.agreeing_window == timedelta(seconds=0.8)
    assert "its window is at most 0.8s, or detection is off" in found.verdict()


def test_a_longer_real_window_does_not_bound_the_window_by_the_replays_originals(spark):
    # The broker (10 minutes) drops the send at 6 min, so it accepts the one at 10.5 min; the
    # replay (5 minutes) accepts 6 min and drops 10.5 min as its duplicate, 4.5 minutes on.
    sends = numbered([Message("m", at(t * 60), "q") for t in (0, 6, 10.5)])
    found = check(spark, sends, kept_by(sends, DedupPolicy("PT10M")), DedupPolicy("PT5M"))
    counts = adds_up(found)
    assert (counts["contradictions"], counts["originals_kept"], counts["pairs"]) == (1, 0, 0)
    assert ids(found.contradictions, "gap_s", "original_kept") == [(270.0, False)]
    assert ids(found.not_kept, "send_time") == [(at(360),)]
    assert found.agreeing_window is None
    assert found.shortest_gap is None
    assert "this export does not bound its window" in found.verdict()


def test_telemetry_gaps_and_sends_not_kept(spark):
    policy = DedupPolicy("PT1M")
    kept = kept_by(SHORT, policy, drop={3})  # b's message consumed
    found = check(spark, [m for m in SHORT if m.event_id != 2], kept, policy)  # a at 250 s
    counts = adds_up(found)
    assert (counts["kept"], counts["explained"], counts["unexplained"]) == (3, 2, 1)
    assert ids(found.unexplained, "message_id", "send_time") == [("a", at(250))]
    assert ids(found.not_kept, "message_id", "event_id") == [("b", 3)]
    assert counts["accepted"] == counts["explained"] + counts["not_kept"]
    verdict = found.verdict()
    assert "1 kept message has no send in the telemetry within 30s" in verdict
    assert "1 accepted send is not in the export" in verdict


def test_kept_rows_without_an_id_or_a_time_are_unexplained_not_lost(spark):
    policy = DedupPolicy("PT1M")
    odd = [(None, at(0), "q", None, None, None, 8), ("a", None, "q", None, None, None, 9)]
    counts = adds_up(check(spark, SHORT, [*kept_by(SHORT, policy), *odd], policy))
    assert (counts["kept"], counts["explained"], counts["unexplained"]) == (6, 4, 2)


def test_tolerance_decides_how_far_clocks_may_differ(spark):
    policy = DedupPolicy("PT1M")
    late = kept_by(SHORT, policy, skew=20)
    found = check(spark, SHORT, late, policy)
    assert adds_up(found)["explained"] == 4
    assert {r.offset_s for r in found.explained.collect()} == {20.0}
    strict = adds_up(check(spark, SHORT, late, policy, tolerance="PT10S"))
    # 20 s late, b's message lies within 10 s of b's retry only, which the replay dropped.
    assert (strict["unexplained"], strict["contradictions"], strict["not_kept"]) == (3, 1, 4)
    exact = adds_up(check(spark, SHORT, kept_by(SHORT, policy), policy, tolerance=0))
    assert exact["explained"] == 4
    with pytest.raises(InputError, match="tolerance: cannot read 'soon'"):
        check(spark, SHORT, late, policy, tolerance="soon")


def test_each_accepted_send_explains_one_kept_message_in_time_order(spark):
    # Two accepted sends 25 s apart and kept messages 20 s late: the nearest send of the
    # first kept message is the second send, but taking it would leave the second unmatched.
    sends = numbered([Message("c", at(0), "q"), Message("c", at(25), "q")])
    policy = DedupPolicy("PT20S")
    found = check(spark, sends, kept_by(sends, policy, skew=20), policy)
    assert adds_up(found)["explained"] == 2
    assert ids(found.explained, "send_time", "replay_event_id") == [(at(20), 0), (at(45), 1)]
    # One kept message for both: the earlier send explains it, the other was not kept.
    alone = check(spark, sends, kept_by(sends, policy, drop={1}, skew=12), policy)
    assert ids(alone.explained, "replay_event_id") == [(0,)]
    assert ids(alone.not_kept, "event_id") == [(1,)]
    # Three kept messages, one accepted send: the rest take the nearest dropped send.
    retries = numbered([Message("d", at(t), "q") for t in (0, 5)])
    kept = [*kept_by(retries, {"q": None}), ("d", at(10), "q", None, None, None, 2)]
    found = check(spark, retries, kept, policy)
    counts = adds_up(found)
    assert (counts["explained"], counts["contradictions"], counts["unexplained"]) == (1, 2, 0)
    assert ids(found.contradictions, "send_time", "replay_event_id") == [(at(5), 1), (at(10), 1)]


def test_a_kept_message_the_replay_rejects_is_a_contradiction(spark):
    sends = numbered([Message("k", at(0), "q", partition_key="p1", session_id="s1")])
    kept = [("k", at(0), "q", "s1", "s1", None, 0)]
    found = check(spark, sends, kept, DedupPolicy("PT1M"))
    counts = adds_up(found)
    assert (counts["contradicted_rejections"], counts["contradicted_duplicates"]) == (1, 0)
    row = found.contradictions.first()
    assert row.replay_verdict == "rejected"
    assert row.gap_s is None
    assert "PartitionKey and SessionId differ" in row.replay_reason
    assert "1 message the replay calls rejected" in found.verdict()


def test_pairs_follow_the_dedup_key_of_the_partitioning_mode(spark):
    sends = numbered(
        [
            Message("x", at(0), "q", partition_key="p1"),
            Message("x", at(10), "q", partition_key="p2"),
        ]
    )
    kept = kept_by(sends, DedupPolicy("PT1M", partitioning=True))
    partitioned = adds_up(check(spark, sends, kept, DedupPolicy("PT1M", partitioning=True)))
    assert (partitioned["explained"], partitioned["pairs"]) == (2, 0)
    plain = check(spark, sends, kept, DedupPolicy("PT1M"))
    assert (adds_up(plain)["contradictions"], plain.counts()["pairs"]) == (1, 1)
    assert ids(plain.pairs, "dedup_key", "gap_s") == [("x", 10.0)]


def test_a_scheduled_message_is_matched_at_its_enqueue_time(spark):
    sends = numbered([Message("s", at(0), "q", scheduled_enqueue_time=at(3600))])
    found = check(spark, sends, kept_by(sends, DedupPolicy("PT1M")), DedupPolicy("PT1M"))
    assert adds_up(found)["explained"] == 1
    assert utc(found.explained.first().replay_send_time) == at(0)


def test_entities_are_matched_and_named_when_a_frame_has_none(spark):
    sends = numbered(
        [Message("e", at(0), "q1"), Message("e", at(5), "q1"), Message("e", at(5), "q2")]
    )
    policy = DedupPolicy("PT1M")
    result = detect_duplicates(frame(spark, sends), policy)
    q1 = [("e", at(0)), ("e", at(5))]  # a broker without detection on q1
    export = spark.createDataFrame(q1, "message_id string, send_time timestamp")
    with pytest.raises(InputError, match=r"kept has no entity column.*entity='NAME'"):
        reconcile(result, export, policy)
    found = reconcile(result, export, policy, entity="q1")
    counts = adds_up(found)
    assert (counts["explained"], counts["contradictions"], counts["not_kept"]) == (1, 1, 0)
    assert {r.entity for r in found.contradictions.collect()} == {"q1"}
    without = detect_duplicates(frame(spark, sends[:2], with_entity=False), policy)
    named = export.withColumn("entity", F.lit("q1"))
    with pytest.raises(InputError, match="result has no entity column"):
        reconcile(without, named, policy)
    assert adds_up(reconcile(without, named, policy, entity="q1"))["contradictions"] == 1
    covering = reconcile(result, named, policy)  # q2's send is not an export of q1's to judge
    assert adds_up(covering)["not_kept"] == 0
    assert adds_up(covering)["accepted"] == 1


@pytest.mark.connect
def test_a_time_range_narrows_what_is_reported_not_how_rows_match(spark):
    kept = kept_by(SHORT, DedupPolicy("PT1M"))
    whole = check(spark, SHORT, kept, DedupPolicy("PT10M"))
    part = check(spark, SHORT, kept, DedupPolicy("PT10M"), start=at(50), end=at(200))
    counts = adds_up(part)
    assert (counts["kept"], counts["contradictions"], counts["pairs"]) == (1, 1, 1)
    shown = ("message_id", "send_time", "category", "gap_s", "original_kept")
    inside = [r for r in ids(whole.contradictions, *shown) if at(50) <= r[1] <= at(200)]
    assert (
        ids(part.contradictions, *shown) == inside == [("a", at(100), "contradiction", 100.0, True)]
    )


@pytest.mark.connect
def test_bad_input_is_one_clear_error(spark):
    policy = DedupPolicy()
    result = detect_duplicates(frame(spark, SHORT), policy)
    no_id = spark.createDataFrame([(at(0),)], "send_time timestamp")
    with pytest.raises(InputError, match=r"kept needs column\(s\) message_id \(the MessageId"):
        reconcile(result, no_id, policy, entity="q")
    no_time = spark.createDataFrame([("a",)], "message_id string")
    with pytest.raises(InputError, match=r"kept needs column\(s\) send_time"):
        reconcile(result, no_time, policy, entity="q")
    text_time = spark.createDataFrame([("a", "2024-03-01")], "message_id string, send_time string")
    with pytest.raises(InputTypeError, match="kept column send_time must be a timestamp"):
        reconcile(result, text_time, policy, entity="q")
    kept = spark.createDataFrame([("a", at(0))], "message_id string, send_time timestamp")
    with pytest.raises(InputError, match="expected a detect_duplicates result"):
        reconcile(frame(spark, SHORT), kept, policy, entity="q")
    with pytest.raises(InputTypeError, match="reconcile one entity at a time"):
        reconcile(result, kept, {"q": policy}, entity="q")  # type: ignore[arg-type]
    clash = kept.withColumn("category", F.lit("x"))
    with pytest.raises(InputError, match="kept already has column"):
        reconcile(result, clash, policy, entity="q")


def random_sends(seed: int, n: int = 160) -> list[Message]:
    """Sends of a few keys over ten minutes, each key's resends seconds to minutes apart."""
    rng = random.Random(seed)
    messages = []
    for i in range(n):
        key = f"id-{rng.randrange(12)}"
        messages.append(Message(key, at(round(rng.uniform(0, 600), 3)), "q", event_id=i))
    return messages


@pytest.mark.parametrize(
    ("real", "replayed"), [("PT30S", "PT2M"), ("PT2M", "PT30S"), ("PT1M", "PT1M"), (None, "PT1M")]
)
def test_what_any_real_window_leaves_is_told_soundly(spark, real, replayed):
    sends = random_sends(7)
    broker = {"q": None} if real is None else DedupPolicy(real)
    kept = kept_by(sends, broker)
    policy = DedupPolicy(replayed)
    found = check(spark, sends, kept, policy)
    counts = adds_up(found)
    assert counts["unexplained"] == 0
    assert counts["accepted"] == counts["explained"] + counts["not_kept"]
    if real == replayed:
        assert counts["explained"] == counts["kept"] == counts["accepted"]
        assert counts["pairs"] == counts["contradictions"] == 0
        return
    # Every bound told holds: two kept messages of one key, or a contradiction and the
    # original the broker kept too, are at least the real window apart.
    real_s = 0.0 if real is None else DedupPolicy(real).window.total_seconds()
    assert all(r.gap_s >= real_s for r in found.pairs.collect())
    originals_kept = [r.gap_s for r in found.contradictions.collect() if r.original_kept]
    assert all(gap >= real_s for gap in originals_kept)
    if real_s > policy.window.total_seconds():
        assert counts["pairs"] == len(originals_kept) == 0
        return
    assert counts["contradictions"] > 0
    assert found.agreeing_window is not None
    assert found.agreeing_window.total_seconds() >= real_s
    # A replay at the window that agrees reproduces the broker: nothing contradicts it.
    agreeing = DedupPolicy(found.agreeing_window, bounds="none")
    again = adds_up(check(spark, sends, kept, agreeing))
    assert (again["contradictions"], again["pairs"], again["not_kept"]) == (0, 0, 0)


def test_on_generated_telemetry_against_a_broker_with_a_shorter_window(spark):
    sends = generate_telemetry(spark, 3000, seed=5, scenario=mixed_scenario()).persist()
    try:
        real = detect_duplicates(sends, DedupPolicy("PT1M"))
        enqueued = F.coalesce("scheduled_enqueue_time", "send_time").alias("send_time")
        kept = real.where((F.col("verdict") == ACCEPTED) & (F.col("message_id") != "")).select(
            "message_id", enqueued, "entity", "partition_key", "session_id",
            "scheduled_enqueue_time",
        )  # fmt: skip
        result = detect_duplicates(sends, DedupPolicy("PT10M"))
        found = reconcile(result, kept, DedupPolicy("PT10M"))
        counts = adds_up(found)
        assert counts["unexplained"] == 0
        assert counts["contradictions"] > 0
        assert counts["accepted"] == counts["explained"] + counts["not_kept"]
        assert found.agreeing_window is not None
        assert found.agreeing_window >= timedelta(minutes=1)
        gaps = [r.gap_s for r in found.contradictions.collect() if r.original_kept]
        assert gaps
        assert min(gaps) >= 60
        again = reconcile(
            detect_duplicates(sends, DedupPolicy(found.agreeing_window)),
            kept,
            DedupPolicy(found.agreeing_window),
        )
        assert (again.counts()["contradictions"], again.counts()["pairs"]) == (0, 0)
    finally:
        sends.unpersist()
