"""detect_duplicates: each SPEC.md rule on a hand-made case, then agreement with the broker
model on generated telemetry, in both modes, on classic Spark and Spark Connect."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates
from dedup_lib.replay import engine
from dedup_lib.rules.policy import (
    DETECTION_OFF_NOTE,
    NO_MESSAGE_ID_WARNING,
    REASON_KEY_MISMATCH,
    REASON_MISSING_TIME,
    REASON_MIXED_BATCH,
    UNKNOWN_NO_ENTITY,
    too_long_reason,
)
from dedup_lib.testing import Message
from replay_kit import T0, at, engine_verdicts, frame, micros, oracle_verdicts, telemetry

TEN_MIN = DedupPolicy("10m")
#: Every test runs the JVM kernel; these run the Python kernel too (the fallback).
KERNELS = ["jvm", "python"]
PARTITIONED = DedupPolicy("10m", partitioning=True)


def check(spark, messages, policy, expected, **kw):
    """The engine gives ``expected`` verdicts, and agrees with the oracle in every field."""
    engine = engine_verdicts(spark, messages, policy, **kw)
    oracle = oracle_verdicts(messages, policy, with_event_id=kw.get("with_event_id", True))
    assert [v.verdict for v in engine] == expected
    assert engine == oracle
    return engine


def sends(*specs, **common):
    return [
        Message(message_id=mid, send_time=t, event_id=i, **common)
        for i, (mid, t) in enumerate(specs)
    ]


# SPEC 1: the window is anchored on the accepted original; drops do not extend it.
def test_dropped_duplicates_do_not_extend_the_window(spark):
    times = [0, 300, 540, 660, 700, 1270, 1300]
    messages = sends(*(("m", at(t)) for t in times))
    out = check(
        spark,
        messages,
        TEN_MIN,
        ["accepted", "duplicate", "duplicate", "accepted", "duplicate", "accepted", "duplicate"],
    )
    assert [v.original for v in out] == [None, 0, 0, None, 3, None, 5]
    assert out[4].original_time == micros(at(660))


# SPEC 1: half-open boundary.
def test_boundary_is_half_open(spark):
    window = TEN_MIN.window
    messages = sends(
        ("a", T0),
        ("a", T0 + window - timedelta(microseconds=1)),
        ("b", T0),
        ("b", T0 + window),
    )
    check(spark, messages, TEN_MIN, ["accepted", "duplicate", "accepted", "accepted"])


# SPEC 1: scheduled messages count at their send time.
def test_scheduled_messages_count_at_send_time(spark):
    messages = [
        Message("m", at(0), scheduled_enqueue_time=at(7200), event_id=0),
        Message("m", at(60), scheduled_enqueue_time=at(60), event_id=1),
        Message("n", at(0), scheduled_enqueue_time=at(0), event_id=2),
        Message("n", at(3600), scheduled_enqueue_time=at(30), event_id=3),
    ]
    check(spark, messages, TEN_MIN, ["accepted", "duplicate", "accepted", "accepted"])


# SPEC 1: equal send_time for one key, event_id decides, else input position.
def test_ties_broken_by_event_id(spark):
    messages = [Message("m", at(5), event_id=9), Message("m", at(5), event_id=4)]
    out = check(spark, messages, TEN_MIN, ["duplicate", "accepted"])
    assert out[0].original == 4


def test_ties_broken_by_input_position_without_event_id(spark):
    messages = [Message("m", at(5)), Message("m", at(5)), Message("m", at(5))]
    out = check(
        spark, messages, TEN_MIN, ["accepted", "duplicate", "duplicate"], with_event_id=False
    )
    assert [v.original for v in out] == [None, 0, 0]


def test_missing_event_ids_sort_after_present_ones(spark):
    messages = [Message("m", at(5), event_id=None), Message("m", at(5), event_id=7)]
    check(spark, messages, TEN_MIN, ["duplicate", "accepted"])


# SPEC 1: unsorted input: never trust file order.
def test_unsorted_input(spark):
    ordered = sends(("m", at(0)), ("m", at(100)), ("m", at(700)), ("m", at(800)))
    shuffled = [ordered[3], ordered[1], ordered[2], ordered[0]]
    check(spark, shuffled, TEN_MIN, ["duplicate", "duplicate", "accepted", "accepted"])


# SPEC 1: scope per entity.
def test_entities_never_see_each_others_ids(spark):
    messages = [
        Message("m", at(0), entity="orders", event_id=0),
        Message("m", at(1), entity="payments", event_id=1),
        Message("m", at(2), entity="orders", event_id=2),
        Message("m", at(3), entity=None, event_id=3),
        Message("m", at(4), entity=None, event_id=4),
        Message("m", at(5), entity="", event_id=5),
    ]
    check(
        spark,
        messages,
        TEN_MIN,
        ["accepted", "accepted", "duplicate", "accepted", "duplicate", "accepted"],
    )


# The pass tells keys apart by two hashes of (entity, key): keys that collide on either one
# must still be judged apart (the sort orders by the texts after the first hash).
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("colliding", [0, 1], ids=["first hash", "second hash"])
def test_keys_whose_hashes_collide_are_judged_apart(spark, monkeypatch, colliding, kernel):
    real = engine._key_hashes

    def one_hash_for_all(entity, key):
        hashes = list(real(entity, key))
        hashes[colliding] = F.lit(7).cast("long")
        return hashes[0], hashes[1]

    monkeypatch.setattr(engine, "_key_hashes", one_hash_for_all)
    messages = [
        Message("a", at(0), entity="orders", event_id=0),
        Message("b", at(1), entity="orders", event_id=1),
        Message("a", at(2), entity="orders", event_id=2),
        Message("a", at(3), entity="payments", event_id=3),
        Message("b", at(4), entity="orders", event_id=4),
        Message("a", at(5), entity="payments", event_id=5),
        Message("a", at(601), entity="orders", event_id=6),
    ]
    expected = [
        "accepted",
        "accepted",
        "duplicate",
        "accepted",
        "duplicate",
        "duplicate",
        "accepted",
    ]
    check(spark, messages, TEN_MIN, expected, kernel=kernel)
    check(spark, messages, PARTITIONED, expected, kernel=kernel)


@pytest.mark.connect
def test_without_entity_column_everything_is_one_entity(spark):
    messages = sends(("m", at(0)), ("m", at(1)))
    check(spark, messages, TEN_MIN, ["accepted", "duplicate"], with_entity=False)


# SPEC 2: the key without partitioning ignores PartitionKey and SessionId.
def test_key_without_partitioning_is_message_id_alone(spark):
    messages = [
        Message("m", at(0), partition_key="p1", event_id=0),
        Message("m", at(1), partition_key="p2", event_id=1),
        Message("m", at(2), session_id="s9", event_id=2),
    ]
    out = check(spark, messages, TEN_MIN, ["accepted", "duplicate", "duplicate"])
    assert out[0].key == ("m",)


# SPEC 2 and 6.3: with partitioning, MessageId + effective partition key.
@pytest.mark.connect
def test_key_with_partitioning_uses_effective_partition_key(spark):
    messages = [
        Message("m", at(0), partition_key="p1", event_id=0),
        Message("m", at(1), partition_key="p2", event_id=1),  # other partition: not a duplicate
        Message("m", at(2), session_id="p1", event_id=2),  # SessionId p1 == key p1
        Message("m", at(3), partition_key="p1", session_id="p1", event_id=3),
        Message("n", at(4), event_id=4),  # neither set: the MessageId is the partition key
        Message("n", at(5), partition_key="n", event_id=5),
        Message("n", at(6), partition_key="", session_id="", event_id=6),  # empty = not set
    ]
    out = check(
        spark,
        messages,
        PARTITIONED,
        ["accepted", "accepted", "duplicate", "duplicate", "accepted", "duplicate", "duplicate"],
    )
    assert out[0].key == ("p1", "m")
    assert out[4].key == ("n", "n")


# SPEC 3: refused sends are rejected and never enter the history.
@pytest.mark.parametrize("policy", [TEN_MIN, PARTITIONED], ids=["disabled", "enabled"])
def test_mismatched_partition_key_and_session_is_rejected(spark, policy):
    messages = [
        Message("m", at(0), partition_key="p", session_id="s", event_id=0),
        Message("m", at(1), partition_key="s", session_id="s", event_id=1),
        Message("m", at(2), session_id="s", event_id=2),
    ]
    out = check(spark, messages, policy, ["rejected", "accepted", "duplicate"])
    assert out[0].reason == REASON_KEY_MISMATCH
    assert out[0].key is None


@pytest.mark.parametrize(
    ("field", "name"),
    [("message_id", "MessageId"), ("partition_key", "PartitionKey"), ("session_id", "SessionId")],
)
def test_properties_longer_than_128_characters_are_rejected(spark, field, name):
    long_id, ok_id = "x" * 129, "é" * 128  # 256 bytes, but 128 characters: accepted
    messages = [
        Message(**{"message_id": "m", "send_time": at(0), "event_id": 0, field: long_id}),
        Message(**{"message_id": "m", "send_time": at(1), "event_id": 1, field: ok_id}),
        Message(**{"message_id": "m", "send_time": at(2), "event_id": 2, field: long_id}),
    ]
    out = check(spark, messages, TEN_MIN, ["rejected", "accepted", "rejected"])
    assert out[0].reason == too_long_reason(name)


def test_missing_send_time_is_rejected(spark):
    messages = [
        Message("m", None, event_id=0),
        Message("m", at(0), event_id=1),
        Message("x" * 200, None, event_id=2),
    ]
    out = check(spark, messages, TEN_MIN, ["rejected", "accepted", "rejected"])
    assert out[0].reason == REASON_MISSING_TIME
    assert out[2].reason == f"{REASON_MISSING_TIME}; {too_long_reason('MessageId')}"


@pytest.mark.connect
def test_sends_without_message_id_are_accepted_with_a_warning(spark):
    messages = [
        Message(None, at(0), event_id=0),
        Message(None, at(1), event_id=1),
        Message("", at(2), event_id=2),
        Message("", at(3), event_id=3),
    ]
    out = check(spark, messages, PARTITIONED, ["accepted"] * 4)
    assert {v.reason for v in out} == {NO_MESSAGE_ID_WARNING}
    assert {v.key for v in out} == {None}


# SPEC 3, batches: with partitioning and detection, a send call whose messages do not share
# one SessionId, PartitionKey and MessageId is refused whole and never enters the history.
def call(*messages, batch_id="b", **common):
    """Messages of one send call, numbered from 0, at time 0 unless given."""
    return [
        Message(**{"send_time": at(0), **m, **common}, event_id=i, batch_id=batch_id)
        for i, m in enumerate(messages)
    ]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(
    "messages",
    [
        call({"message_id": "m", "session_id": "s1"}, {"message_id": "m", "session_id": "s2"}),
        call({"message_id": "m", "partition_key": "p"}, {"message_id": "m"}),
        call({"message_id": "m", "partition_key": "p"}, {"message_id": "n", "partition_key": "p"}),
        call({"message_id": None}, {"message_id": None}),
    ],
    ids=["session", "partition key", "message id", "no message ids"],
)
def test_a_mixed_batch_is_rejected_whole(spark, kernel, messages):
    out = check(spark, messages, PARTITIONED, ["rejected"] * len(messages), kernel=kernel)
    assert {v.reason for v in out} == {REASON_MIXED_BATCH}
    assert {v.key for v in out} == {None}


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_batch_sharing_its_properties_is_judged_message_by_message(spark, kernel):
    shared = {"message_id": "m", "partition_key": "p", "session_id": ""}
    messages = call(shared, shared, {**shared, "send_time": at(1)})
    check(spark, messages, PARTITIONED, ["accepted", "duplicate", "duplicate"], kernel=kernel)


def test_a_refused_batch_never_makes_a_later_send_a_duplicate(spark):
    messages = call({"message_id": "m"}, {"message_id": "n"})
    messages += [Message("m", at(1), event_id=2), Message("m", at(2), event_id=3)]
    check(spark, messages, PARTITIONED, ["rejected", "rejected", "accepted", "duplicate"])


def test_sends_without_batch_id_are_calls_of_their_own(spark):
    messages = call({"message_id": "m"}, {"message_id": "n"}, batch_id=None)
    messages += call({"message_id": "m", "send_time": at(1)}, {"message_id": "k"}, batch_id="")
    check(spark, messages, PARTITIONED, ["accepted", "accepted", "duplicate", "accepted"])


def test_batches_are_per_entity(spark):
    # One batch_id on two entities: two calls, each sharing its properties.
    messages = call({"message_id": "m", "entity": "q"}, {"message_id": "n", "entity": "r"})
    messages += [Message("m", at(1), entity="q", event_id=2, batch_id="b")]
    check(spark, messages, PARTITIONED, ["accepted", "accepted", "duplicate"])


def test_batch_rule_needs_partitioning_and_detection(spark):
    policies = {"on": PARTITIONED, "plain": TEN_MIN, "off": None}
    messages = [
        *call({"message_id": "m"}, {"message_id": "n"}, entity="on"),
        *call({"message_id": "m"}, {"message_id": "n"}, entity="plain"),
        *call({"message_id": "m"}, {"message_id": "n"}, entity="off"),
    ]
    out = check(spark, messages, policies, ["rejected"] * 2 + ["accepted"] * 4)
    assert [v.reason for v in out[2:]] == [None, None, DETECTION_OFF_NOTE, DETECTION_OFF_NOTE]
    check(spark, messages[:2], TEN_MIN, ["accepted", "accepted"])


@pytest.mark.connect
def test_a_mixed_batch_adds_its_reason_after_the_others(spark):
    messages = call({"message_id": "x" * 129}, {"message_id": "m", "send_time": None})
    out = check(spark, messages, PARTITIONED, ["rejected", "rejected"])
    assert out[0].reason == f"{too_long_reason('MessageId')}; {REASON_MIXED_BATCH}"
    assert out[1].reason == f"{REASON_MISSING_TIME}; {REASON_MIXED_BATCH}"


# The Python kernel carries its anchor across Arrow batches; a long key spans many of them.
@pytest.mark.parametrize("batch", [1, 2, 3, 7])
def test_anchor_carries_across_arrow_batches(spark, batch):
    messages = [
        Message(f"k{i % 3}", at(i * 37), event_id=i, entity="q" if i % 5 else None)
        for i in range(60)
    ]
    engine = engine_verdicts(spark, messages, TEN_MIN, batch=batch, kernel="python")
    assert engine == oracle_verdicts(messages, TEN_MIN)


@pytest.mark.parametrize("kernel", KERNELS)
def test_hot_key_over_many_windows(spark, kernel):
    messages = [Message("hot", at(i * 7), event_id=i) for i in range(3000)]
    engine = engine_verdicts(spark, messages, DedupPolicy("PT20S"), batch=64, kernel=kernel)
    assert engine == oracle_verdicts(messages, DedupPolicy("PT20S"))
    assert sum(v.verdict == "accepted" for v in engine) == 2999 * 7 // 21 + 1


# The result: every row once, input columns untouched, output columns typed.
@pytest.mark.connect
def test_result_keeps_every_row_and_column(spark):
    messages = sends(("a", at(0)), ("a", at(1)), (None, at(2)), ("b", None))
    df = frame(spark, messages).withColumn("payload", F.concat(F.lit("p"), F.col("row")))
    out = detect_duplicates(df, TEN_MIN)
    assert out.columns == [
        *df.columns,
        "verdict",
        "reason",
        "dedup_key",
        "original_send_time",
        "original_event_id",
    ]
    types = dict(out.dtypes)
    assert types["original_send_time"] == "timestamp"
    assert types["original_event_id"] == types["event_id"] == "bigint"
    rows = sorted(out.select("row", "payload", "message_id").collect())
    assert [tuple(r) for r in rows] == [(i, f"p{i}", m.message_id) for i, m in enumerate(messages)]


@pytest.mark.connect
def test_event_id_is_added_when_absent(spark):
    df = frame(spark, sends(("a", at(0)), ("a", at(1))), with_event_id=False)
    out = detect_duplicates(df, TEN_MIN).orderBy("row").collect()
    assert out[0]["event_id"] < out[1]["event_id"]
    assert out[1]["original_event_id"] == out[0]["event_id"]


@pytest.mark.connect
def test_string_event_ids_and_timestamp_ntz(spark):
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        check_ntz(spark)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def check_ntz(spark):
    df = spark.createDataFrame(
        [("m", "2024-03-01 12:00:00", "e2"), ("m", "2024-03-01 12:00:00", "e1")],
        "message_id string, t string, event_id string",
    ).select("message_id", F.to_timestamp_ntz("t").alias("send_time"), "event_id")
    out = {
        r["event_id"]: r
        for r in detect_duplicates(df, TEN_MIN)
        .withColumn("original_micros", F.unix_micros("original_send_time"))
        .collect()
    }
    assert out["e1"]["verdict"] == "accepted"
    assert out["e2"]["original_event_id"] == "e1"
    assert out["e2"]["original_micros"] == micros(T0)  # the wall clock read as UTC
    assert dict(detect_duplicates(df, TEN_MIN).dtypes)["send_time"] == "timestamp_ntz"


@pytest.mark.connect
def test_column_names_with_dots_ride_along(spark):
    df = frame(spark, sends(("a", at(0)), ("a", at(1)))).withColumn("payload.v", F.col("row"))
    out = detect_duplicates(df, TEN_MIN)
    assert "payload.v" in out.columns
    assert sorted(r[0] for r in out.select(F.col("`payload.v`")).collect()) == [0, 1]


@pytest.mark.connect
def test_integer_message_ids(spark):
    df = spark.createDataFrame(
        [
            (1, 7, "2024-03-01 12:00:00"),
            (2, 7, "2024-03-01 12:00:05"),
            (3, 70, "2024-03-01 12:00:06"),
        ],
        "event_id long, message_id long, t string",
    ).select("event_id", "message_id", F.col("t").cast("timestamp").alias("send_time"))
    out = {r["event_id"]: r for r in detect_duplicates(df, TEN_MIN).collect()}
    assert [out[i]["verdict"] for i in (1, 2, 3)] == ["accepted", "duplicate", "accepted"]
    assert out[2]["dedup_key"] == "7"


# Bad input: clear errors that name the column.
@pytest.mark.connect
def test_collated_ids_are_refused(spark):
    df = frame(spark, sends(("a", at(0)))).withColumn(
        "message_id", F.col("message_id").cast("string collate UTF8_LCASE")
    )
    with pytest.raises(TypeError, match="message_id has collation UTF8_LCASE"):
        detect_duplicates(df, TEN_MIN)


@pytest.mark.connect
def test_missing_required_column_is_named(spark):
    df = spark.createDataFrame([("a",)], "message_id string")
    with pytest.raises(ValueError, match=r"missing required column\(s\) send_time"):
        detect_duplicates(df, TEN_MIN)


@pytest.mark.connect
def test_send_time_must_be_a_timestamp(spark):
    df = spark.createDataFrame([("a", "2024-01-01")], "message_id string, send_time string")
    with pytest.raises(TypeError, match="send_time must be a timestamp, got string"):
        detect_duplicates(df, TEN_MIN)


@pytest.mark.connect
def test_result_columns_in_the_input_are_refused(spark):
    df = frame(spark, sends(("a", at(0)))).withColumn("Verdict", F.lit("x"))
    with pytest.raises(ValueError, match=r"already has column.*Verdict"):
        detect_duplicates(df, TEN_MIN)
    with pytest.raises(ValueError, match=r"already has column.*__dedup_col0"):
        detect_duplicates(frame(spark, []).withColumn("__dedup_col0", F.lit(1)), TEN_MIN)


# Per-entity settings: each entity replays with its own window and mode.
@pytest.mark.connect
def test_each_entity_uses_its_own_window_and_mode(spark):
    policies = {
        "orders": DedupPolicy("PT20S"),
        "payments": DedupPolicy("PT1M", partitioning=True),
        "audit": None,
    }
    messages = [
        Message("m", at(0), entity="orders", event_id=0),
        Message("m", at(30), entity="orders", event_id=1),
        Message("m", at(0), entity="payments", partition_key="p1", event_id=2),
        Message("m", at(30), entity="payments", partition_key="p1", event_id=3),
        Message("m", at(31), entity="payments", partition_key="p2", event_id=4),
        Message("m", at(0), entity="audit", event_id=5),
        Message("m", at(1), entity="audit", event_id=6),
        Message("m", at(2), entity="billing", event_id=7),
        Message("m", at(3), entity=None, event_id=8),
    ]
    out = check(
        spark,
        messages,
        policies,
        ["accepted"] * 3 + ["duplicate"] + ["accepted"] * 3 + ["rejected"] * 2,
    )
    assert out[5].reason == out[6].reason == DETECTION_OFF_NOTE
    assert out[5].key is None
    assert out[7].reason == "no settings for entity 'billing': the broker answers " + (
        "MessagingEntityNotFound"
    )
    assert out[8].reason == UNKNOWN_NO_ENTITY
    assert out[4].key == ("p2", "m")


@pytest.mark.connect
def test_per_entity_policies_are_checked(spark):
    df = frame(spark, sends(("a", at(0))))
    with pytest.raises(TypeError, match=r"entity 'orders'.*DedupPolicy or None"):
        detect_duplicates(df, {"orders": "PT10M"})
    with pytest.raises(TypeError, match="DedupPolicy or a mapping"):
        detect_duplicates(df, "PT10M")


WINDOWS = st.sampled_from(["PT20S", "30s", "1m", "90s"])
one_policy = st.builds(DedupPolicy, WINDOWS, partitioning=st.booleans())
entity_policies = st.fixed_dictionaries(
    {}, optional={name: st.one_of(st.none(), one_policy) for name in ("", "q1", "q2")}
)


# Agreement with the broker model on generated telemetry: one policy, or one per entity.
@pytest.mark.parametrize("kernel", KERNELS)
@given(
    case=telemetry(),
    policy=st.one_of(one_policy, entity_policies),
    batch=st.sampled_from([1, 2, 5, 10000]),
)
def test_engine_agrees_with_broker_model(spark, kernel, case, policy, batch):
    messages, with_entity, with_event_id = case
    engine = engine_verdicts(
        spark,
        messages,
        policy,
        with_event_id=with_event_id,
        with_entity=with_entity,
        batch=batch,
        kernel=kernel,
    )
    assert engine == oracle_verdicts(messages, policy, with_event_id=with_event_id)
