"""``detect_duplicates``: Service Bus duplicate detection replayed exactly, on Spark.

One shuffle by (entity, key), a sort by time within each partition, then one streaming pass
that walks the anchor chain of each key over two 64-bit hashes of (entity, key), the time, the
event id and a flag; the other columns are never touched. The pass is the JVM kernel
(:mod:`dedup_lib.jvm`, a Java function Spark calls once per send in sort order) or, where that
cannot be built or loaded, :mod:`dedup_lib.kernel` over Arrow batches in Spark's Python
workers; both give the same verdicts. Rejections and missing MessageIds are decided in Spark
SQL before the pass. Uses the DataFrame API only, so it runs on classic Spark and on Spark
Connect alike.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.functions import arrow_udf

from dedup_lib import jvm
from dedup_lib import kernel as arrow_kernel
from dedup_lib.policy import (
    ACCEPTED,
    DETECTION_OFF_NOTE,
    DUPLICATE,
    MAX_PROPERTY_LENGTH,
    NO_MESSAGE_ID_WARNING,
    PROPERTY_NAMES,
    REASON_KEY_MISMATCH,
    REASON_MISSING_TIME,
    REJECTED,
    UNKNOWN_ENTITY,
    UNKNOWN_NO_ENTITY,
    DedupPolicy,
    check_policies,
    too_long_reason,
)
from dedup_lib.spark import column

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

REQUIRED = ("message_id", "send_time")
OUTPUT_COLUMNS = ("verdict", "reason", "dedup_key", "original_send_time", "original_event_id")
_INTERNAL = "__dedup_"
_JUDGED = "__dedup_judged"
#: The send's position in the input, negated (-position - 1) for the sends decided before the
#: pass: one column through the shuffle instead of two.
_POS = "__dedup_pos"
_TIME = "__dedup_time"
_WINDOW = "__dedup_window"
#: Seeds the second key hash, so that it is independent of the first (Spark's fixed seed 42).
_SECOND_HASH_SEED = 0x5EED

# Ship the kernel by value, so a remote Spark Connect cluster needs no dedup_lib installed.
cloudpickle.register_pickle_by_value(arrow_kernel)  # type: ignore[no-untyped-call]


def _decided() -> Column:
    """True for the sends decided in Spark SQL before the pass (see ``_POS``)."""
    return F.col(_POS) < F.lit(0)


def _is_set(value: Column) -> Column:
    return value.isNotNull() & (value != F.lit(""))


def _text(df: DataFrame, name: str) -> Column:
    return F.col(name).cast("string") if name in df.columns else F.lit(None).cast("string")


def _validate(df: DataFrame) -> None:
    fields = {f.name: f.dataType for f in df.schema.fields}
    lower = {name.lower(): name for name in fields}
    missing = [c for c in REQUIRED if c not in fields]
    if missing:
        raise ValueError(
            f"detect_duplicates: missing required column(s) {', '.join(missing)}; the input has "
            f"{', '.join(fields) or 'no columns'}. Load files with load_telemetry(), or pass a "
            "mapping of your column names."
        )
    clashes = [lower[c] for c in OUTPUT_COLUMNS if c in lower]
    clashes += [name for name in fields if name.lower().startswith(_INTERNAL)]
    if clashes:
        raise ValueError(
            f"detect_duplicates: the input already has column(s) {', '.join(clashes)}, which the "
            "result adds or uses inside; is it already a detect_duplicates result? Drop or "
            "rename them first."
        )
    send_type = fields["send_time"]
    if not isinstance(send_type, T.TimestampType | T.TimestampNTZType):
        raise TypeError(
            f"detect_duplicates: column send_time must be a timestamp, got "
            f"{send_type.simpleString()}; load_telemetry() parses ISO 8601 and epoch values"
        )
    for name in ("message_id", "partition_key", "session_id", "entity"):
        if name in fields and not isinstance(
            fields[name], T.StringType | T.IntegralType | T.DecimalType
        ):
            raise TypeError(
                f"detect_duplicates: column {name} must be text, got {fields[name].simpleString()}"
            )
    for name in ("message_id", "partition_key", "session_id", "entity", "event_id"):
        collation = getattr(fields.get(name), "collation", "UTF8_BINARY")
        if collation != "UTF8_BINARY":
            raise TypeError(
                f"detect_duplicates: column {name} has collation {collation}; the broker "
                f"compares ids byte for byte: cast it with .cast('string') first"
            )
    if "event_id" in fields and isinstance(fields["event_id"], T.MapType | T.VariantType):
        raise TypeError(
            f"detect_duplicates: column event_id must be orderable, got "
            f"{fields['event_id'].simpleString()}"
        )


@dataclass(frozen=True)
class _Rules:
    """The rules decided in Spark SQL, over one frame's columns."""

    #: True for sends the pass does not judge: rejected, without MessageId, detection off.
    decided: Column
    #: Their verdict and reason (null for the sends the pass judges).
    verdict: Column
    reason: Column
    #: The uniqueness key, null for decided sends.
    key: Column


