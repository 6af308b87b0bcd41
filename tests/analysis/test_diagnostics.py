"""Missed resends and collisions: hand-made cases with known answers, then the generator's
ground truth, in both modes at several windows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates, generate_telemetry
from dedup_lib.analysis.diagnostics import (
    ALL_ZERO_GUID,
    GUID,
    MISS_AFTER_WINDOW,
    MISS_NEW_ID,
    MISS_NO_ID,
    MISS_NOT_CHECKED,
    MISS_PARTITION_KEY,
    collision_groups,
    collisions,
    counts_over_time,
    id_pattern,
    missed_resends,
    missed_summary,
)
from dedup_lib.analysis.selection import narrow
from dedup_lib.testing import Message
from replay_kit import at, frame, mixed_scenario

ZERO = "00000000-0000-0000-0000-000000000000"
TEN_MIN = DedupPolicy("PT10M")


def result(spark, rows, policy=TEN_MIN):
    """Sends as (message_id, seconds, payload_hash, entity, partition_key, session_id)."""
    messages = [
        Message(mid, at(t), entity=ent, partition_key=pk, session_id=sid, event_id=i)
        for i, (mid, t, _, ent, pk, sid) in enumerate(rows)
    ]
    hashes = spark.createDataFrame(
        [(i, r[2]) for i, r in enumerate(rows)], "row int, payload_hash string"
    )
    return detect_duplicates(frame(spark, messages).join(hashes, "row"), policy)


def by_event(df, *columns):
    return {r["event_id"]: tuple(r[c] for c in columns) for r in df.collect()}


def test_each_cause_of_a_missed_resend(spark):
    rows = [
        ("late", 0, "h1", "q", None, None),
        ("late", 601, "h1", "q", None, None),  # after the 10-minute window
        ("guid-1", 0, "h2", "q", None, None),
        ("guid-2", 1, "h2", "q", None, None),  # a new id for the same content
        (None, 0, "h3", "q", None, None),
        (None, 1, "h3", "q", None, None),  # no id at all
        ("same", 0, "h4", "q", None, None),
        ("same", 5, "h4", "q", None, None),  # caught: not a miss
        ("k", 0, "h5", "p", "a", None),
        ("k", 5, "h5", "p", "b", None),  # same id, another partition key
        ("off", 0, "h6", "off", None, None),
        ("off", 5, "h6", "off", None, None),  # detection off on the entity
        ("late", 700, "h7", "q", None, None),  # another content: not a resend of h1
    ]
    policies = {"q": TEN_MIN, "p": DedupPolicy("PT10M", partitioning=True), "off": None}
    misses = missed_resends(result(spark, rows, policies))
    found = by_event(misses, "miss_cause", "previous_event_id", "delay", "caught_from")
    assert found == {
        1: (MISS_AFTER_WINDOW, 0, 601.0, 601.000001),
        3: (MISS_NEW_ID, 2, 1.0, None),
        5: (MISS_NO_ID, 4, 1.0, None),
        9: (MISS_PARTITION_KEY, 8, 5.0, None),
        11: (MISS_NOT_CHECKED, 10, 5.0, None),
    }
    summary = missed_summary(misses).set_index(["entity", "miss_cause"])
    assert summary.loc[("q", MISS_AFTER_WINDOW), "resends"] == 1
    assert summary.loc[("q", MISS_AFTER_WINDOW), "longest_caught_from"] == pytest.approx(601.000001)


def test_caught_from_is_the_shortest_window_from_which_on_every_window_catches(spark):
    # At a 10 s window 0 is an anchor, 8 a duplicate, 13 and 24 new anchors. The resend at
    # 24 is caught at 12 s by luck (anchors 0 and 13), missed at 24 s, caught from 24 s + 1 us.
    rows = [("m", t, "h", "q", None, None) for t in (0, 8, 13, 24)]
    policy = DedupPolicy("10s", bounds="none")
    misses = missed_resends(result(spark, rows, policy))
    assert by_event(misses, "caught_from") == {2: (13.000001,), 3: (24.000001,)}
    for window, expected in ((24.000001, "duplicate"), (24.0, "accepted"), (12.0, "duplicate")):
        verdicts = by_event(result(spark, rows, DedupPolicy(window, bounds="none")), "verdict")
        assert verdicts[3] == (expected,), window


@pytest.mark.connect
def test_content_from_several_columns_and_clear_errors(spark):
    df = frame(spark, [Message("a", at(0), event_id=0), Message("b", at(1), event_id=1)])
    judged = detect_duplicates(df.withColumn("body", F.lit("x")), TEN_MIN)
    assert by_event(missed_resends(judged, ["body", "session_id"]), "miss_cause") == {
        1: (MISS_NEW_ID,)
    }
    with pytest.raises(ValueError, match="no payload_hash column; pass content="):
        missed_resends(judged)
    with pytest.raises(ValueError, match=r"column.*nope.*not in the telemetry"):
        collisions(judged, ["nope"])
    with pytest.raises(ValueError, match=r"expected a detect_duplicates result.*verdict"):
        collisions(df)


@pytest.mark.connect
def test_collisions_are_drops_of_different_content(spark):
    rows = [
        (ZERO, 0, "a", "q", None, None),
        (ZERO, 10, "b", "q", None, None),  # lost: another message under the zero GUID
        (ZERO, 20, "a", "q", None, None),  # a true duplicate: not a collision
        ("order-17", 0, "c", "q", None, None),
        ("order-17", 30, "d", "q", None, None),  # lost: a reused business id
        ("order-17", 40, None, "q", None, None),  # content unknown: not counted
        ("7d444840-9dc0-11d1-b245-5ffdce74fad2", 0, "e", "q", None, None),
        ("7d444840-9dc0-11d1-b245-5ffdce74fad2", 1, "f", "q", None, None),
    ]
    lost = collisions(result(spark, rows))
    assert by_event(lost, "id_pattern", "original_event_id", "content", "original_content") == {
        1: (ALL_ZERO_GUID, 0, "b", "a"),
        4: ("order-#", 3, "d", "c"),
        7: (GUID, 6, "f", "e"),
    }
    groups = collision_groups(lost)
    assert list(groups.columns) == [
        "entity", "id_pattern", "sends_dropped", "distinct_contents", "distinct_ids", "first",
        "last",
    ]  # fmt: skip
    assert groups["sends_dropped"].tolist() == [1, 1, 1]


@pytest.mark.connect
def test_id_patterns(spark):
    ids = [None, "", ZERO, "{" + ZERO + "}", "7D444840-9DC0-11D1-B245-5FFDCE74FAD2", "ab12cd345"]
    df = spark.createDataFrame([(i,) for i in ids], "message_id string")
    patterns = [r[0] for r in df.select(id_pattern(F.col("message_id"))).collect()]
    assert patterns == ["(none)", "(none)", ALL_ZERO_GUID, ALL_ZERO_GUID, GUID, "ab#cd#"]


# Against the generator's ground truth: a missed resend is an accepted send of a message that
# was already delivered; a collision is a drop whose original is another message.
@pytest.fixture(scope="module")
def sends(spark):
    return generate_telemetry(spark, 5_000, seed=4, scenario=mixed_scenario()).persist()


def truth_missed(judged):
    order = Window.partitionBy("sender", "logical_id").orderBy("send_time", "event_id")
    delivered = judged.where(F.col("verdict") == "accepted")
    return {
        r[0]
        for r in delivered.withColumn("n", F.row_number().over(order))
        .where("n > 1")
        .select("event_id")
        .collect()
    }


def truth_collisions(judged):
    originals = judged.where(F.col("verdict") == "accepted").select(
        F.col("event_id").alias("original_event_id"),
        F.col("sender").alias("original_sender"),
        F.col("logical_id").alias("original_logical_id"),
    )
    lost = (
        judged.where(F.col("verdict") == "duplicate")
        .join(originals, "original_event_id")
        .where(
            (F.col("sender") != F.col("original_sender"))
            | (F.col("logical_id") != F.col("original_logical_id"))
        )
    )
    return {r[0] for r in lost.select("event_id").collect()}


@pytest.mark.parametrize("partitioning", [False, True])
@pytest.mark.parametrize("window", ["PT20S", "PT10M", "P1D"])
def test_diagnostics_equal_the_ground_truth(spark, sends, window, partitioning):
    judged = detect_duplicates(sends, DedupPolicy(window, partitioning=partitioning)).persist()
    try:
        misses = missed_resends(judged).persist()
        found = {r[0] for r in misses.select("event_id").collect()}
        assert found == truth_missed(judged)
        assert len(found) > 20
        lost = {r[0] for r in collisions(judged).select("event_id").collect()}
        assert lost == truth_collisions(judged)
        assert len(lost) > 20
        causes = {r[0] for r in misses.select("miss_cause").distinct().collect()}
        assert {MISS_NEW_ID, MISS_NO_ID} <= causes
        if window == "PT20S":
            assert MISS_AFTER_WINDOW in causes
        # Every resend after the window is caught by the window it names.
        late = misses.where(F.col("miss_cause") == MISS_AFTER_WINDOW).limit(3).collect()
        for miss in late:
            wider = DedupPolicy(
                timedelta(seconds=miss["caught_from"]), partitioning=partitioning, bounds="none"
            )
            again = detect_duplicates(sends, wider).where(F.col("event_id") == miss["event_id"])
            assert again.select("verdict").first()[0] == "duplicate"
        misses.unpersist()
    finally:
        judged.unpersist()


@pytest.mark.connect
def test_counts_over_time_and_narrowing(spark):
    rows = [(ZERO, t, f"h{t}", "q", None, None) for t in (0, 10, 70, 130)]
    rows += [(ZERO, 5, "x", "r", None, None), (ZERO, 6, "y", "r", None, None)]
    lost = collisions(result(spark, rows)).persist()
    table = counts_over_time(lost, "id_pattern", "1m")
    assert table[["entity", "sends"]].values.tolist() == [["q", 1], ["r", 1], ["q", 1], ["q", 1]]
    assert (table["time"].dt.second == 0).all()
    assert set(table["id_pattern"]) == {ALL_ZERO_GUID}
    with pytest.raises(ValueError, match="no column 'sender'"):
        counts_over_time(lost, "sender")
    assert narrow(lost, "r").count() == 1
    assert narrow(lost, "(all)", start=at(60).isoformat(), end=at(130)).count() == 2
    assert narrow(lost, None, start="2024-03-01T12:01:00").count() == 2
    with pytest.raises(ValueError, match="start: cannot read 'soon'; expected ISO 8601"):
        narrow(lost, start="soon")
