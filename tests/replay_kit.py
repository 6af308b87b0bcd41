"""Run the Spark engine and the broker oracle on the same sends, and line their answers up."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates
from dedup_lib.rules.policy import parse_dedup_key, policy_for
from dedup_lib.testing import Message, broker_outcomes

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def micros(t: datetime | None) -> int | None:
    return None if t is None else (t - EPOCH) // timedelta(microseconds=1)


@dataclass(frozen=True)
class Verdict:
    """One row's answer; the original is named by its event_id, or by its input row number
    when the input has no event_id."""

    verdict: str
    reason: str | None
    key: tuple[str, ...] | None
    original: Any
    original_time: int | None


def frame(
    spark: SparkSession,
    messages: list[Message],
    *,
    with_event_id: bool = True,
    with_entity: bool = True,
    event_id_type: str = "long",
    with_batch: bool | None = None,
) -> Any:
    """A DataFrame of the canonical columns plus ``row``, the input position (rides along).
    ``batch_id`` is there when ``with_batch``, by default when some message has one."""
    if with_batch is None:
        with_batch = any(m.batch_id is not None for m in messages)
    fields = [
        "row int",
        "message_id string",
        "send_time timestamp",
        "partition_key string",
        "session_id string",
        "scheduled_enqueue_time timestamp",
    ]
    if with_entity:
        fields.append("entity string")
    if with_event_id:
        fields.append(f"event_id {event_id_type}")
    if with_batch:
        fields.append("batch_id string")
    rows = []
    for i, m in enumerate(messages):
        row: list[Any] = [
            i,
            m.message_id,
            m.send_time,
            m.partition_key,
            m.session_id,
            m.scheduled_enqueue_time,
        ]
        if with_entity:
            row.append(m.entity)
        if with_event_id:
            row.append(m.event_id)
        if with_batch:
            row.append(m.batch_id)
        rows.append(tuple(row))
    return spark.createDataFrame(rows, ", ".join(fields))


def engine_verdicts(
    spark: SparkSession,
    messages: list[Message],
    policy: Any,
    *,
    with_event_id: bool = True,
    with_entity: bool = True,
    batch: int | None = None,
    kernel: str = "jvm",
) -> list[Verdict]:
    """The engine's answers, in input order; the JVM kernel unless told otherwise (an explicit
    kernel fails where it is missing, instead of falling back unseen)."""
    df = frame(spark, messages, with_event_id=with_event_id, with_entity=with_entity)
    if batch is not None:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch))
    try:
        out = (
            detect_duplicates(df, policy, kernel=kernel)  # type: ignore[arg-type]
            .select(
                "row",
                "event_id",
                "verdict",
                "reason",
                "dedup_key",
                F.unix_micros("original_send_time").alias("original_micros"),
                "original_event_id",
            )
            .collect()
        )
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
    assert sorted(r["row"] for r in out) == list(range(len(messages))), "rows lost or repeated"
    row_of_event = {r["event_id"]: r["row"] for r in out}
    by_row = {r["row"]: r for r in out}
    answers = []
    for i in range(len(messages)):
        r = by_row[i]
        original = r["original_event_id"]
        if original is not None and not with_event_id:
            original = row_of_event[original]
        answers.append(
            Verdict(
                r["verdict"],
                r["reason"],
                None
                if r["dedup_key"] is None
                else parse_dedup_key(r["dedup_key"], _partitioning(policy, messages[i].entity)),
                original,
                r["original_micros"],
            )
        )
    return answers


def _partitioning(policy: Any, entity: str | None) -> bool:
    chosen = policy_for(policy, entity)
    return isinstance(chosen, DedupPolicy) and chosen.partitioning


def oracle_verdicts(
    messages: list[Message], policy: Any, *, with_event_id: bool = True
) -> list[Verdict]:
    """The broker model's answers, in input order."""
    if not with_event_id:
        messages = [replace(m, event_id=None) for m in messages]
    index = {id(m): i for i, m in enumerate(messages)}

    def ref(original: Message) -> Any:
        return original.event_id if with_event_id else index[id(original)]

    return [
        Verdict(
            o.verdict,
            o.reason,
            o.key,
            None if o.original is None else ref(o.original),
            None if o.original is None else micros(o.original.send_time),
        )
        for o in broker_outcomes(messages, policy)
    ]


# Hypothesis strategies: telemetry with the edge cases the rules care about.
ids = st.sampled_from(["a", "b", "c", "a", "b", "", None, "x" * 129, "ünï/42", "é" * 100])
keys = st.sampled_from([None, None, "", "p1", "p2", "a", "y" * 129])
#: Send calls: most sends alone (null), an empty id (alone too), a few batches.
batch_ids = st.sampled_from([None, None, "", "b1", "b1", "b2", "b3"])


@st.composite
def telemetry(draw):
    n = draw(st.integers(0, 60))
    pool = draw(st.lists(ids, min_size=1, max_size=4))
    with_entity = draw(st.booleans())
    event_ids = draw(st.sampled_from(["unique", "clashing", "absent"]))
    batching = draw(st.booleans())
    messages = []
    for i in range(n):
        t = draw(st.one_of(st.integers(0, 24).map(lambda k: at(k * 10)), st.none()))
        if t is not None and draw(st.integers(0, 9)) == 0:
            t += timedelta(microseconds=draw(st.integers(-1, 1)))
        event_id = {
            "unique": n - i,
            "clashing": draw(st.one_of(st.integers(0, 3), st.none())),
            "absent": None,
        }[event_ids]
        messages.append(
            Message(
                message_id=draw(st.sampled_from(pool)),
                send_time=t,
                entity=draw(st.sampled_from([None, "", "q1", "q2"])) if with_entity else None,
                partition_key=draw(keys),
                session_id=draw(keys),
                scheduled_enqueue_time=draw(st.one_of(st.none(), st.integers(0, 500).map(at))),
                event_id=event_id,
                batch_id=draw(batch_ids) if batching else None,
            )
        )
        if batching and i and draw(st.integers(0, 3)) == 0:
            # A batch whose messages share their properties, or a second message of the call.
            before = messages[-2]
            messages[-1] = replace(
                messages[-1],
                message_id=before.message_id,
                partition_key=before.partition_key,
                session_id=before.session_id,
                entity=before.entity,
                batch_id=before.batch_id or "b1",
            )
    return messages, with_entity, event_ids != "absent"


def mixed_scenario() -> Any:
    """Six hours of senders with every id policy, crashes, replays, sessions and mismatched
    keys, and batches of distinct ids (refused with partitioning), on several entities:
    small, but with every kind of duplicate and loss."""
    from dedup_lib.synth import Scenario, Sender

    return Scenario(
        datetime(2026, 3, 2, tzinfo=UTC),
        timedelta(hours=6),
        (
            Sender("shop", ("q1", "q2"), 0.5, "order", "business", ack_loss=0.1,
                   crashes_per_day=40, unacked=15, replays_per_day=8, replay_batch=30,
                   replay_min=600, replay_median=1800, session_share=0.5,
                   partition_key_share=0.7, key_mismatch_share=0.05),
            Sender("mail", ("mail",), 0.2, "mail", "guid_per_attempt", ack_loss=0.2),
            Sender("legacy", ("q1",), 0.1, "legacy", "constant", ack_loss=0.05),
            Sender("stock", ("stock",), 0.1, "stock", "reused", reused_pool=9, ack_loss=0.05,
                   batch_size=4),
            Sender("audit", ("audit",), 0.1, "audit", "none", ack_loss=0.1),
        ),
        bursts_per_day=0,
    )  # fmt: skip
