"""The rules decided in Spark SQL before any pass: the input's checks, the rejections (mixed
batches included), the sends without MessageId, entities without detection or without
settings, and the dedup key.

Spark twins of :func:`dedup_lib.rules.policy.rejection_reasons` and
:func:`dedup_lib.rules.policy.dedup_key_of`, with the per-entity rules of
:class:`dedup_lib.rules.broker.Broker`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import INTERNAL, MIXED_BATCH
from dedup_lib.errors import InputError, InputTypeError
from dedup_lib.rules.policy import (
    ACCEPTED,
    DETECTION_OFF_NOTE,
    MAX_PROPERTY_LENGTH,
    NO_MESSAGE_ID_WARNING,
    PROPERTY_NAMES,
    REASON_KEY_MISMATCH,
    REASON_MISSING_TIME,
    REASON_MIXED_BATCH,
    REJECTED,
    UNKNOWN_ENTITY,
    UNKNOWN_NO_ENTITY,
    DedupPolicy,
    Policies,
    batch_rule_applies,
    too_long_reason,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

REQUIRED = ("message_id", "send_time")
OUTPUT_COLUMNS = ("verdict", "reason", "dedup_key", "original_send_time", "original_event_id")


def is_set(value: Column) -> Column:
    return value.isNotNull() & (value != F.lit(""))


def text(df: DataFrame, name: str) -> Column:
    return F.col(name).cast("string") if name in df.columns else F.lit(None).cast("string")


def validate(df: DataFrame) -> None:
    fields = {f.name: f.dataType for f in df.schema.fields}
    lower = {name.lower(): name for name in fields}
    missing = [c for c in REQUIRED if c not in fields]
    if missing:
        raise InputError(
            f"detect_duplicates: missing required column(s) {', '.join(missing)}; the input has "
            f"{', '.join(fields) or 'no columns'}. Load files with load_telemetry(), or pass a "
            "mapping of your column names."
        )
    clashes = [lower[c] for c in OUTPUT_COLUMNS if c in lower]
    clashes += [name for name in fields if name.lower().startswith(INTERNAL)]
    if clashes:
        raise InputError(
            f"detect_duplicates: the input already has column(s) {', '.join(clashes)}, which the "
            "result adds or uses inside; is it already a detect_duplicates result? Drop or "
            "rename them first."
        )
    send_type = fields["send_time"]
    if not isinstance(send_type, T.TimestampType | T.TimestampNTZType):
        raise InputTypeError(
            f"detect_duplicates: column send_time must be a timestamp, got "
            f"{send_type.simpleString()}; load_telemetry() parses ISO 8601 and epoch values"
        )
    for name in ("message_id", "partition_key", "session_id", "entity", "batch_id"):
        if name in fields and not isinstance(
            fields[name], T.StringType | T.IntegralType | T.DecimalType
        ):
            raise InputTypeError(
                f"detect_duplicates: column {name} must be text, got {fields[name].simpleString()}"
            )
    for name in ("message_id", "partition_key", "session_id", "entity", "event_id"):
        collation = getattr(fields.get(name), "collation", "UTF8_BINARY")
        if collation != "UTF8_BINARY":
            raise InputTypeError(
                f"detect_duplicates: column {name} has collation {collation}; the broker "
                f"compares ids byte for byte: cast it with .cast('string') first"
            )
    if "event_id" in fields and isinstance(fields["event_id"], T.MapType | T.VariantType):
        raise InputTypeError(
            f"detect_duplicates: column event_id must be orderable, got "
            f"{fields['event_id'].simpleString()}"
        )


@dataclass(frozen=True)
class Rules:
    """The rules decided in Spark SQL, over one frame's columns."""

    #: True for sends the pass does not judge: rejected, without MessageId, detection off.
    decided: Column
    #: Their verdict and reason (null for the sends the pass judges).
    verdict: Column
    reason: Column
    #: The dedup key, null for decided sends.
    key: Column


def sql_rules(df: DataFrame, policies: Policies, *, rejections: bool = True) -> Rules:
    """Spark twins of :func:`policy.rejection_reasons` and :func:`policy.dedup_key_of`,
    with the per-entity rules of :class:`broker.Broker`.

    Built twice per replay: before the pass for ``decided`` and the key, after it for the
    texts, so that no verdict or reason strings travel through the shuffle and the sort.
    ``rejections=False``: the caller has counted, with these rules, that no send of ``df``
    is rejected; the checks are left out, and with them the columns only they read.
    """
    mid, pk, sid = (text(df, c) for c in ("message_id", "partition_key", "session_id"))
    entity = text(df, "entity")
    checks = _checks(df, policies) if rejections else []
    off: Column = F.lit(False)
    if not isinstance(policies, DedupPolicy):
        off_names = [name for name, policy in policies.items() if policy is None]
        if off_names:
            off = F.coalesce(entity.isin(off_names), F.lit(False))
    rejected = F.coalesce(*(F.when(test, F.lit(True)) for test, _ in checks), F.lit(False))
    rejection = F.concat_ws("; ", *(F.when(test, text) for test, text in checks))
    reason = (
        F.when(rejected, rejection)
        .when(off, F.lit(DETECTION_OFF_NOTE))
        .when(~is_set(mid), F.lit(NO_MESSAGE_ID_WARNING))
        .otherwise(F.lit(None).cast("string"))
    )
    verdict = (
        F.when(rejected, F.lit(REJECTED))
        .when(off | ~is_set(mid), F.lit(ACCEPTED))
        .otherwise(F.lit(None).cast("string"))
    )
    decided = rejected | off | ~F.coalesce(is_set(mid), F.lit(False))
    effective = F.coalesce(F.when(is_set(sid), sid), F.when(is_set(pk), pk), mid)
    mode = partitioned(policies)
    if mode is True:
        key = F.to_json(F.array(effective, mid))
    elif mode is False:
        key = mid
    else:
        key = F.when(entity.isin(mode), F.to_json(F.array(effective, mid))).otherwise(mid)
    return Rules(decided, verdict, reason, F.when(~decided, key))


