"""What every replay pass shares: the sends prepared for it (rules decided, key, position),
a Python kernel as a Spark function, and the result columns built from its answers.

:func:`dedup_lib.replay.engine.detect_duplicates` and
:func:`dedup_lib.replay.by_count.detect_duplicates_by_count` differ only in how they order
the sends and which kernel walks them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.functions import arrow_udf

from dedup_lib.columns import JUDGED, MIXED_BATCH, POS, UTC_TIME, WINDOW, column, utc_wall_clock
from dedup_lib.replay import walk
from dedup_lib.replay.kernels import python as arrow_kernel
from dedup_lib.replay.sql_rules import (
    entity_window,
    partitioned,
    sql_rules,
    validate,
    window_us,
    with_batches,
)
from dedup_lib.rules.policy import ACCEPTED, DUPLICATE, Policies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


# Ship the kernel and its walk by value, so a remote Spark Connect cluster needs no dedup_lib
# installed.
cloudpickle.register_pickle_by_value(arrow_kernel)  # type: ignore[no-untyped-call]
cloudpickle.register_pickle_by_value(walk)  # type: ignore[no-untyped-call]


def decided() -> Column:
    """True for the sends decided in Spark SQL before the pass (see ``POS``)."""
    return F.col(POS) < F.lit(0)


@dataclass(frozen=True)
class Prepared:
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
    policy: Policies

    def key_text(self) -> Column:
        """The dedup key as text, for the sends the pass judges."""
        return F.col("message_id").cast("string") if self.by_id else F.col("dedup_key")

    def arguments(self, *group: Column) -> list[Column]:
        """What a kernel takes: what tells the key groups apart (key, [entity]), then time,
        event id, decided, [window]."""
        return [
            *group,
            F.col(self.send_time),
            F.col("event_id"),
            decided(),
            *([F.col(WINDOW)] if isinstance(self.window, dict) else []),
        ]


def with_position(df: DataFrame) -> DataFrame:
    """``df`` with each row's position in the input (:data:`POS`), and an ``event_id`` that is
    that position where the input has none: the last tie-break of the replay order."""
    has_id = "event_id" in df.columns
    df = df.withColumn(POS, F.monotonically_increasing_id())
    return df if has_id else df.withColumn("event_id", F.col(POS))


def prepare(df: DataFrame, policy: Policies) -> Prepared:
    validate(df)
    df = with_position(df)
    columns = [c for c in df.columns if c != POS]
    # A wall clock without zone (timestamp_ntz) is read as UTC, whatever the session time zone,
    # in a twin column: the input column is returned as it came.
    ntz = isinstance(df.schema["send_time"].dataType, T.TimestampNTZType)
    time_name = UTC_TIME if ntz else "send_time"
    utc_time = utc_wall_clock(F.col("send_time"))

    # The batch rule travels as a flag, so that the reasons built after the pass see it too.
    df = with_batches(df, policy, F.col(POS))
    rules = sql_rules(df, policy)
    # Without partitioning the key is the MessageId itself: the pass reads it from there, and
    # dedup_key is written after it, so one string column fewer crosses into Python.
    by_id = partitioned(policy) is False
    key_column = "message_id" if by_id else "dedup_key"
    carried = [] if by_id else [rules.key.alias("dedup_key")]
    if MIXED_BATCH in df.columns:
        carried.append(F.col(MIXED_BATCH))
    window = window_us(policy)
    if isinstance(window, dict):
        carried.append(entity_window(df, window).alias(WINDOW))
    # Names with dots or backticks travel under an alias, so that no step has to quote them.
    alias = {c: f"__dedup_col{i}" if "." in c or "`" in c else c for i, c in enumerate(columns)}
    prepared = df.select(
        *(column(c).alias(alias[c]) for c in columns),
        *([utc_time.alias(UTC_TIME)] if ntz else []),
        *carried,
        F.when(rules.decided, -F.col(POS) - 1).otherwise(F.col(POS)).alias(POS),
    )
    return Prepared(
        prepared, columns, alias, key_column, time_name, by_id, "entity" in columns, window, policy
    )


def judged(
    ordered: DataFrame,
    judge: Callable[[Iterator[tuple[pa.Array, ...]]], Iterator[pa.Array]],
    arguments: list[Column],
    returns: T.StructType | None = None,
) -> DataFrame:
    """``ordered`` with the kernel's answer per send, in a struct column (of type
    ``returns``, by default :func:`originals_type`).

    A scalar iterator Arrow UDF, not ``mapInArrow``: Spark keeps each row in the JVM and sends
    Python only the arguments, in the partition's order, one iterator per partition. It is
    marked nondeterministic because its answer depends on the rows before it: Spark must
    neither move it below the sort nor evaluate it twice.
    """
    originals = returns if returns is not None else originals_type(ordered)
    # The eval type comes from the type hints of ``judge`` (Iterator[tuple[pa.Array, ...]] ->
    # Iterator[pa.Array]), which Spark reads from this module's names.
    udf = arrow_udf(judge, originals).asNondeterministic()  # type: ignore[call-overload]
    return ordered.withColumn(JUDGED, udf(*arguments))


def originals_type(ordered: DataFrame) -> T.StructType:
    """What either kernel answers per send: the original's time and event id, or null."""
    return T.StructType(
        [
            T.StructField(arrow_kernel.ORIGINAL_FIELDS[0], T.TimestampType(), True),
            T.StructField(
                arrow_kernel.ORIGINAL_FIELDS[1], ordered.schema["event_id"].dataType, True
            ),
        ]
    )


def finish(judged: DataFrame, p: Prepared) -> DataFrame:
    """The result columns. The rules' texts are built only for the sends decided before the
    pass (a few per cent): the others' verdict follows from the kernel's answer alone."""
    found = F.col(JUDGED)
    original_time = found.getField(arrow_kernel.ORIGINAL_FIELDS[0])
    judged_by_key = ~decided()
    rules = sql_rules(judged, p.policy)
    verdict = F.when(
        judged_by_key,
        F.when(original_time.isNotNull(), F.lit(DUPLICATE)).otherwise(F.lit(ACCEPTED)),
    ).otherwise(rules.verdict)
    return judged.select(
        *(F.col(p.alias[c]).alias(c) for c in p.columns),
        verdict.alias("verdict"),
        F.when(decided(), rules.reason).alias("reason"),
        F.when(judged_by_key, p.key_text()).alias("dedup_key"),
        original_time.alias("original_send_time"),
        found.getField(arrow_kernel.ORIGINAL_FIELDS[1]).alias("original_event_id"),
    )
