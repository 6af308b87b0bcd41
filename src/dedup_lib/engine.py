"""``detect_duplicates``: Service Bus duplicate detection replayed exactly, on Spark.

One shuffle by (entity, key), a sort by time within each partition, then one streaming pass
of :mod:`dedup_lib.kernel` over Arrow batches. Rejections and missing MessageIds are decided
in Spark SQL before the pass; the pass only walks the anchor chain of each key.
Uses the DataFrame API only, so it runs on classic Spark and on Spark Connect alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark import cloudpickle
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib import kernel
from dedup_lib.policy import (
    ACCEPTED,
    MAX_PROPERTY_LENGTH,
    NO_MESSAGE_ID_WARNING,
    PROPERTY_NAMES,
    REASON_KEY_MISMATCH,
    REASON_MISSING_TIME,
    REJECTED,
    DedupPolicy,
    too_long_reason,
)
from dedup_lib.spark import column

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame

REQUIRED = ("message_id", "send_time")
OUTPUT_COLUMNS = ("verdict", "reason", "dedup_key", "original_send_time", "original_event_id")
_INTERNAL = "__dedup_"
_POS = "__dedup_pos"
_SPREAD = "__dedup_spread"
_TIME = "__dedup_time"

# Ship the kernel by value, so a remote Spark Connect cluster needs no dedup_lib installed.
cloudpickle.register_pickle_by_value(kernel)  # type: ignore[no-untyped-call]


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


def _reason_and_key(df: DataFrame, policy: DedupPolicy) -> tuple[Column, Column, Column]:
    """Spark twins of :func:`policy.rejection_reasons` and :func:`policy.uniqueness_key`."""
    mid, pk, sid = (_text(df, c) for c in ("message_id", "partition_key", "session_id"))
    checks = [(F.col("send_time").isNull(), REASON_MISSING_TIME)]
    for name, value in (("message_id", mid), ("partition_key", pk), ("session_id", sid)):
        # No text of at most 128 bytes has more than 128 characters: count them only past that.
        longer = (F.octet_length(value) > MAX_PROPERTY_LENGTH) & (
            F.length(value) > MAX_PROPERTY_LENGTH
        )
        checks.append((longer, too_long_reason(PROPERTY_NAMES[name])))
    checks.append((_is_set(pk) & _is_set(sid) & (pk != sid), REASON_KEY_MISMATCH))
    rejected = F.coalesce(*(F.when(test, F.lit(True)) for test, _ in checks), F.lit(False))
    rejection = F.concat_ws("; ", *(F.when(test, F.lit(text)) for test, text in checks))
    reason = (
        F.when(rejected, rejection)
        .when(~_is_set(mid), F.lit(NO_MESSAGE_ID_WARNING))
        .otherwise(F.lit(None).cast("string"))
    )
    verdict = (
        F.when(rejected, F.lit(REJECTED))
        .when(~_is_set(mid), F.lit(ACCEPTED))
        .otherwise(F.lit(None).cast("string"))
    )
    if policy.partitioning:
        effective = F.coalesce(F.when(_is_set(sid), sid), F.when(_is_set(pk), pk), mid)
        key = F.to_json(F.array(effective, mid))
    else:
        key = mid
    return verdict, reason, F.when(verdict.isNull(), key).otherwise(F.lit(None).cast("string"))


def detect_duplicates(df: DataFrame, policy: DedupPolicy | None = None) -> DataFrame:
    """Every input row once, with the verdict Service Bus would have given it.

    Adds ``verdict`` (accepted, duplicate, rejected), ``reason`` (why rejected, or a warning
    such as a missing MessageId), ``dedup_key``, and for duplicates ``original_send_time`` and
    ``original_event_id`` (the accepted send whose window caught it). An input without
    ``event_id`` gets one: the row's position in the input as Spark reads it.
    """
    policy = policy or DedupPolicy()
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

    verdict, reason, key = _reason_and_key(df, policy)
    entity = F.col("entity") if "entity" in columns else F.lit(None).cast("string")
    # Without partitioning the key is the MessageId itself: the pass reads it from there, and
    # dedup_key is written after it, so one string column fewer crosses into Python.
    key_column = "dedup_key" if policy.partitioning else "message_id"
    carried = [key.alias("dedup_key")] if policy.partitioning else []
    # mapInArrow resolves its input by unquoted name, so names with dots travel under an alias.
    alias = {c: f"__dedup_col{i}" if "." in c or "`" in c else c for i, c in enumerate(columns)}
    prepared = df.select(
        *(column(c).alias(alias[c]) for c in columns),
        *([utc_time.alias(_TIME)] if ntz else []),
        verdict.alias("verdict"),
        reason.alias("reason"),
        *carried,
        _POS,
    )
    group_key = F.col("dedup_key") if policy.partitioning else F.col("message_id").cast("string")
    # Eligible sends spread by key; the others (rejected, no MessageId) one by one, so that
    # they never pile up in one partition. Sorting by this hash first gives Spark's sorter a
    # radix-sortable prefix; the columns after it separate keys whose hashes collide.
    spread = F.when(F.col("verdict").isNull(), F.xxhash64(entity, group_key)).otherwise(F.col(_POS))
    ordered = (
        prepared.withColumn(_SPREAD, spread)
        .repartition(_SPREAD)
        .sortWithinPartitions(
            _SPREAD,
            F.col("verdict").asc_nulls_first(),
            *(["entity"] if "entity" in columns else []),
            key_column,
            time_name,
            F.col("event_id").asc_nulls_last(),
            _POS,
        )
        .drop(_POS, _SPREAD)
    )

    cols = kernel.Columns(
        key=key_column,
        send_time=time_name,
        event_id="event_id",
        verdict="verdict",
        entity="entity" if "entity" in columns else None,
    )
    window = policy.window_micros

    def replay(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return kernel.replay_batches(batches, window, cols)

    schema = T.StructType(
        [
            *ordered.schema.fields,
            T.StructField("original_send_time", T.TimestampType(), True),
            T.StructField("original_event_id", ordered.schema["event_id"].dataType, True),
        ]
    )
    replayed = ordered.mapInArrow(replay, schema)
    if not policy.partitioning:
        replayed = replayed.withColumn(
            "dedup_key",
            F.when(F.col("reason").isNull(), F.col("message_id").cast("string")),
        )
    return replayed.select(*(F.col(alias[c]).alias(c) for c in columns), *OUTPUT_COLUMNS)