def _rules(df: DataFrame, policies: DedupPolicy | Mapping[str, DedupPolicy | None]) -> _Rules:
    """Spark twins of :func:`policy.rejection_reasons` and :func:`policy.uniqueness_key`,
    with the per-entity rules of :class:`broker.Broker`.

    Built twice per replay: before the pass for ``decided`` and the key, after it for the
    texts, so that no verdict or reason strings travel through the shuffle and the sort.
    """
    mid, pk, sid = (_text(df, c) for c in ("message_id", "partition_key", "session_id"))
    entity = _text(df, "entity")
    checks = [(F.col("send_time").isNull(), F.lit(REASON_MISSING_TIME))]
    for name, value in (("message_id", mid), ("partition_key", pk), ("session_id", sid)):
        # No text of at most 128 bytes has more than 128 characters: count them only past that.
        longer = (F.octet_length(value) > MAX_PROPERTY_LENGTH) & (
            F.length(value) > MAX_PROPERTY_LENGTH
        )
        checks.append((longer, F.lit(too_long_reason(PROPERTY_NAMES[name]))))
    checks.append((_is_set(pk) & _is_set(sid) & (pk != sid), F.lit(REASON_KEY_MISMATCH)))
    off: Column = F.lit(False)
    if not isinstance(policies, DedupPolicy):
        known = entity.isin(list(policies)) if policies else F.lit(False)
        unknown = F.when(entity.isNull(), F.lit(UNKNOWN_NO_ENTITY)).otherwise(
            F.concat(F.lit(UNKNOWN_ENTITY[0]), entity, F.lit(UNKNOWN_ENTITY[1]))
        )
        checks.append((~F.coalesce(known, F.lit(False)), unknown))
        off_names = [name for name, policy in policies.items() if policy is None]
        if off_names:
            off = F.coalesce(entity.isin(off_names), F.lit(False))
    rejected = F.coalesce(*(F.when(test, F.lit(True)) for test, _ in checks), F.lit(False))
    rejection = F.concat_ws("; ", *(F.when(test, text) for test, text in checks))
    reason = (
        F.when(rejected, rejection)
        .when(off, F.lit(DETECTION_OFF_NOTE))
        .when(~_is_set(mid), F.lit(NO_MESSAGE_ID_WARNING))
        .otherwise(F.lit(None).cast("string"))
    )
    verdict = (
        F.when(rejected, F.lit(REJECTED))
        .when(off | ~_is_set(mid), F.lit(ACCEPTED))
        .otherwise(F.lit(None).cast("string"))
    )
    decided = rejected | off | ~F.coalesce(_is_set(mid), F.lit(False))
    effective = F.coalesce(F.when(_is_set(sid), sid), F.when(_is_set(pk), pk), mid)
    partitioned = _partitioned(policies)
    if partitioned is True:
        key = F.to_json(F.array(effective, mid))
    elif partitioned is False:
        key = mid
    else:
        key = F.when(entity.isin(partitioned), F.to_json(F.array(effective, mid))).otherwise(mid)
    return _Rules(decided, verdict, reason, F.when(~decided, key))


