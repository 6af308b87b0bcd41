"""The scenarios the generator plays: senders, their id policies and failure rates, outages.

See :mod:`dedup_lib.synth` for what the generator produces and why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from dedup_lib.errors import InputError

if TYPE_CHECKING:
    pass

IdPolicy = Literal["business", "guid_per_message", "guid_per_attempt", "constant", "reused", "none"]
ID_POLICIES: tuple[str, ...] = (
    "business",
    "guid_per_message",
    "guid_per_attempt",
    "constant",
    "reused",
    "none",
)
FIRST = "first"
ACK_LOST_RETRY = "ack_lost_retry"
RESTART_RESEND = "restart_resend"
REPLAY = "replay"
#: Why a send was made, in the ``cause`` column.
CAUSES = (FIRST, ACK_LOST_RETRY, RESTART_RESEND, REPLAY)
CONSTANT_ID = "00000000-0000-0000-0000-000000000000"

#: Columns of a generated frame, in order: the canonical telemetry, then the ground truth.
SYNTH_COLUMNS = (
    "event_id",
    "entity",
    "message_id",
    "send_time",
    "partition_key",
    "session_id",
    "scheduled_enqueue_time",
    "batch_id",
    "sender",
    "logical_id",
    "attempt",
    "cause",
    "payload_hash",
)

#: Garbage put in ``send_time`` for the rows :attr:`Scenario.malformed` asks for.
MALFORMED_TIMES = ("", "not a time", "2026-02-30T25:61:00Z", "yesterday 14:00")


@dataclass(frozen=True)
class Sender:
    """One application sending logical messages; times are in seconds.

    ``share`` is its weight among the scenario's logical messages. ``kind`` names its
    messages (``payment`` gives business ids such as ``12345.2026/payment``). A lost
    acknowledgement (probability ``ack_loss`` per send) makes the client retry after
    ``min(retry_base * 2**(n-1), retry_max)`` seconds, times a jitter of +-``retry_jitter``,
    up to ``max_retries`` times. Each crash resends the last ``unacked`` messages after a
    log-normal restart delay (``restart_median``, ``restart_sigma``; clamped to 5 s .. 1 h, and
    never before its retries would have been done, so attempts in time order are retries first).
    Each operator replay resends a batch of ``replay_batch`` consecutive messages
    ``replay_median`` later (log-normal, ``replay_sigma``, at least ``replay_min``).
    With ``batch_size`` above 1 it sends its messages in batches: each run of ``batch_size``
    consecutive messages goes in one send call (one time, entity, session and partition key,
    one ``batch_id``), and a lost acknowledgement makes it retry the whole batch, with a new
    ``batch_id`` per call. Restart resends and replays go one message per call.
    """

    name: str
    entities: tuple[str, ...]
    share: float = 1.0
    kind: str = "message"
    id_policy: IdPolicy = "business"
    reused_pool: int = 100
    ack_loss: float = 0.02
    max_retries: int = 3
    retry_base: float = 0.8
    retry_max: float = 60.0
    retry_jitter: float = 0.2
    crashes_per_day: float = 0.0
    unacked: int = 20
    restart_median: float = 120.0
    restart_sigma: float = 0.6
    replays_per_day: float = 0.0
    replay_batch: int = 200
    replay_median: float = 6 * 3600.0
    replay_sigma: float = 0.8
    replay_min: float = 3600.0
    session_share: float = 0.0
    sessions: int = 1000
    partition_key_share: float = 0.0
    partition_keys: int = 1000
    key_mismatch_share: float = 0.0
    retry_rekey_share: float = 0.0
    resend_rekey_share: float = 0.0
    scheduled_share: float = 0.0
    scheduled_max_delay: float = 3600.0
    batch_size: int = 1

    @property
    def retry_span(self) -> float:
        """The longest time its retries after lost acknowledgements can take, in seconds."""
        return float(
            sum(
                min(self.retry_base * 2 ** (j - 1), self.retry_max) * (1 + self.retry_jitter)
                for j in range(1, self.max_retries + 1)
            )
        )

    def __post_init__(self) -> None:
        problems = []
        if not self.name:
            problems.append("name is empty")
        if not self.entities or not all(self.entities):
            problems.append(f"entities must be one or more names, got {self.entities!r}")
        if self.id_policy not in ID_POLICIES:
            problems.append(f"id_policy {self.id_policy!r} is not one of {', '.join(ID_POLICIES)}")
        if not 0 <= self.ack_loss < 1:
            problems.append(f"ack_loss {self.ack_loss} must be in [0, 1)")
        for name in (
            "session_share",
            "partition_key_share",
            "key_mismatch_share",
            "retry_rekey_share",
            "resend_rekey_share",
            "scheduled_share",
        ):
            if not 0 <= getattr(self, name) <= 1:
                problems.append(f"{name} {getattr(self, name)} must be in [0, 1]")
        for name in ("share", "retry_base", "retry_max", "restart_median", "replay_median"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be positive, got {getattr(self, name)}")
        for name in (
            "reused_pool",
            "sessions",
            "partition_keys",
            "unacked",
            "replay_batch",
            "batch_size",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("max_retries", "crashes_per_day", "replays_per_day"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must not be negative, got {getattr(self, name)}")
        rekeys = self.retry_rekey_share > 0 or self.resend_rekey_share > 0
        if rekeys and not (
            (self.session_share > 0 and self.sessions > 1)
            or (self.partition_key_share > 0 and self.partition_keys > 1)
        ):
            problems.append(
                "retry_rekey_share and resend_rekey_share need sessions or partition keys to "
                "choose another from (session_share or partition_key_share above 0, pool above 1)"
            )
        if not 0 <= self.retry_jitter < 1:
            problems.append(f"retry_jitter {self.retry_jitter} must be in [0, 1)")
        if problems:
            raise InputError(f"Sender {self.name!r}: " + "; ".join(problems))


@dataclass(frozen=True)
class Outage:
    """A period in which acknowledgements get lost more often and senders crash repeatedly.

    ``senders`` names the senders it hits; empty means all of them."""

    start: datetime
    end: datetime
    ack_loss: float = 0.3
    crashes_per_hour: float = 0.0
    senders: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise InputError(f"Outage: end {self.end} must be after start {self.start}")
        if not 0 <= self.ack_loss < 1:
            raise InputError(f"Outage: ack_loss {self.ack_loss} must be in [0, 1)")

    def hits(self, sender: Sender) -> bool:
        return not self.senders or sender.name in self.senders


@dataclass(frozen=True)
class Scenario:
    """Senders over a time span, with the daily rhythm and the incidents they live through.

    Traffic per hour of day (UTC) is scaled by ``quiet_factor`` in ``quiet_hours`` (start and
    end hour) and multiplied by ``burst_factor`` during ``bursts_per_day`` bursts of
    ``burst_minutes``, placed at random per sender. ``malformed`` is the share of sends whose
    ``send_time`` is written as unparseable text (the column is then ISO 8601 text)."""

    start: datetime
    duration: timedelta
    senders: tuple[Sender, ...]
    outages: tuple[Outage, ...] = ()
    quiet_hours: tuple[int, int] = (0, 6)
    quiet_factor: float = 0.2
    bursts_per_day: float = 4.0
    burst_minutes: float = 15.0
    burst_factor: float = 6.0
    malformed: float = 0.0

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            object.__setattr__(self, "start", self.start.replace(tzinfo=UTC))
        if self.duration <= timedelta(0):
            raise InputError(f"Scenario: duration must be positive, got {self.duration}")
        if not self.senders:
            raise InputError("Scenario: needs at least one sender")
        names = [s.name for s in self.senders]
        if len(set(names)) != len(names):
            raise InputError(f"Scenario: sender names must be unique, got {names}")
        kinds = [s.kind for s in self.senders if s.id_policy in ("business", "reused")]
        if len(set(kinds)) != len(kinds):
            raise InputError(
                f"Scenario: senders with business or reused ids need distinct kinds, got {kinds}"
            )
        if not 0 <= self.malformed < 1:
            raise InputError(f"Scenario: malformed {self.malformed} must be in [0, 1)")
        if self.quiet_factor <= 0 or self.burst_factor <= 0:
            raise InputError("Scenario: quiet_factor and burst_factor must be positive")
        for outage in self.outages:
            unknown = set(outage.senders) - set(names)
            if unknown:
                raise InputError(f"Scenario: outage names unknown senders {sorted(unknown)}")

    @property
    def seconds(self) -> float:
        return self.duration.total_seconds()

    def offset(self, when: datetime) -> float:
        """Seconds from the start of the scenario to ``when`` (naive means UTC)."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return (when - self.start).total_seconds()


