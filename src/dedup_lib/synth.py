"""``generate_telemetry``: message telemetry whose duplicates arise as they do in production,
labelled with what really happened.

Senders produce logical messages over a time span and send each one or more times: retries
after a lost acknowledgement (exponential back-off with jitter), resends of the last
unacknowledged messages after a crash and restart (log-normal restart delay), and operator
replays of a batch hours or days later. Each sender has an id policy (business ids, a GUID per
message, a fresh GUID per attempt, a constant or a reused id, or none), and may set sessions,
partition keys (occasionally mismatched) and schedule messages.

Everything random about a row is a hash of the seed and the row's identity, computed in Spark
SQL, so the same seed gives the same rows on any number of partitions or cores. The few random
events of a whole sender (crashes, replays, bursts) are drawn in Python from a seeded
generator and joined in as a small broadcast table. No Python UDF: runs on Spark Connect too.

Ground truth columns: ``sender``, ``logical_id`` (the message the sender meant), ``attempt``
(1 for the first send, then in time order), ``cause`` (:data:`CAUSES`) and ``payload_hash``
(the same for every send of one logical message, different between messages).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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
    "sender",
    "logical_id",
    "attempt",
    "cause",
    "payload_hash",
)
GROUND_TRUTH_COLUMNS = ("sender", "logical_id", "attempt", "cause", "payload_hash")

#: Garbage put in ``send_time`` for the rows :attr:`Scenario.malformed` asks for.
MALFORMED_TIMES = ("", "not a time", "2026-02-30T25:61:00Z", "yesterday 14:00")
_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
_QUANTILES = 2048
_ATTEMPT_SLOTS = 4096
_RESEND_SPACING = 0.01
_REPLAY_SPACING = 0.05
_MAX_BUCKETS = 20_000


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
    scheduled_share: float = 0.0
    scheduled_max_delay: float = 3600.0

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
            "scheduled_share",
        ):
            if not 0 <= getattr(self, name) <= 1:
                problems.append(f"{name} {getattr(self, name)} must be in [0, 1]")
        for name in ("share", "retry_base", "retry_max", "restart_median", "replay_median"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("reused_pool", "sessions", "partition_keys", "unacked", "replay_batch"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("max_retries", "crashes_per_day", "replays_per_day"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must not be negative, got {getattr(self, name)}")
        if not 0 <= self.retry_jitter < 1:
            problems.append(f"retry_jitter {self.retry_jitter} must be in [0, 1)")
        if problems:
            raise ValueError(f"Sender {self.name!r}: " + "; ".join(problems))


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
            raise ValueError(f"Outage: end {self.end} must be after start {self.start}")
        if not 0 <= self.ack_loss < 1:
            raise ValueError(f"Outage: ack_loss {self.ack_loss} must be in [0, 1)")

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
            raise ValueError(f"Scenario: duration must be positive, got {self.duration}")
        if not self.senders:
            raise ValueError("Scenario: needs at least one sender")
        names = [s.name for s in self.senders]
        if len(set(names)) != len(names):
            raise ValueError(f"Scenario: sender names must be unique, got {names}")
        kinds = [s.kind for s in self.senders if s.id_policy in ("business", "reused")]
        if len(set(kinds)) != len(kinds):
            raise ValueError(
                f"Scenario: senders with business or reused ids need distinct kinds, got {kinds}"
            )
        if not 0 <= self.malformed < 1:
            raise ValueError(f"Scenario: malformed {self.malformed} must be in [0, 1)")
        if self.quiet_factor <= 0 or self.burst_factor <= 0:
            raise ValueError("Scenario: quiet_factor and burst_factor must be positive")
        for outage in self.outages:
            unknown = set(outage.senders) - set(names)
            if unknown:
                raise ValueError(f"Scenario: outage names unknown senders {sorted(unknown)}")

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
    billing batch, a legacy exporter with a constant id, and audit events without ids."""
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
        Sender("billing-batch", ("payments",), 0.1, "invoice", "guid_per_message",
               ack_loss=0.01, replays_per_day=2, replay_batch=400),
        Sender("legacy-export", ("orders",), 0.02, "export", "constant", ack_loss=0.01),
        Sender("audit-log", ("audit",), 0.02, "audit", "none", ack_loss=0.02),
    )  # fmt: skip
    return Scenario(start, timedelta(days=1), senders, malformed=0.0003)