def _partitioned(policies: DedupPolicy | Mapping[str, DedupPolicy | None]) -> bool | list[str]:
    """True or False when every checked entity is alike, else the partitioned entities."""
    if isinstance(policies, DedupPolicy):
        return policies.partitioning
    modes = {name: p.partitioning for name, p in policies.items() if p is not None}
    if len(set(modes.values())) <= 1:
        return next(iter(modes.values()), False)
    return [name for name, on in modes.items() if on]


def _window(policies: DedupPolicy | Mapping[str, DedupPolicy | None]) -> int | dict[str, int]:
    """The window in microseconds when every checked entity has the same, else per entity."""
    if isinstance(policies, DedupPolicy):
        return policies.window_micros
    windows = {name: p.window_micros for name, p in policies.items() if p is not None}
    if len(set(windows.values())) <= 1:
        return next(iter(windows.values()), DedupPolicy().window_micros)
    return windows


#: Which replay kernel runs the pass; see :func:`detect_duplicates`.
Kernel = Literal["auto", "jvm", "python"]
KERNELS: tuple[str, ...] = get_args(Kernel)
#: The reasons the JVM kernel was unavailable that this process already warned about.
_warned: set[str] = set()


def detect_duplicates(
    df: DataFrame,
    policy: DedupPolicy | Mapping[str, DedupPolicy | None] | None = None,
    *,
    kernel: Kernel = "auto",
) -> DataFrame:
    """Every input row once, with the verdict Service Bus would have given it.

    Adds ``verdict`` (accepted, duplicate, rejected), ``reason`` (why rejected, or a warning
    such as a missing MessageId), ``dedup_key``, and for duplicates ``original_send_time`` and
    ``original_event_id`` (the accepted send whose window caught it). An input without
    ``event_id`` gets one: the row's position in the input as Spark reads it.

    ``policy`` is one policy for every entity, or per-entity settings (entity name to policy,
    ``None`` where detection is off, as :func:`dedup_lib.load_entity_policies` returns): sends
    to an entity without detection are all accepted with a note that they were not checked,
    and sends to an entity the mapping lacks are rejected.

    ``kernel`` chooses what walks each key's sends after the sort: ``"jvm"`` (compiled from
    ``java/Replay.java`` on first use; needs a JDK), ``"python"`` (Arrow batches in Spark's
    Python workers, about 1.3x slower), or ``"auto"``: the JVM one where it can be built and
    loaded, else the Python one, with a warning that says why. Both give the same verdicts.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
    policy = check_policies(policy if policy is not None else DedupPolicy())
    p = _prepare(df, policy)
    entity = F.col("entity") if p.has_entity else F.lit(None).cast("string")
    # Eligible sends spread by key; the others (rejected, no MessageId) one by one, so that
    # they never pile up in one partition. Sorting by this hash first gives Spark's sorter a
    # 64-bit prefix that settles nearly every comparison; the columns after it separate keys
    # whose hashes collide. It stays an expression, not a column: eight bytes less per row
    # through the shuffle ran the whole replay about 8 % faster.
    first, second = _key_hashes(entity, p.key_text())
    spread = F.when(~_decided(), first).otherwise(F.col(_POS))
    ordered = p.frame.repartition(spread).sortWithinPartitions(
        spread,
        _decided(),
        *(["entity"] if p.has_entity else []),
        p.key,
        p.send_time,
        F.col("event_id").asc_nulls_last(),
        _POS,
    )
    returns = _originals_type(ordered)
    name = _jvm_function(df.sparkSession, returns, kernel)
    if name is not None:
        window = F.col(_WINDOW) if isinstance(p.window, dict) else F.lit(p.window)
        found = F.call_function(
            name,
            spread,
            second,
            F.unix_micros(F.col(p.send_time)),
            F.col("event_id"),
            _decided(),
            window.cast("long"),
            F.monotonically_increasing_id(),
        )
        return _finish(ordered.withColumn(_JUDGED, found), p)

    micros = 0 if isinstance(p.window, dict) else p.window
    has_window = isinstance(p.window, dict)

    def replay(batches: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        return arrow_kernel.replay(batches, micros, has_window)

    return _finish(_judged(ordered, replay, p.arguments(spread, second)), p)


def _jvm_function(spark: SparkSession, returns: T.StructType, kernel: Kernel) -> str | None:
    """The JVM kernel's function name in ``spark``, or None to use the Python kernel."""
    if kernel == "python":
        return None
    try:
        return jvm.replay_function(spark, returns)
    except jvm.JvmKernelUnavailable as exc:
        if kernel == "jvm":
            raise
        reason = str(exc)
        if reason not in _warned:
            _warned.add(reason)
            warnings.warn(
                f"detect_duplicates: using the Python replay kernel (same verdicts, about "
                f"1.3x slower), because {reason}",
                RuntimeWarning,
                stacklevel=3,
            )
        return None