def _checks(df: DataFrame, policies: Policies) -> list[tuple[Column, Column]]:
    """Each rejection rule: when it applies, and the reason it gives."""
    mid, pk, sid = (text(df, c) for c in ("message_id", "partition_key", "session_id"))
    entity = text(df, "entity")
    checks = [(F.col("send_time").isNull(), F.lit(REASON_MISSING_TIME))]
    for name, value in (("message_id", mid), ("partition_key", pk), ("session_id", sid)):
        # No text of at most 128 bytes has more than 128 characters: count them only past that.
        longer = (F.octet_length(value) > MAX_PROPERTY_LENGTH) & (
            F.length(value) > MAX_PROPERTY_LENGTH
        )
        checks.append((longer, F.lit(too_long_reason(PROPERTY_NAMES[name]))))
    checks.append((is_set(pk) & is_set(sid) & (pk != sid), F.lit(REASON_KEY_MISMATCH)))
    if not isinstance(policies, DedupPolicy):
        known = entity.isin(list(policies)) if policies else F.lit(False)
        unknown = F.when(entity.isNull(), F.lit(UNKNOWN_NO_ENTITY)).otherwise(
            F.concat(F.lit(UNKNOWN_ENTITY[0]), entity, F.lit(UNKNOWN_ENTITY[1]))
        )
        checks.append((~F.coalesce(known, F.lit(False)), unknown))
    if MIXED_BATCH in df.columns:
        checks.append((F.col(MIXED_BATCH), F.lit(REASON_MIXED_BATCH)))
    return checks


def batch_entities(policies: Policies) -> bool | list[str]:
    """Where the batch rule applies (partitioning and detection): every entity (True), none
    (False), or the entities named."""
    if isinstance(policies, DedupPolicy):
        return batch_rule_applies(policies)
    return [name for name, policy in policies.items() if batch_rule_applies(policy)]


def with_batches(df: DataFrame, policies: Policies, row: Column) -> DataFrame:
    """``df`` with :data:`MIXED_BATCH` where the batch rule can apply (a ``batch_id`` column,
    and an entity with partitioning and detection); else ``df`` itself, at no cost.

    A batch is the sends of one entity sharing a set ``batch_id`` (null or empty: a send call
    of its own). It is mixed when its messages do not share one MessageId, PartitionKey and
    SessionId, as :func:`dedup_lib.rules.policy.batch_is_mixed` says: empty is not set, not
    set differs from set, and two sends without a MessageId differ (each gets a fresh one).
    One window aggregate per (entity, batch_id); ``row`` (unique per send) spreads the sends
    outside batches, so that they never pile up in one partition.
    """
    where = batch_entities(policies)
    if "batch_id" not in df.columns or not where:
        return df
    entity, batch = text(df, "entity"), text(df, "batch_id")
    in_call = is_set(batch)
    if where is not True:
        in_call = in_call & entity.isin(where)
    in_call = F.coalesce(in_call, F.lit(False))
    call = Window.partitionBy(entity, F.when(in_call, batch), F.when(~in_call, row))
    sends = F.count(F.lit(1)).over(call)

    def shared(value: Column, required: bool) -> Column:
        present = F.when(is_set(value), value)
        count = F.count(present).over(call)
        same = (count == sends) & (F.min(present).over(call) == F.max(present).over(call))
        return same if required else same | (count == 0)

    mid, pk, sid = (text(df, c) for c in ("message_id", "partition_key", "session_id"))
    shares = shared(mid, True) & shared(pk, False) & shared(sid, False)
    return df.withColumn(MIXED_BATCH, in_call & (sends > 1) & ~F.coalesce(shares, F.lit(False)))


def partitioned(policies: Policies) -> bool | list[str]:
    """True or False when every checked entity is alike, else the partitioned entities."""
    if isinstance(policies, DedupPolicy):
        return policies.partitioning
    modes = {name: p.partitioning for name, p in policies.items() if p is not None}
    if len(set(modes.values())) <= 1:
        return next(iter(modes.values()), False)
    return [name for name, on in modes.items() if on]


def entity_window(df: DataFrame, windows: dict[str, int]) -> Column:
    """Each send's window in microseconds, by its entity (0 for entities without one)."""
    per_entity = F.create_map(*(F.lit(x) for pair in windows.items() for x in pair))
    return F.coalesce(per_entity[text(df, "entity")], F.lit(0)).cast("long")


def window_us(policies: Policies) -> int | dict[str, int]:
    """The window in microseconds when every checked entity has the same, else per entity."""
    if isinstance(policies, DedupPolicy):
        return policies.window_us
    windows = {name: p.window_us for name, p in policies.items() if p is not None}
    if len(set(windows.values())) <= 1:
        return next(iter(windows.values()), DedupPolicy().window_us)
    return windows