def day_scenario(start: datetime | None = None) -> Scenario:
    """A day of a shop's messaging: orders, payments, notifications, inventory, a nightly
    billing batch, a legacy exporter with a constant id, audit events without ids, refunds,
    shipments and payouts.
    The billing batch and the refunds go in batches of several MessageIds: on a partitioned
    entity with detection (``payments`` in the sample settings) the service refuses them.
    ``shipping-svc`` derives the partition key from the send time, so each retry and resend
    carries another key; ``payouts-svc``'s restart resends come from another instance, which
    opens a new session: with partitioning enabled, neither is a duplicate."""
    start = start or datetime(2026, 11, 2, tzinfo=UTC)
    senders = (
        Sender("orders-api", ("orders",), 0.34, "order", "business", ack_loss=0.02,
               crashes_per_day=3, unacked=25, partition_key_share=0.5),
        Sender("payments-svc", ("payments",), 0.2, "payment", "business", ack_loss=0.03,
               session_share=1.0, sessions=2000, partition_key_share=0.9,
               key_mismatch_share=0.002),
        Sender("notifier", ("notifications",), 0.2, "notification", "guid_per_attempt",
               ack_loss=0.05, crashes_per_day=1, unacked=40),
        Sender("inventory-sync", ("inventory",), 0.12, "stock", "reused", reused_pool=400,
               ack_loss=0.02, scheduled_share=0.1),
        Sender("billing-batch", ("payments",), 0.08, "invoice", "guid_per_message",
               ack_loss=0.01, replays_per_day=2, replay_batch=400, batch_size=20),
        Sender("legacy-export", ("orders",), 0.02, "export", "constant", ack_loss=0.01),
        Sender("audit-log", ("audit",), 0.02, "audit", "none", ack_loss=0.02),
        Sender("refunds-svc", ("payments",), 0.02, "refund", "business", ack_loss=0.03,
               session_share=1.0, sessions=300, partition_key_share=1.0, batch_size=4),
        Sender("shipping-svc", ("orders",), 0.04, "shipment", "business", ack_loss=0.03,
               crashes_per_day=1, unacked=30, partition_key_share=1.0, partition_keys=60,
               retry_rekey_share=1.0, resend_rekey_share=1.0),
        Sender("payouts-svc", ("payments",), 0.04, "payout", "business", ack_loss=0.02,
               crashes_per_day=3, unacked=40, session_share=1.0, sessions=500,
               partition_key_share=1.0, resend_rekey_share=1.0),
    )  # fmt: skip
    return Scenario(start, timedelta(days=1), senders, malformed=0.0003)