def _key_hashes(entity: Column, key: Column) -> tuple[Column, Column]:
    """Two independent 64-bit hashes of (entity, key): the first spreads and sorts the sends,
    the pair tells the keys apart in the pass.

    The pass compares hashes, not texts: copying the texts into Python cost 15 % more time.
    The sort still orders by the texts after the first hash, so keys that share it stay
    apart, and the second tells them apart; two keys would have to collide on both (about 1
    in 10^25 for 10 M keys) to be taken for one.
    """
    return F.xxhash64(entity, key), F.xxhash64(F.lit(_SECOND_HASH_SEED), entity, key)


def detect_duplicates_by_count(
    df: DataFrame, capacity: int, partitioning: bool = False
) -> DataFrame:
    """Every input row once, judged against a cache of the last ``capacity`` accepted ids of
    its entity instead of a time window (ActiveMQ Artemis keeps 20,000; SPEC section 7).

    The same columns and rules as :func:`detect_duplicates` (key, rejections, sends without
    MessageId); only the history differs: it holds a fixed number of ids, for any time. One
    entity's sends go through one Python worker in time order, so it is slower than the time
    window's replay; a what-if, not the broker.
    """
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity: expected a positive number of ids, got {capacity!r}")
    p = _prepare(df, DedupPolicy(partitioning=partitioning, bounds="none"))
    ordered = (
        p.frame.repartition("entity") if p.has_entity else p.frame.repartition(1)
    ).sortWithinPartitions(
        *(["entity"] if p.has_entity else []),
        p.send_time,
        F.col("event_id").asc_nulls_last(),
        _POS,
    )
    has_entity = p.has_entity

    def judge(batches: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        return arrow_kernel.count_cache(batches, capacity, has_entity)

    group = [F.col(p.key), *([F.col("entity")] if has_entity else [])]
    return _finish(_judged(ordered, judge, p.arguments(*group)), p)


@dataclass(frozen=True)
class _Prepared:
    """Sends ready for a pass: verdicts of the sends not judged by key, keys, a position."""

    frame: DataFrame
    columns: list[str]
    alias: dict[str, str]
    #: Names, in ``frame``, of the key the pass groups by and of the send time it reads.
    key: str
    send_time: str
    by_id: bool
    has_entity: bool
    window: int | dict[str, int]
    policy: DedupPolicy | Mapping[str, DedupPolicy | None]

    def key_text(self) -> Column:
        """The uniqueness key as text, for the sends the pass judges."""
        return F.col("message_id").cast("string") if self.by_id else F.col("dedup_key")

    def arguments(self, *group: Column) -> list[Column]:
        """What a kernel takes: what tells the key groups apart (key, [entity]), then time,
        event id, decided, [window]."""
        return [
            *group,
            F.col(self.send_time),
            F.col("event_id"),
            _decided(),
            *([F.col(_WINDOW)] if isinstance(self.window, dict) else []),
        ]


def _prepare(df: DataFrame, policy: DedupPolicy | Mapping[str, DedupPolicy | None]) -> _Prepared:
    _validate(df)
    columns = list(df.columns)
    df = df.withColumn(_POS, F.monotonically_increasing_id())
    if "event_id" not in columns:
        df = df.withColumn("event_id", F.col(_POS))
        columns.append("event_id")
    # A wall clock without zone (timestamp_ntz) is read as UTC, whatever the session time zone,
    # in a twin column: the input column is returned as it came.
    ntz = isinstance(df.schema["send_time"].dataType, T.TimestampNTZType)
    time_name = _TIME if ntz else "send_time"
    utc_time = F.concat(F.col("send_time").cast("string"), F.lit("Z")).try_cast("timestamp")

    rules = _rules(df, policy)
    # Without partitioning the key is the MessageId itself: the pass reads it from there, and
    # dedup_key is written after it, so one string column fewer crosses into Python.
    by_id = _partitioned(policy) is False
    key_column = "message_id" if by_id else "dedup_key"
    carried = [] if by_id else [rules.key.alias("dedup_key")]
    window = _window(policy)
    if isinstance(window, dict):
        per_entity = F.create_map(*(F.lit(x) for pair in window.items() for x in pair))
        carried.append(
            F.coalesce(per_entity[_text(df, "entity")], F.lit(0)).cast("long").alias(_WINDOW)
        )
    # Names with dots or backticks travel under an alias, so that no step has to quote them.
    alias = {c: f"__dedup_col{i}" if "." in c or "`" in c else c for i, c in enumerate(columns)}
    prepared = df.select(
        *(column(c).alias(alias[c]) for c in columns),
        *([utc_time.alias(_TIME)] if ntz else []),
        *carried,
        F.when(rules.decided, -F.col(_POS) - 1).otherwise(F.col(_POS)).alias(_POS),
    )
    return _Prepared(
        prepared, columns, alias, key_column, time_name, by_id, "entity" in columns, window, policy
    )


def _judged(
    ordered: DataFrame,
    judge: Callable[[Iterator[tuple[pa.Array, ...]]], Iterator[pa.Array]],
    arguments: list[Column],
) -> DataFrame:
    """``ordered`` with the kernel's answer per send, in a struct column.

    A scalar iterator Arrow UDF, not ``mapInArrow``: Spark keeps each row in the JVM and sends
    Python only the arguments, in the partition's order, one iterator per partition. It is
    marked nondeterministic because its answer depends on the rows before it: Spark must
    neither move it below the sort nor evaluate it twice.
    """
    originals = _originals_type(ordered)
    # The eval type comes from the type hints of ``judge`` (Iterator[tuple[pa.Array, ...]] ->
    # Iterator[pa.Array]), which Spark reads from this module's names.
    udf = arrow_udf(judge, originals).asNondeterministic()  # type: ignore[call-overload]
    return ordered.withColumn(_JUDGED, udf(*arguments))


def _originals_type(ordered: DataFrame) -> T.StructType:
    """What either kernel answers per send: the original's time and event id, or null."""
    return T.StructType(
        [
            T.StructField(arrow_kernel.ORIGINAL_FIELDS[0], T.TimestampType(), True),
            T.StructField(
                arrow_kernel.ORIGINAL_FIELDS[1], ordered.schema["event_id"].dataType, True
            ),
        ]
    )


def _finish(judged: DataFrame, p: _Prepared) -> DataFrame:
    """The result columns. The rules' texts are built only for the sends decided before the
    pass (a few per cent): the others' verdict follows from the kernel's answer alone."""
    found = F.col(_JUDGED)
    original_time = found.getField(arrow_kernel.ORIGINAL_FIELDS[0])
    judged_by_key = ~_decided()
    rules = _rules(judged, p.policy)
    verdict = F.when(
        judged_by_key,
        F.when(original_time.isNotNull(), F.lit(DUPLICATE)).otherwise(F.lit(ACCEPTED)),
    ).otherwise(rules.verdict)
    return judged.select(
        *(F.col(p.alias[c]).alias(c) for c in p.columns),
        verdict.alias("verdict"),
        F.when(_decided(), rules.reason).alias("reason"),
        F.when(judged_by_key, p.key_text()).alias("dedup_key"),
        original_time.alias("original_send_time"),
        found.getField(arrow_kernel.ORIGINAL_FIELDS[1]).alias("original_event_id"),
    )
