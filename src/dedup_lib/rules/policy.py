"""The duplicate-detection policy of one entity: window, partitioning mode and the key rule.

Pure Python: the Spark engine and the message-at-a-time broker model both take their
constants and rules from here (docs/rules.md, sections 1 to 4).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, TypeAlias

from dedup_lib.errors import InputError, InputTypeError, excerpt
from dedup_lib.rules.durations import format_window, parse_window

#: Longest MessageId, PartitionKey or SessionId the SDKs accept (azure-servicebus, .NET).
MAX_PROPERTY_LENGTH = 128

DEFAULT_WINDOW = timedelta(minutes=10)

Bounds = Literal["service", "emulator", "none"]
#: Window bounds, inclusive, and the wording the service (or our emulator twin) answers with.
WINDOW_BOUNDS: dict[str, tuple[timedelta, timedelta, str]] = {
    "service": (
        timedelta(seconds=20),
        timedelta(days=7),
        "The value supplied must be between 00:00:20 and 7.00:00:00",
    ),
    "emulator": (
        timedelta(seconds=5),
        timedelta(minutes=5),
        "The value supplied must be between 00:00:05 and 00:05:00 (Service Bus emulator)",
    ),
}

ACCEPTED = "accepted"
DUPLICATE = "duplicate"
REJECTED = "rejected"

REASON_MISSING_TIME = "missing send_time: the send has no place on the time line"
REASON_KEY_MISMATCH = "PartitionKey and SessionId differ: the SDK refuses to build the message"
#: The service's answer to a batch it refuses (docs/rules.md, section 3;
#: Azure/azure-service-bus#103).
REASON_MIXED_BATCH = (
    "Batching brokered messages with distinct SessionId, PartitionKey, or MessageId is not "
    "supported for an entity with partitioning and duplicate detection enabled."
)
NO_MESSAGE_ID_WARNING = (
    "no MessageId: the service assigns a unique one, so duplicate detection cannot protect it"
)

DETECTION_OFF_NOTE = "duplicate detection is off on this entity: duplicates were not checked"


UNKNOWN_ENTITY = ("no settings for entity '", "': the broker answers MessagingEntityNotFound")
UNKNOWN_NO_ENTITY = "no entity, and the settings are per entity: cannot be judged"


def unknown_entity_reason(entity: str | None) -> str:
    """The rejection reason for a send to an entity the per-entity settings do not name."""
    if entity is None:
        return UNKNOWN_NO_ENTITY
    return entity.join(UNKNOWN_ENTITY)


def too_long_reason(prop: str) -> str:
    """The rejection reason for a property longer than the SDKs accept."""
    return f"{prop} longer than {MAX_PROPERTY_LENGTH} characters: the SDK refuses it"


#: Property name as the SDK knows it, per canonical column.
PROPERTY_NAMES = {
    "message_id": "MessageId",
    "partition_key": "PartitionKey",
    "session_id": "SessionId",
}


@dataclass(frozen=True)
class DedupPolicy:
    """How one entity detects duplicates: its window and whether it is partitioned.

    Parameters
    ----------
    window : timedelta or str, default 10 minutes
        How long an accepted send's dedup key is remembered: a ``timedelta``, an ISO 8601
        duration (``"PT10M"``, ``"P1D"``), a .NET TimeSpan (``"00:10:00"``) or anything
        else :func:`parse_window` reads. The default is the Resource Manager default.
    partitioning : bool, default False
        Whether the entity is partitioned: the dedup key is then the partition key and the
        MessageId, and some batches are refused (docs/rules.md, sections 2 and 3).
    bounds : {"service", "emulator", "none"}, default "service"
        The windows allowed: the service's 20 s to 7 days, the emulator's 5 s to 5 min, or
        any positive window up to :data:`~dedup_lib.rules.durations.MAX_WINDOW` (what a
        .NET TimeSpan holds) for what-if windows the service would refuse.

    Raises
    ------
    InputError
        A window that does not read, or is outside ``bounds`` (the message says which
        bounds and how to pass a what-if window).
    InputTypeError
        ``partitioning`` that is not a bool.

    Examples
    --------
    >>> from dedup_lib import DedupPolicy
    >>> DedupPolicy("PT10M").window
    datetime.timedelta(seconds=600)
    >>> DedupPolicy("P1D", partitioning=True).partitioning
    True
    >>> DedupPolicy("PT5S")
    Traceback (most recent call last):
    ...
    dedup_lib.errors.InputError: The value supplied must be between 00:00:20 and 7.00:00:00
    (got 5s); pass bounds='none' for a what-if window outside them
    >>> DedupPolicy("PT5S", bounds="emulator").window
    datetime.timedelta(seconds=5)
    """

    window: timedelta = field(default=DEFAULT_WINDOW)
    partitioning: bool = False
    bounds: Bounds = "service"

    def __post_init__(self) -> None:
        window = parse_window(self.window)
        object.__setattr__(self, "window", window)
        if not isinstance(self.partitioning, bool):
            raise InputTypeError(
                f"partitioning: expected True or False, got {excerpt(self.partitioning)}"
            )
        if window <= timedelta(0):
            raise InputError(f"window: must be positive, got {format_window(window)}")
        if self.bounds == "none":
            return
        if not isinstance(self.bounds, str) or self.bounds not in WINDOW_BOUNDS:
            raise InputError(
                f"bounds: expected 'service', 'emulator' or 'none', got {excerpt(self.bounds)}"
            )
        low, high, wording = WINDOW_BOUNDS[self.bounds]
        if not low <= window <= high:
            raise InputError(
                f"{wording} (got {format_window(window)}); "
                "pass bounds='none' for a what-if window outside them"
            )

    @property
    def window_us(self) -> int:
        """int: The window in whole microseconds, the unit the replay compares send times in."""
        return self.window // timedelta(microseconds=1)

    @property
    def window_micros(self) -> int:
        """int: The window in whole microseconds: :attr:`window_us` under its former name.

        .. deprecated:: 0.2.0
            ``window_micros`` is :attr:`window_us` (the glossary's one word for microseconds)
            and goes in the release after this one.

        Warns
        -----
        DeprecationWarning
            Each time it is read.
        """
        warnings.warn(
            "DedupPolicy.window_micros is deprecated: read DedupPolicy.window_us",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.window_us

    def describe(self) -> str:
        """The window and the partitioning mode in words, as reports and logs say them.

        Returns
        -------
        str
            ``window <duration>, partitioning enabled`` (or ``disabled``), the window as
            :func:`~dedup_lib.rules.durations.format_window` writes it.

        Examples
        --------
        >>> from dedup_lib import DedupPolicy
        >>> DedupPolicy("PT10M").describe()
        'window 10m, partitioning disabled'
        >>> DedupPolicy("P1D", partitioning=True).describe()
        'window 1d, partitioning enabled'
        """
        mode = "partitioning enabled" if self.partitioning else "partitioning disabled"
        return f"window {format_window(self.window)}, {mode}"


#: One policy for every entity, or each entity's own by name (``None``: detection off).
Policies: TypeAlias = DedupPolicy | Mapping[str, DedupPolicy | None]


def caught(anchor: Any, now: Any, window: Any) -> bool:
    """True when a send at ``now`` falls in the window of the accepted send at ``anchor``:
    half-open, ``anchor <= now < anchor + window`` (docs/rules.md, section 1). Any ordered time
    type: datetimes and a timedelta (the broker model), microseconds (the live monitor)."""
    return bool(anchor <= now < anchor + window)


def policy_for(policies: Policies, entity: str | None) -> DedupPolicy | Literal["unknown"] | None:
    """The policy one entity replays with: the single policy, its own from a per-entity
    mapping, ``None`` where detection is off, or ``"unknown"`` for an entity not in the mapping."""
    if isinstance(policies, DedupPolicy):
        return policies
    if entity is None or entity not in policies:
        return "unknown"
    return policies[entity]


def check_policies(
    policies: Policies,
) -> Policies:
    """Refuse anything but a policy or a mapping of entity names to policies or ``None``."""
    if isinstance(policies, DedupPolicy):
        return policies
    if not hasattr(policies, "items"):
        raise InputTypeError(
            f"policy: expected a DedupPolicy or a mapping of entity name to DedupPolicy or None, "
            f"got {type(policies).__name__}"
        )
    for name, value in policies.items():
        if not isinstance(name, str):
            raise InputTypeError(f"policy: entity names must be text, got {excerpt(name)}")
        if value is not None and not isinstance(value, DedupPolicy):
            raise InputTypeError(
                f"policy for entity {excerpt(name, 30)}: expected a DedupPolicy or None "
                f"(detection off), got {type(value).__name__} {excerpt(value, 30)}"
            )
    return policies


def is_set(value: str | None) -> bool:
    """A property counts as set when it is neither null nor empty."""
    return value is not None and value != ""


def effective_partition_key(
    message_id: str | None, partition_key: str | None, session_id: str | None
) -> str | None:
    """SessionId if set, else PartitionKey if set, else MessageId (docs/rules.md, section 2)."""
    for value in (session_id, partition_key, message_id):
        if is_set(value):
            return value
    return None


def dedup_key_of(
    message_id: str, partition_key: str | None, session_id: str | None, partitioning: bool
) -> tuple[str, ...]:
    """The dedup key within one entity: ``(MessageId,)`` without partitioning,
    ``(effective partition key, MessageId)`` with it (docs/rules.md, section 2)."""
    if not partitioning:
        return (message_id,)
    pk = effective_partition_key(message_id, partition_key, session_id)
    assert pk is not None
    return (pk, message_id)


def parse_dedup_key(value: str, partitioning: bool) -> tuple[str, ...]:
    """Read the engine's ``dedup_key`` column back into :func:`dedup_key_of`'s tuple.

    The engine writes the MessageId as it is, or, with partitioning, the JSON array
    ``["<effective partition key>","<MessageId>"]``: injective, and readable in a table.
    """
    if not partitioning:
        return (value,)
    parts = json.loads(value)
    return (str(parts[0]), str(parts[1]))


def batch_rule_applies(policy: DedupPolicy | Literal["unknown"] | None) -> bool:
    """Whether an entity refuses mixed batches: only with both partitioning and detection."""
    return isinstance(policy, DedupPolicy) and policy.partitioning


def batch_is_mixed(
    members: Sequence[tuple[str | None, str | None, str | None]],
) -> bool:
    """Whether one send call's messages, as ``(MessageId, PartitionKey, SessionId)``, fail to
    share one MessageId, PartitionKey and SessionId (docs/rules.md, section 3).

    A call of one message never is. Empty counts as not set, and not set differs from any set
    value. Two messages without a MessageId differ: the SDK gives each a fresh one (section
    3). PartitionKey and SessionId left unset on every message are shared.
    """
    if len(members) <= 1:
        return False
    message_ids = {m if is_set(m) else None for m, _, _ in members}
    if None in message_ids or len(message_ids) > 1:
        return True
    partition_keys = {p if is_set(p) else None for _, p, _ in members}
    session_ids = {s if is_set(s) else None for _, _, s in members}
    return len(partition_keys) > 1 or len(session_ids) > 1


def rejection_reasons(
    has_send_time: bool,
    message_id: str | None,
    partition_key: str | None,
    session_id: str | None,
    *,
    mixed_batch: bool = False,
) -> list[str]:
    """Why the SDK or the broker refuses a send, in a fixed order; empty when it does not.

    ``mixed_batch``: the send travelled in a batch that :func:`batch_is_mixed` on an entity
    where :func:`batch_rule_applies`; its reason comes last."""
    reasons = [] if has_send_time else [REASON_MISSING_TIME]
    for column, value in (
        ("message_id", message_id),
        ("partition_key", partition_key),
        ("session_id", session_id),
    ):
        if value is not None and len(value) > MAX_PROPERTY_LENGTH:
            reasons.append(too_long_reason(PROPERTY_NAMES[column]))
    if is_set(partition_key) and is_set(session_id) and partition_key != session_id:
        reasons.append(REASON_KEY_MISMATCH)
    if mixed_batch:
        reasons.append(REASON_MIXED_BATCH)
    return reasons
