"""A message-at-a-time model of the Service Bus broker: the rule book, kept obvious.

It is the oracle the Spark engine is tested against, so it favours plainness over speed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dedup_lib.errors import InputError
from dedup_lib.rules.policy import (
    ACCEPTED,
    DETECTION_OFF_NOTE,
    DUPLICATE,
    NO_MESSAGE_ID_WARNING,
    REJECTED,
    DedupPolicy,
    Policies,
    batch_is_mixed,
    batch_rule_applies,
    caught,
    check_policies,
    dedup_key_of,
    is_set,
    policy_for,
    rejection_reasons,
    unknown_entity_reason,
)


@dataclass(frozen=True)
class Message:
    """One send, in the canonical telemetry columns. Messages of one entity that share a
    ``batch_id`` travelled in one send call (a batch); ``None``: a call of its own."""

    message_id: str | None
    send_time: datetime | None
    entity: str | None = None
    partition_key: str | None = None
    session_id: str | None = None
    scheduled_enqueue_time: datetime | None = None
    event_id: Any = None
    batch_id: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What the broker did with one send; ``original`` is the accepted send that caught it."""

    verdict: str
    reason: str | None = None
    key: tuple[str, ...] | None = None
    original: Message | None = None


class Broker:
    """One namespace: a duplicate history per entity, fed sends in arrival order.

    ``policy`` is one policy for every entity, or a mapping of entity name to its own policy
    (``None`` where detection is off); sends to entities the mapping lacks are rejected.
    """

    def __init__(self, policy: Policies) -> None:
        self.policy = check_policies(policy)
        self._anchors: dict[tuple[str | None, tuple[str, ...]], Message] = {}
        self._clock: datetime | None = None

    def send(self, message: Message, batch: Sequence[Message] = ()) -> Outcome:
        """Judge ``message``; ``batch`` is every message of the send call that carried it
        (itself included), or empty for a call of its own. On an entity with partitioning
        and detection, a batch whose messages do not share one MessageId, PartitionKey and
        SessionId is refused whole, and none of it enters the history (docs/rules.md, section 3)."""
        policy = policy_for(self.policy, message.entity)
        mixed = batch_rule_applies(policy) and batch_is_mixed(
            [(m.message_id, m.partition_key, m.session_id) for m in batch]
        )
        reasons = rejection_reasons(
            message.send_time is not None,
            message.message_id,
            message.partition_key,
            message.session_id,
            mixed_batch=mixed,
        )
        if policy == "unknown":
            reasons.append(unknown_entity_reason(message.entity))
        if reasons:
            return Outcome(REJECTED, "; ".join(reasons))
        now = message.send_time
        assert now is not None
        if self._clock is not None and now < self._clock:
            raise InputError(f"sends must arrive in time order: {now} came after {self._clock}")
        self._clock = now
        if policy is None:
            return Outcome(ACCEPTED, DETECTION_OFF_NOTE)
        assert isinstance(policy, DedupPolicy)
        if not is_set(message.message_id):
            return Outcome(ACCEPTED, NO_MESSAGE_ID_WARNING)
        assert message.message_id is not None
        key = dedup_key_of(
            message.message_id,
            message.partition_key,
            message.session_id,
            policy.partitioning,
        )
        anchor = self._anchors.get((message.entity, key))
        if anchor is not None:
            assert anchor.send_time is not None
            if caught(anchor.send_time, now, policy.window):
                return Outcome(DUPLICATE, None, key, anchor)
        self._anchors[(message.entity, key)] = message
        return Outcome(ACCEPTED, None, key)


def arrival_order(messages: Sequence[Message]) -> list[int]:
    """Positions of ``messages`` in the order the broker sees them: by send time, then by
    ``event_id`` (missing ones last), then by position in the input. Timeless sends go first;
    they are rejected whatever their place."""

    def rank(i: int) -> tuple[Any, ...]:
        m = messages[i]
        return (
            m.send_time is not None,
            m.send_time or datetime.min,
            m.event_id is None,
            0 if m.event_id is None else m.event_id,
            i,
        )

    return sorted(range(len(messages)), key=rank)


def send_calls(messages: Sequence[Message]) -> list[list[Message]]:
    """Per message, the messages of its send call: those of its entity with its ``batch_id``,
    or itself alone when it has none (null or empty, which a CSV cannot tell apart)."""
    calls: dict[tuple[str | None, str | None], list[Message]] = {}
    for m in messages:
        if is_set(m.batch_id):
            calls.setdefault((m.entity, m.batch_id), []).append(m)
    return [calls[(m.entity, m.batch_id)] if is_set(m.batch_id) else [m] for m in messages]


def broker_outcomes(messages: Iterable[Message], policy: Policies) -> list[Outcome]:
    """Each message's outcome, in input order, however the input is sorted."""
    messages = list(messages)
    broker = Broker(policy)
    calls = send_calls(messages)
    outcomes: list[Outcome | None] = [None] * len(messages)
    for i in arrival_order(messages):
        outcomes[i] = broker.send(messages[i], calls[i])
    assert all(o is not None for o in outcomes)
    return outcomes  # type: ignore[return-value]