def incident_scenario(start: datetime | None = None) -> Scenario:
    """Three hours around an outage hour in which ``orders-api`` lost acknowledgements and
    crashed and restarted again and again, resending what it had in flight each time."""
    start = start or datetime(2026, 11, 3, 20, tzinfo=UTC)
    outage_start = start + timedelta(hours=1)
    senders = (
        Sender("orders-api", ("orders",), 0.6, "order", "business", ack_loss=0.02,
               unacked=30, restart_median=90, partition_key_share=0.5),
        Sender("payments-svc", ("payments",), 0.25, "payment", "business", ack_loss=0.03,
               session_share=1.0, sessions=500, partition_key_share=0.9),
        Sender("notifier", ("notifications",), 0.15, "notification", "guid_per_attempt",
               ack_loss=0.05),
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


@dataclass(frozen=True)
class _SenderPlan:
    sender: Sender
    index: int
    offset: int
    count: int
    quantiles: np.ndarray
    resends: list[tuple[int, float, str]] = field(default_factory=list)
    #: (cause, scenario seconds, delay in seconds) of each crash and replay drawn.
    events: list[tuple[str, float, float]] = field(default_factory=list)

    def position_at(self, seconds: float) -> int:
        """How many of the sender's logical messages are surely sent before ``seconds``."""
        levels = np.linspace(0.0, 1.0, _QUANTILES + 1)
        return math.floor(float(np.interp(seconds, self.quantiles, levels)) * self.count)


@dataclass(frozen=True)
class TelemetryPlan:
    """What :func:`generate_telemetry` will produce, decided before Spark runs: logical
    messages per sender and the restart and replay resends (exact counts)."""

    scenario: Scenario
    seed: int
    senders: tuple[_SenderPlan, ...]

    @property
    def logical_messages(self) -> int:
        return sum(p.count for p in self.senders)

    @property
    def attempt_slots(self) -> int:
        """A power of two above the most sends one message can get: ``event_id`` is
        ``logical_id * attempt_slots + attempt - 1``."""
        extra: dict[tuple[int, int], int] = {}
        for p in self.senders:
            for local, _, _ in p.resends:
                extra[(p.index, local)] = extra.get((p.index, local), 0) + 1
        most = max(p.sender.max_retries for p in self.senders) + 1 + max(extra.values(), default=0)
        return 1 << max(0, most - 1).bit_length()

    def resends(self, cause: str) -> int:
        """Number of sends of ``cause`` (restart resends or replays) the plan holds."""
        return sum(1 for p in self.senders for r in p.resends if r[2] == cause)


def _lognormal(rng: np.random.Generator, median: float, sigma: float) -> float:
    return float(median * math.exp(sigma * rng.standard_normal()))


def _intensity(scenario: Scenario, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bucket edges (scenario seconds) and the relative traffic in each bucket."""
    span = scenario.seconds
    buckets = max(1, min(_MAX_BUCKETS, math.ceil(span / 60)))
    edges = np.linspace(0.0, span, buckets + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    start = scenario.start
    hours = ((start.hour * 3600 + start.minute * 60 + start.second + mids) / 3600) % 24
    quiet_from, quiet_to = scenario.quiet_hours
    if quiet_from <= quiet_to:
        quiet = (hours >= quiet_from) & (hours < quiet_to)
    else:
        quiet = (hours >= quiet_from) | (hours < quiet_to)
    weights = np.where(quiet, scenario.quiet_factor, 1.0)
    bursts = round(scenario.bursts_per_day * span / 86400)
    for _ in range(bursts):
        at = rng.uniform(0, span)
        inside = (mids >= at) & (mids < at + scenario.burst_minutes * 60)
        weights = np.where(inside, weights * scenario.burst_factor, weights)
    return edges, weights


def _quantiles(edges: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Scenario seconds at each of ``_QUANTILES + 1`` evenly spaced traffic levels."""
    cumulative = np.concatenate([[0.0], np.cumsum(weights * np.diff(edges))])
    cumulative /= cumulative[-1]
    levels = np.linspace(0.0, 1.0, _QUANTILES + 1)
    quantiles: np.ndarray = np.interp(levels, cumulative, edges)
    return quantiles


def _mean_sends(ack_loss: float, max_retries: int) -> float:
    return 1.0 + sum(ack_loss**r for r in range(1, max_retries + 1))


def plan_telemetry(rows: int, seed: int = 0, scenario: Scenario | None = None) -> TelemetryPlan:
    """Split about ``rows`` sends among the senders and draw their crashes and replays."""
    scenario = scenario or day_scenario()
    if rows < 1:
        raise ValueError(f"generate_telemetry: rows must be at least 1, got {rows}")
    days = scenario.seconds / 86400
    total_share = sum(s.share for s in scenario.senders)
    plans: list[_SenderPlan] = []
    offset = 0
    for index, sender in enumerate(scenario.senders):
        rng = np.random.default_rng([seed, index])
        edges, weights = _intensity(scenario, rng)
        target = rows * sender.share / total_share
        crashes = sender.crashes_per_day * days + sum(
            o.crashes_per_hour * (o.end - o.start).total_seconds() / 3600
            for o in scenario.outages
            if o.hits(sender)
        )
        extra = crashes * sender.unacked + sender.replays_per_day * days * sender.replay_batch
        quantiles = _quantiles(edges, weights)
        levels = np.linspace(0.0, 1.0, _QUANTILES + 1)
        mean = _mean_sends(sender.ack_loss, sender.max_retries)
        for o in scenario.outages:
            if o.hits(sender):
                bounds = [scenario.offset(o.start), scenario.offset(o.end)]
                low, high = np.interp(bounds, quantiles, levels)
                outage_mean = _mean_sends(o.ack_loss, sender.max_retries)
                mean += float(high - low) * (outage_mean - mean)
        count = max(1, round((target - extra) / mean))
        plan = _SenderPlan(sender, index, offset, count, quantiles)
        _draw_resends(plan, scenario, rng)
        plans.append(plan)
        offset += count
    return TelemetryPlan(scenario, seed, tuple(plans))


def _draw_resends(plan: _SenderPlan, scenario: Scenario, rng: np.random.Generator) -> None:
    sender, span = plan.sender, scenario.seconds
    windows = [(0.0, span, sender.crashes_per_day * span / 86400)]
    for outage in scenario.outages:
        if outage.hits(sender):
            begin, end = (
                max(0.0, scenario.offset(outage.start)),
                min(span, scenario.offset(outage.end)),
            )
            if end > begin:
                windows.append((begin, end, outage.crashes_per_hour * (end - begin) / 3600))
    for begin, end, expected in windows:
        for _ in range(round(expected)):
            crash = rng.uniform(begin, end)
            drawn = _lognormal(rng, sender.restart_median, sender.restart_sigma)
            delay = min(3600.0, max(5.0, sender.retry_span, drawn))
            last = plan.position_at(crash)
            plan.events.append((RESTART_RESEND, crash, delay))
            for order, local in enumerate(range(max(0, last - sender.unacked), last)):
                plan.resends.append(
                    (local, crash + delay + order * _RESEND_SPACING, RESTART_RESEND)
                )
    for _ in range(round(sender.replays_per_day * span / 86400)):
        delay = max(sender.replay_min, _lognormal(rng, sender.replay_median, sender.replay_sigma))
        if delay >= span:
            continue
        batch_end = rng.uniform(0, span - delay)
        last = plan.position_at(batch_end)
        plan.events.append((REPLAY, batch_end, delay))
        for order, local in enumerate(range(max(0, last - sender.replay_batch), last)):
            plan.resends.append((local, batch_end + delay + order * _REPLAY_SPACING, REPLAY))


def _uniform(seed: int, salt: str, *columns: Column) -> Column:
    """A uniform number in (0, 1) from a hash of the seed, a salt and the columns."""
    bits = F.shiftrightunsigned(F.xxhash64(F.lit(seed), F.lit(salt), *columns), 11)
    return (bits.cast("double") + 0.5) / float(2**53)


def _hex(seed: int, salt: str, *columns: Column) -> Column:
    return F.lower(F.lpad(F.hex(F.xxhash64(F.lit(seed), F.lit(salt), *columns)), 16, "0"))


def _numbered(prefix: Column, separator: str, hashed: Column, pool: str) -> Column:
    """``<prefix><separator><hash mod pool, 5 digits>``: one of ``pool`` names."""
    number = F.pmod(hashed, F.col(pool).cast("long")).cast("string")
    padded = F.when(F.length(number) >= 5, number).otherwise(F.lpad(number, 5, "0"))
    return F.concat(prefix, F.lit(separator), padded)


def _guid(seed: int, *columns: Column) -> Column:
    """A version-4-shaped GUID from hashes."""
    a, b = _hex(seed, "guid-a", *columns), _hex(seed, "guid-b", *columns)
    return F.concat(
        F.substring(a, 1, 8), F.lit("-"), F.substring(a, 9, 4), F.lit("-4"),
        F.substring(a, 14, 3), F.lit("-a"), F.substring(b, 2, 3), F.lit("-"),
        F.substring(b, 5, 12),
    )  # fmt: skip


_SENDER_SCHEMA = T.StructType(
    [
        T.StructField("sender_idx", T.IntegerType()),
        T.StructField("sender", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField("id_policy", T.StringType()),
        T.StructField("entities", T.ArrayType(T.StringType())),
        T.StructField("first_id", T.LongType()),
        T.StructField("n", T.LongType()),
        T.StructField("ack_loss", T.DoubleType()),
        T.StructField("max_retries", T.IntegerType()),
        T.StructField("retry_base", T.DoubleType()),
        T.StructField("retry_max", T.DoubleType()),
        T.StructField("retry_jitter", T.DoubleType()),
        T.StructField("session_share", T.DoubleType()),
        T.StructField("sessions", T.IntegerType()),
        T.StructField("partition_key_share", T.DoubleType()),
        T.StructField("partition_keys", T.IntegerType()),
        T.StructField("key_mismatch_share", T.DoubleType()),
        T.StructField("reused_pool", T.IntegerType()),
        T.StructField("scheduled_share", T.DoubleType()),
        T.StructField("scheduled_max_delay", T.DoubleType()),
    ]
)
_RESEND_SCHEMA = T.StructType(
    [
        T.StructField("sender_idx", T.IntegerType()),
        T.StructField("local", T.LongType()),
        T.StructField("at", T.DoubleType()),
        T.StructField("cause", T.StringType()),
        T.StructField("rank", T.IntegerType()),
    ]
)
_QUANTILE_SCHEMA = T.StructType(
    [
        T.StructField("sender_idx", T.IntegerType()),
        T.StructField("level", T.IntegerType()),
        T.StructField("q0", T.DoubleType()),
        T.StructField("q1", T.DoubleType()),
    ]
)


def _sender_rows(plan: TelemetryPlan) -> list[tuple[object, ...]]:
    """One row per sender, each value coerced to its column's type (``1800`` for a double)."""
    rows = []
    for p in plan.senders:
        values = {
            "sender_idx": p.index,
            "sender": p.sender.name,
            "entities": list(p.sender.entities),
            "first_id": p.offset,
            "n": p.count,
        }
        row = []
        for f in _SENDER_SCHEMA.fields:
            value = values.get(f.name, getattr(p.sender, f.name, None))
            if isinstance(f.dataType, T.DoubleType):
                value = float(value)  # type: ignore[arg-type]
            elif isinstance(f.dataType, T.IntegerType | T.LongType):
                value = int(value)  # type: ignore[call-overload]
            row.append(value)
        rows.append(tuple(row))
    return rows


def _ack_loss(plan: TelemetryPlan, first: Column) -> Column:
    """The chance that a send's acknowledgement is lost: the sender's, or an outage's."""
    chance = F.col("ack_loss")
    for outage in reversed(plan.scenario.outages):
        hit = [p.index for p in plan.senders if outage.hits(p.sender)]
        begin, end = plan.scenario.offset(outage.start), plan.scenario.offset(outage.end)
        during = (first >= begin) & (first < end) & F.col("sender_idx").isin(hit)
        chance = F.when(during, F.lit(outage.ack_loss)).otherwise(chance)
    return chance


def _message_id(seed: int, year: int) -> Column:
    policy = F.col("id_policy")
    return (
        F.when(
            policy == "business",
            F.concat((F.col("local") + 1).cast("string"), F.lit(f".{year}/"), F.col("kind")),
        )
        .when(policy == "guid_per_message", _guid(seed, F.col("logical_id")))
        .when(policy == "guid_per_attempt", _guid(seed, F.col("logical_id"), F.col("attempt")))
        .when(policy == "constant", F.lit(CONSTANT_ID))
        .when(
            policy == "reused",
            F.concat(
                F.col("kind"), F.lit("/"), (F.col("local") % F.col("reused_pool")).cast("string")
            ),
        )
        .otherwise(F.lit(None).cast("string"))
    )


def generate_telemetry(
    spark: SparkSession,
    rows: int = 200_000,
    *,
    seed: int = 0,
    scenario: Scenario | None = None,
    partitions: int | None = None,
) -> DataFrame:
    """About ``rows`` sends of ``scenario`` (default :func:`day_scenario`), with ground truth.

    Deterministic: the same ``rows``, ``seed`` and scenario give the same rows whatever
    ``partitions`` (default: Spark's default parallelism) or the number of cores. Columns:
    :data:`SYNTH_COLUMNS`; ``event_id`` is unique and orders the attempts of a message."""
    plan = plan_telemetry(rows, seed, scenario)
    return _frame(spark, plan, partitions)


def _frame(spark: SparkSession, plan: TelemetryPlan, partitions: int | None) -> DataFrame:
    """The sends, in two parts: each logical message's first send and its retries (an explode
    of a short sequence), and the restart resends and replays of the plan (joined in from a
    small table). No higher-order functions: they run interpreted and cost 20x more."""
    scenario, seed = plan.scenario, plan.seed
    slots = plan.attempt_slots
    if slots > _ATTEMPT_SLOTS:
        raise ValueError(
            f"generate_telemetry: one message would be sent more than {_ATTEMPT_SLOTS} times; "
            "lower crashes, replays or unacked in the scenario"
        )
    senders = F.broadcast(spark.createDataFrame(_sender_rows(plan), _SENDER_SCHEMA))
    quantiles = F.broadcast(
        spark.createDataFrame(
            [
                (p.index, k, float(p.quantiles[k]), float(p.quantiles[k + 1]))
                for p in plan.senders
                for k in range(_QUANTILES)
            ],
            _QUANTILE_SCHEMA,
        )
    )
    resend_rows = []
    for p in plan.senders:
        by_message: dict[int, list[tuple[float, str]]] = {}
        for local, at, cause in p.resends:
            by_message.setdefault(local, []).append((at, cause))
        for local, extra in by_message.items():
            for rank, (at, cause) in enumerate(sorted(extra)):
                resend_rows.append((p.index, local, at, cause, rank))
    resends = spark.createDataFrame(resend_rows, _RESEND_SCHEMA)

    gid = F.col("logical_id")

    def with_first_send(df: DataFrame) -> DataFrame:
        """Sender settings, the first send's time (the sender's traffic quantiles,
        interpolated) and the number of retries after lost acknowledgements."""
        x = (F.col("local") + _uniform(seed, "time", gid)) / F.col("n") * _QUANTILES
        first = F.col("q0") + (F.col("x") - F.col("level")) * (F.col("q1") - F.col("q0"))
        ack_loss = _ack_loss(plan, F.col("first"))
        retries = F.when(
            ack_loss > 0,
            F.least(
                F.floor(F.log(_uniform(seed, "ack", gid)) / F.log(ack_loss)), F.col("max_retries")
            ),
        ).otherwise(0)
        return (
            df.withColumn("x", x)
            .withColumn("level", F.floor("x").cast("int"))
            .join(quantiles, ["sender_idx", "level"])
            .withColumn("first", first)
            .withColumn("retries", retries.cast("int"))
        )

    offsets = [p.offset for p in plan.senders]
    sender_idx = sum((F.when(F.col("id") >= o, 1).otherwise(0) for o in offsets[1:]), F.lit(0))
    logical = (
        spark.range(0, plan.logical_messages, numPartitions=partitions)
        .select(F.col("id").alias("logical_id"), sender_idx.cast("int").alias("sender_idx"))
        .join(senders, "sender_idx")
        .withColumn("local", gid - F.col("first_id"))
        .transform(with_first_send)
    )
    most_retries = max(p.sender.max_retries for p in plan.senders)

    def backoff(j: int) -> Column:
        """The wait before retry ``j``: exponential, capped, with jitter."""
        delay = F.least(F.col("retry_base") * 2.0 ** (j - 1), F.col("retry_max"))
        return delay * (
            1 + F.col("retry_jitter") * (2 * _uniform(seed, "retry", gid, F.lit(j)) - 1)
        )

    slot = F.col("slot")
    waited = sum(
        (F.when(slot >= j, backoff(j)).otherwise(0.0) for j in range(1, most_retries + 1)),
        F.lit(0.0),
    )
    firsts_and_retries = (
        logical.select("*", F.explode(F.sequence(F.lit(0), F.col("retries"))).alias("slot"))
        .withColumn("at", F.col("first") + waited)
        .withColumn("cause", F.when(slot == 0, F.lit(FIRST)).otherwise(F.lit(ACK_LOST_RETRY)))
        .withColumn("attempt", slot + 1)
        .drop("slot")
    )
    later = (
        resends.join(senders, "sender_idx")
        .withColumn("logical_id", F.col("first_id") + F.col("local"))
        .transform(with_first_send)
        .withColumn("attempt", F.col("retries") + 2 + F.col("rank"))
        .drop("rank")
    )
    sends = firsts_and_retries.unionByName(later)

    session = F.when(
        _uniform(seed, "session", gid) < F.col("session_share"),
        F.format_string(
            "%s-%05d",
            F.col("kind"),
            F.pmod(
                F.xxhash64(F.lit(seed), F.lit("session-id"), gid), F.col("sessions").cast("long")
            ),
        ),
    )
    other_key = F.format_string(
        "%s-pk-%05d",
        F.col("kind"),
        F.pmod(
            F.xxhash64(F.lit(seed), F.lit("partition-key"), gid),
            F.col("partition_keys").cast("long"),
        ),
    )
    wants_key = _uniform(seed, "partition-key", gid) < F.col("partition_key_share")
    mismatched = _uniform(seed, "mismatch", gid) < F.col("key_mismatch_share")
    partition_key = (
        F.when(F.col("session_id").isNotNull() & wants_key & mismatched, other_key)
        .when(F.col("session_id").isNotNull() & wants_key, F.col("session_id"))
        .when(F.col("session_id").isNull() & wants_key, other_key)
    )
    entity = F.element_at(
        F.col("entities"),
        (F.floor(_uniform(seed, "entity", gid) * F.size("entities")) + 1).cast("int"),
    )
    scheduled = F.when(
        _uniform(seed, "scheduled", gid) < F.col("scheduled_share"),
        F.col("first") + 60 + _uniform(seed, "scheduled-delay", gid) * F.col("scheduled_max_delay"),
    )
    start_micros = int(scenario.start.timestamp()) * 1_000_000 + scenario.start.microsecond

    def timestamp(seconds: Column) -> Column:
        return F.timestamp_micros(F.lit(start_micros) + F.round(seconds * 1_000_000).cast("long"))

    sends = (
        sends.withColumn("session_id", session)
        .withColumn("partition_key", partition_key)
        .withColumn("entity", entity)
        .withColumn("event_id", gid * slots + F.col("attempt") - 1)
        .withColumn("send_time", timestamp(F.col("at")))
        .withColumn("scheduled_enqueue_time", timestamp(scheduled))
        .withColumn("payload_hash", _hex(seed, "payload", gid))
        .withColumn("message_id", _message_id(seed, scenario.start.year))
    )
    if scenario.malformed > 0:
        garbage = F.element_at(
            F.array(*(F.lit(t) for t in MALFORMED_TIMES)),
            (F.floor(_uniform(seed, "garbage", F.col("event_id")) * len(MALFORMED_TIMES)) + 1).cast(
                "int"
            ),
        )
        text = F.date_format("send_time", _TIME_FORMAT)
        bad = _uniform(seed, "malformed", F.col("event_id")) < scenario.malformed
        sends = sends.withColumn("send_time", F.when(bad, garbage).otherwise(text))
    return sends.select(*(F.col(c) for c in SYNTH_COLUMNS))


def with_scenario(scenario: Scenario, **changes: object) -> Scenario:
    """A copy of ``scenario`` with some fields changed (``malformed=0.01``, ...)."""
    return replace(scenario, **changes)  # type: ignore[arg-type]
