"""What-ifs: the key as the content (SQS FIFO), the history as the last N ids (Artemis)."""

from __future__ import annotations

from collections import deque
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates, generate_telemetry, summarize
from dedup_lib.analysis.whatif import by_content, compare_keys, count_sweep
from dedup_lib.replay.by_count import detect_duplicates_by_count
from dedup_lib.rules.broker import arrival_order
from dedup_lib.rules.policy import batch_is_mixed, dedup_key_of, is_set, rejection_reasons
from dedup_lib.testing import Message, send_calls
from replay_kit import at, frame, mixed_scenario, telemetry

ZERO = "00000000-0000-0000-0000-000000000000"


def with_content(spark, rows):
    """Sends as (message_id, seconds, payload_hash, entity)."""
    messages = [Message(m, at(t), entity=e, event_id=i) for i, (m, t, _, e) in enumerate(rows)]
    hashes = spark.createDataFrame(
        [(i, r[2]) for i, r in enumerate(rows)], "row int, payload_hash string"
    )
    return frame(spark, messages).join(hashes, "row")


@pytest.mark.connect
def test_content_key_catches_fresh_ids_and_spares_reused_ones(spark):
    rows = [
        ("guid-1", 0, "a", "q"),
        ("guid-2", 1, "a", "q"),  # a retry under a new id: only content catches it
        (ZERO, 2, "b", "q"),
        (ZERO, 3, "c", "q"),  # another message under the zero GUID: only the id drops it
        ("x", 4, None, "q"),  # no content: judged like a send without MessageId
        ("y" * 129, 5, "a", "q"),  # refused for its id in both
    ]
    judged = by_content(with_content(spark, rows), DedupPolicy("PT10M"))
    got = {
        r["row"]: (r["verdict"], r["content_verdict"], r["content_original_event_id"])
        for r in judged.collect()
    }
    assert got == {
        0: ("accepted", "accepted", None),
        1: ("accepted", "duplicate", 0),
        2: ("accepted", "accepted", None),
        3: ("duplicate", "accepted", None),
        4: ("accepted", "accepted", None),
        5: ("rejected", "rejected", None),
    }
    assert (
        judged.columns[: len(with_content(spark, rows).columns)]
        == with_content(spark, rows).columns
    )
    assert {r["message_id"] for r in judged.collect()} == {"guid-1", "guid-2", ZERO, "x", "y" * 129}
    table = compare_keys(judged).set_index("entity")
    assert table.loc["q"].tolist() == [6, 1, 1, 0, 1, 1]


@pytest.mark.connect
def test_count_cache_forgets_by_count_not_time(spark):
    rows = [("a", 0), ("b", 1), ("a", 86400 * 30), ("c", 86400 * 31), ("d", 86400 * 32)]
    rows += [("a", 86400 * 33)]
    df = frame(spark, [Message(m, at(t), entity="q", event_id=i) for i, (m, t) in enumerate(rows)])
    verdicts = {
        cap: [r["verdict"] for r in detect_duplicates_by_count(df, cap).orderBy("row").collect()]
        for cap in (3, 4)
    }
    # A month later 'a' is still held; after b, c and d it is gone at 3 ids, held at 4.
    assert verdicts[3] == ["accepted", "accepted", "duplicate", "accepted", "accepted", "accepted"]
    assert verdicts[4] == ["accepted", "accepted", "duplicate", "accepted", "accepted", "duplicate"]
    with pytest.raises(ValueError, match="capacity: expected a positive number of ids, got 0"):
        detect_duplicates_by_count(df, 0)


def count_model(messages, capacity, partitioning):
    """The last-N-ids cache, one send at a time: the obvious version. Mixed batches are
    refused with partitioning, as the broker refuses them."""
    out = [None] * len(messages)
    caches: dict = {}
    calls = send_calls(messages)
    for i in arrival_order(messages):
        m = messages[i]
        members = [(c.message_id, c.partition_key, c.session_id) for c in calls[i]]
        mixed = partitioning and batch_is_mixed(members)
        ids = (m.message_id, m.partition_key, m.session_id)
        if rejection_reasons(m.send_time is not None, *ids, mixed_batch=mixed):
            out[i] = "rejected"
            continue
        if not is_set(m.message_id):
            out[i] = "accepted"
            continue
        key = dedup_key_of(m.message_id, m.partition_key, m.session_id, partitioning)
        held = caches.setdefault(m.entity, deque(maxlen=capacity))
        if key in held:
            out[i] = "duplicate"
        else:
            out[i] = "accepted"
            held.append(key)
    return out


#: Each example a Spark job: a third of the profile's examples, as the sweep's edge cases take.
@settings(max_examples=max(10, settings().max_examples // 3))
@given(case=telemetry(), capacity=st.integers(1, 4), partitioning=st.booleans())
def test_count_cache_agrees_with_the_obvious_model(spark, case, capacity, partitioning):
    messages, with_entity, with_event_id = case
    df = frame(spark, messages, with_event_id=with_event_id, with_entity=with_entity)
    got = detect_duplicates_by_count(df, capacity, partitioning).orderBy("row").collect()
    if not with_entity:
        messages = [Message(**{**m.__dict__, "entity": None}) for m in messages]
    if not with_event_id:
        messages = [Message(**{**m.__dict__, "event_id": None}) for m in messages]
    assert [r["verdict"] for r in got] == count_model(messages, capacity, partitioning)
    for r in got:
        if r["verdict"] == "duplicate":
            assert r["original_send_time"] is not None


@pytest.mark.connect
def test_count_sweep_against_time_windows(spark):
    sends = generate_telemetry(spark, 3_000, seed=5, scenario=mixed_scenario()).persist()
    try:
        table = count_sweep(sends, (10, 100_000))
        assert list(table.columns) == [
            "capacity", "ids_held", "duplicates", "resends_caught", "extra_deliveries",
            "messages_lost",
        ]  # fmt: skip
        small, large = table.to_dict("records")
        assert small["ids_held"] <= 10 * 5 < large["ids_held"]
        assert small["duplicates"] < large["duplicates"]
        # One pass judges both capacities, each as a pass of its own would.
        alone = summarize(detect_duplicates_by_count(sends, 10)).iloc[-1]
        assert small["duplicates"] == alone["duplicates"]
        # A cache that never forgets drops what any time window drops, and more.
        week = detect_duplicates(sends, DedupPolicy("P7D")).where(F.col("verdict") == "duplicate")
        assert large["duplicates"] >= week.count()
    finally:
        sends.unpersist()


@pytest.mark.connect
def test_by_content_keeps_windows_per_entity(spark):
    rows = [("a", 0, "h", "q"), ("b", 30, "h", "q"), ("a", 0, "h", "r"), ("b", 30, "h", "r")]
    policies = {"q": DedupPolicy("PT20S"), "r": DedupPolicy(timedelta(minutes=1))}
    judged = by_content(with_content(spark, rows), policies).orderBy("row").collect()
    assert [r["content_verdict"] for r in judged] == [
        "accepted",
        "accepted",
        "accepted",
        "duplicate",
    ]
