"""``generate_telemetry``: the sends of a plan, computed in Spark SQL.

Everything random about a row is a hash of the seed and the row's identity, so the same seed
gives the same rows on any number of partitions or cores. No Python UDF: runs on Spark Connect
too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.errors import InputError
from dedup_lib.synth.plan import QUANTILES, TelemetryPlan, plan_telemetry
from dedup_lib.synth.scenario import (
    ACK_LOST_RETRY,
    CONSTANT_ID,
    FIRST,
    MALFORMED_TIMES,
    SYNTH_COLUMNS,
    Scenario,
)
from dedup_lib.telemetry.schema import TEXT_TIME_FORMAT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_ATTEMPT_SLOTS = 4096


def _uniform(seed: int, salt: str, *columns: Column) -> Column:
    """A uniform number in (0, 1) from a hash of the seed, a salt and the columns."""
    bits = F.shiftrightunsigned(F.xxhash64(F.lit(seed), F.lit(salt), *columns), 11)
    return (bits.cast("double") + 0.5) / float(2**53)


def _hex(seed: int, salt: str, *columns: Column) -> Column:
    return F.lower(F.lpad(F.hex(F.xxhash64(F.lit(seed), F.lit(salt), *columns)), 16, "0"))


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
        T.StructField("retry_rekey_share", T.DoubleType()),
        T.StructField("resend_rekey_share", T.DoubleType()),
        T.StructField("reused_pool", T.IntegerType()),
        T.StructField("scheduled_share", T.DoubleType()),
        T.StructField("scheduled_max_delay", T.DoubleType()),
        T.StructField("batch_size", T.IntegerType()),
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
    """Synthetic sends of a scenario, with ground truth (``logical_id``, ``attempt``).

    Deterministic: the same ``rows``, ``seed`` and scenario give the same rows whatever
    ``partitions`` or the number of cores.

    Parameters
    ----------
    spark : SparkSession
        A classic or Spark Connect session.
    rows : int, default 200000
        About how many sends.
    seed : int, default 0
        The random seed.
    scenario : Scenario, optional
        Entities, traffic and failures (default :func:`day_scenario`: a day of four
        entities with retries, restarts and id reuse).
    partitions : int, optional
        How many partitions to generate in (default: Spark's default parallelism).

    Returns
    -------
    DataFrame
        One row per send, the :data:`SYNTH_COLUMNS`:

        - ``event_id``: unique; orders the attempts of a message
        - ``entity``
        - ``message_id``
        - ``send_time``: ISO 8601 text, as a send log writes it
        - ``partition_key``
        - ``session_id``
        - ``scheduled_enqueue_time``
        - ``batch_id``
        - ``sender``: the application that sent it
        - ``logical_id``: the message (ground truth), and so the next two
        - ``attempt``: 1 for its first send
        - ``cause``: why it was sent (``first``, a retry, a restart's resend, a replay)
        - ``payload_hash``: the content

    Examples
    --------
    About five sends per entity kind: nine here, each its message's first attempt:

    >>> from dedup_lib import generate_telemetry, get_spark
    >>> sends = generate_telemetry(get_spark(), 5, seed=1)
    >>> shown = sends.select("event_id", "entity", "message_id", "logical_id", "attempt")
    >>> shown.orderBy("event_id").show(truncate=False)
    +--------+-------------+------------------------------------+----------+-------+
    |event_id|entity       |message_id                          |logical_id|attempt|
    +--------+-------------+------------------------------------+----------+-------+
    |0       |orders       |1.2026/order                        |0         |1      |
    |4       |payments     |1.2026/payment                      |1         |1      |
    |8       |notifications|a6a6831c-4f7d-45ab-a705-58af4ed744e6|2         |1      |
    |12      |inventory    |stock/0                             |3         |1      |
    |20      |orders       |00000000-0000-0000-0000-000000000000|5         |1      |
    |24      |audit        |NULL                                |6         |1      |
    |28      |payments     |1.2026/refund                       |7         |1      |
    |32      |orders       |1.2026/shipment                     |8         |1      |
    |36      |payments     |1.2026/payout                       |9         |1      |
    +--------+-------------+------------------------------------+----------+-------+
    <BLANKLINE>
    """
    plan = plan_telemetry(rows, seed, scenario)
    return _frame(spark, plan, partitions)


def _frame(spark: SparkSession, plan: TelemetryPlan, partitions: int | None) -> DataFrame:
    """The sends, in two parts: each logical message's first send and its retries (an explode
    of a short sequence), and the restart resends and replays of the plan (joined in from a
    small table). No higher-order functions: they run interpreted and cost 20x more."""
    if plan.attempt_slots > _ATTEMPT_SLOTS:
        raise InputError(
            f"generate_telemetry: one message would be sent more than {_ATTEMPT_SLOTS} times; "
            "lower crashes, replays or unacked in the scenario"
        )
    senders = F.broadcast(spark.createDataFrame(_sender_rows(plan), _SENDER_SCHEMA))
    quantiles = F.broadcast(spark.createDataFrame(_quantile_rows(plan), _QUANTILE_SCHEMA))
    resends = spark.createDataFrame(_resend_rows(plan), _RESEND_SCHEMA)
    firsts = _firsts_and_retries(spark, plan, senders, quantiles, partitions)
    later = (
        resends.join(senders, "sender_idx")
        .withColumn("logical_id", F.col("first_id") + F.col("local"))
        .transform(lambda df: _with_first_send(df, plan, quantiles))
        .withColumn("attempt", F.col("retries") + 2 + F.col("rank"))
        .drop("rank")
    )
    sends = _labelled(firsts.unionByName(later), plan)
    if plan.scenario.malformed > 0:
        sends = _malformed(sends, plan)
    return sends.select(*(F.col(c) for c in SYNTH_COLUMNS))


def _quantile_rows(plan: TelemetryPlan) -> list[tuple[int, int, float, float]]:
    """Each sender's traffic quantiles, as (sender, level, time at level, time at the next)."""
    return [
        (p.index, k, float(p.quantiles[k]), float(p.quantiles[k + 1]))
        for p in plan.senders
        for k in range(QUANTILES)
    ]


def _resend_rows(plan: TelemetryPlan) -> list[tuple[int, int, float, str, int]]:
    """The plan's restart resends and replays, ranked in time within each message."""
    rows = []
    for p in plan.senders:
        by_message: dict[int, list[tuple[float, str]]] = {}
        for local, at, cause in p.resends:
            by_message.setdefault(local, []).append((at, cause))
        for local, extra in by_message.items():
            for rank, (at, cause) in enumerate(sorted(extra)):
                rows.append((p.index, local, at, cause, rank))
    return rows


def _with_first_send(df: DataFrame, plan: TelemetryPlan, quantiles: DataFrame) -> DataFrame:
    """Sender settings, the send call of the first send (``call_id``: the logical id of the
    first message of its batch, its own without batches), that call's time (the sender's
    traffic quantiles, interpolated) and the number of retries after lost acknowledgements:
    a batch is sent, and retried, as one."""
    seed = plan.seed
    within = F.pmod(F.col("local"), F.col("batch_size"))
    gid = F.col("call_id")
    spread = _uniform(seed, "time", gid) * F.col("batch_size")
    x = (F.col("local") - within + spread) / F.col("n") * QUANTILES
    first = F.col("q0") + (F.col("x") - F.col("level")) * (F.col("q1") - F.col("q0"))
    ack_loss = _ack_loss(plan, F.col("first"))
    retries = F.when(
        ack_loss > 0,
        F.least(F.floor(F.log(_uniform(seed, "ack", gid)) / F.log(ack_loss)), F.col("max_retries")),
    ).otherwise(0)
    return (
        df.withColumn("call_id", F.col("logical_id") - within)
        .withColumn("x", x)
        .withColumn("level", F.floor("x").cast("int"))
        .join(quantiles, ["sender_idx", "level"])
        .withColumn("first", first)
        .withColumn("retries", retries.cast("int"))
    )


def _firsts_and_retries(
    spark: SparkSession,
    plan: TelemetryPlan,
    senders: DataFrame,
    quantiles: DataFrame,
    partitions: int | None,
) -> DataFrame:
    """Every logical message's first send, and its retries after lost acknowledgements."""
    seed, gid, call = plan.seed, F.col("logical_id"), F.col("call_id")
    offsets = [p.offset for p in plan.senders]
    sender_idx = sum((F.when(F.col("id") >= o, 1).otherwise(0) for o in offsets[1:]), F.lit(0))
    logical = (
        spark.range(0, plan.logical_messages, numPartitions=partitions)
        .select(F.col("id").alias("logical_id"), sender_idx.cast("int").alias("sender_idx"))
        .join(senders, "sender_idx")
        .withColumn("local", gid - F.col("first_id"))
        .transform(lambda df: _with_first_send(df, plan, quantiles))
    )
    most_retries = max(p.sender.max_retries for p in plan.senders)

    def backoff(j: int) -> Column:
        """The wait before retry ``j``: exponential, capped, with jitter."""
        delay = F.least(F.col("retry_base") * 2.0 ** (j - 1), F.col("retry_max"))
        return delay * (
            1 + F.col("retry_jitter") * (2 * _uniform(seed, "retry", call, F.lit(j)) - 1)
        )

    slot = F.col("slot")
    waited = sum(
        (F.when(slot >= j, backoff(j)).otherwise(0.0) for j in range(1, most_retries + 1)),
        F.lit(0.0),
    )
    return (
        logical.select("*", F.explode(F.sequence(F.lit(0), F.col("retries"))).alias("slot"))
        .withColumn("at", F.col("first") + waited)
        .withColumn("cause", F.when(slot == 0, F.lit(FIRST)).otherwise(F.lit(ACK_LOST_RETRY)))
        .withColumn("attempt", slot + 1)
        .drop("slot")
    )


def _pick(seed: int, salt: str, pool: str, rekeyed: Column) -> Column:
    """One of the sender's ``pool`` (a column) sessions or keys, drawn per send call; for a
    rekeyed send another one of them, drawn per call and attempt, never the call's own."""
    size = F.col(pool).cast("long")
    own = F.pmod(F.xxhash64(F.lit(seed), F.lit(salt), F.col("call_id")), size)
    step = F.pmod(
        F.xxhash64(F.lit(seed), F.lit(f"{salt}-rekey"), F.col("call_id"), F.col("attempt")),
        F.greatest(size - 1, F.lit(1)),
    )
    return F.when(rekeyed & (size > 1), F.pmod(own + 1 + step, size)).otherwise(own)


def _session_and_partition_key(seed: int) -> tuple[Column, Column]:
    """A message's SessionId (for the sender's share of messages) and its PartitionKey: the
    session's, another key (the sender's mismatch share), or a key of its own. Drawn per send
    call, so that a batch's messages share them; a rekeyed resend draws another session or key
    (:class:`~dedup_lib.synth.scenario.Sender`)."""
    gid = F.col("call_id")
    rekey_share = F.when(F.col("cause") == ACK_LOST_RETRY, F.col("retry_rekey_share")).otherwise(
        F.col("resend_rekey_share")
    )
    rekeyed = (F.col("attempt") > 1) & (
        _uniform(seed, "rekey", gid, F.col("attempt")) < rekey_share
    )
    session = F.when(
        _uniform(seed, "session", gid) < F.col("session_share"),
        F.format_string("%s-%05d", F.col("kind"), _pick(seed, "session-id", "sessions", rekeyed)),
    )
    other_key = F.format_string(
        "%s-pk-%05d", F.col("kind"), _pick(seed, "partition-key", "partition_keys", rekeyed)
    )
    mismatch_key = F.format_string(
        "%s-pk-%05d",
        F.col("kind"),
        _pick(seed, "partition-key", "partition_keys", F.lit(False)),
    )
    wants_key = _uniform(seed, "partition-key", gid) < F.col("partition_key_share")
    mismatched = _uniform(seed, "mismatch", gid) < F.col("key_mismatch_share")
    partition_key = (
        F.when(F.col("session_id").isNotNull() & wants_key & mismatched, mismatch_key)
        .when(F.col("session_id").isNotNull() & wants_key, F.col("session_id"))
        .when(F.col("session_id").isNull() & wants_key, other_key)
    )
    return session, partition_key


def _labelled(sends: DataFrame, plan: TelemetryPlan) -> DataFrame:
    """The telemetry columns of each send: ids, keys, entity, times, payload."""
    scenario, seed, gid = plan.scenario, plan.seed, F.col("logical_id")
    session, partition_key = _session_and_partition_key(seed)
    entity = F.element_at(
        F.col("entities"),
        (F.floor(_uniform(seed, "entity", F.col("call_id")) * F.size("entities")) + 1).cast("int"),
    )
    batched = (F.col("batch_size") > 1) & F.col("cause").isin(FIRST, ACK_LOST_RETRY)
    batch_id = F.when(batched, _hex(seed, "batch", F.col("call_id"), F.col("attempt")))
    scheduled = F.when(
        _uniform(seed, "scheduled", gid) < F.col("scheduled_share"),
        F.col("first") + 60 + _uniform(seed, "scheduled-delay", gid) * F.col("scheduled_max_delay"),
    )
    start_micros = int(scenario.start.timestamp()) * 1_000_000 + scenario.start.microsecond

    def timestamp(seconds: Column) -> Column:
        return F.timestamp_micros(F.lit(start_micros) + F.round(seconds * 1_000_000).cast("long"))

    return (
        sends.withColumn("session_id", session)
        .withColumn("partition_key", partition_key)
        .withColumn("entity", entity)
        .withColumn("event_id", gid * plan.attempt_slots + F.col("attempt") - 1)
        .withColumn("send_time", timestamp(F.col("at")))
        .withColumn("scheduled_enqueue_time", timestamp(scheduled))
        .withColumn("batch_id", batch_id)
        .withColumn("payload_hash", _hex(seed, "payload", gid))
        .withColumn("message_id", _message_id(seed, scenario.start.year))
    )


def _malformed(sends: DataFrame, plan: TelemetryPlan) -> DataFrame:
    """``send_time`` as text, garbage for the scenario's share of malformed sends."""
    seed = plan.seed
    garbage = F.element_at(
        F.array(*(F.lit(t) for t in MALFORMED_TIMES)),
        (F.floor(_uniform(seed, "garbage", F.col("event_id")) * len(MALFORMED_TIMES)) + 1).cast(
            "int"
        ),
    )
    text = F.date_format("send_time", TEXT_TIME_FORMAT)
    bad = _uniform(seed, "malformed", F.col("event_id")) < plan.scenario.malformed
    return sends.withColumn("send_time", F.when(bad, garbage).otherwise(text))