def incident_scenario(start: datetime | None = None) -> Scenario:
    """Three hours around an outage hour in which ``orders-api`` lost acknowledgements and
    crashed and restarted again and again, resending what it had in flight each time.
    ``payments-svc`` sends batches of three payments of one session (one SessionId and
    PartitionKey, distinct MessageIds): refused on a partitioned entity with detection.
    ``shipping-svc`` derives the partition key from the send time, so its retries and its two
    crashes' resends carry another key: with partitioning enabled, they are not duplicates."""
    start = start or datetime(2026, 11, 3, 20, tzinfo=UTC)
    outage_start = start + timedelta(hours=1)
    senders = (
        Sender("orders-api", ("orders",), 0.6, "order", "business", ack_loss=0.02,
               unacked=30, restart_median=90, partition_key_share=0.5),
        Sender("payments-svc", ("payments",), 0.25, "payment", "business", ack_loss=0.03,
               session_share=1.0, sessions=500, partition_key_share=0.9, batch_size=3),
        Sender("notifier", ("notifications",), 0.15, "notification", "guid_per_attempt",
               ack_loss=0.05),
        Sender("shipping-svc", ("orders",), 0.1, "shipment", "business", ack_loss=0.04,
               crashes_per_day=16, unacked=30, partition_key_share=1.0, partition_keys=60,
               retry_rekey_share=1.0, resend_rekey_share=1.0),
    )  # fmt: skip
    outage = Outage(
        outage_start,
        outage_start + timedelta(hours=1),
        ack_loss=0.35,
        crashes_per_hour=12,
        senders=("orders-api",),
    )
    return Scenario(
        start, timedelta(hours=3), senders, outages=(outage,), quiet_hours=(0, 0), bursts_per_day=0
    )


#: Named scenarios for ``dedup-lib generate --scenario``.
SCENARIOS = {"day": day_scenario, "incident": incident_scenario}
