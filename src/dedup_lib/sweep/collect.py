"""Collect from Spark what the cache needs to answer any window: a few arrays in memory.

Only keys sent more than once can ever see a duplicate. One shuffle by key collects the
eligible sends of those keys (entity, key, time, tie order, ground truth) in replay order;
small aggregations count everything else per entity and time bucket: sends to keys used once
(always accepted), sends without a MessageId (accepted, unprotected) and rejected sends (never
judged; with partitioning, mixed batches too, refused whatever the window), and with ground
truth the sends of each message. Neither aggregation needs to know which keys repeat: the
driver takes off the repeated sends it brought in.

An input of at most :data:`LOCAL_ROWS` sends (counted first, reading no column) takes a shorter
road: one Spark job judges every send (the same rules, keys and time buckets) and brings back
one narrow row per send, and the driver groups them with Arrow. On a small input most of a
Spark pass is planning and compiling it (seconds in a fresh JVM), and three passes cost more
than the rows they move.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from pyspark.sql import types as T

from dedup_lib.errors import InputError
from dedup_lib.replay.passes import with_position
from dedup_lib.replay.sql_rules import validate
from dedup_lib.sweep import footprint
from dedup_lib.sweep.collected import Collected, judged_sends
from dedup_lib.sweep.driver_road import collect_in_driver
from dedup_lib.sweep.grid import to_micros
from dedup_lib.sweep.spark_road import collect_in_spark

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame


#: Inputs of at most this many sends are grouped in the driver, from one narrow Spark job.
LOCAL_ROWS = 1_000_000


#: Types whose values Arrow gives pandas as Spark's ``toPandas`` does, and orders and groups
#: as Spark does: the driver's road takes only these for ``event_id``, ``logical_id`` and
#: carried columns.
_LOCAL_TYPES = (T.StringType, T.IntegralType, T.BooleanType)


def collect(
    df: DataFrame,
    partitioning: bool = False,
    carry: Sequence[str] = (),
    bucket: timedelta | float | str = "PT1M",
    local_rows: int | None = None,
    allowed: footprint.Budget | None = None,
) -> Collected:
    """Spark passes over ``df`` (the input of ``detect_duplicates``) for one partitioning
    mode; ``carry`` names input columns to keep in ``repeated``. ``df`` is read once per
    pass, so it must give the same rows each time (files, or a persisted frame).

    Up to ``local_rows`` sends (default :data:`LOCAL_ROWS`; 0: never) are grouped in the
    driver instead, from one narrow job, once a job that reads no column has counted at most
    ``local_rows + 1`` of them. The first pass counts every send; when all of them would not
    fit in ``allowed`` (default: this session's ``spark.driver.maxResultSize`` and the memory
    available here), what the driver would hold is computed and stored where Spark runs and
    counted there (:func:`dedup_lib.sweep.footprint.persist_and_count`), and over
    ``allowed`` the build is refused, before any of it is brought back, with an
    :class:`InputError` that says how much it needs and what to narrow; where samples of the
    keys and sends already say so (:func:`dedup_lib.sweep.footprint.at_least`), before they
    are gathered at all."""
    validate(df)
    bucket_us = to_micros(bucket)
    _check_carry(list(df.columns), carry)
    limit = LOCAL_ROWS if local_rows is None else local_rows
    given, df = df, with_position(df)
    truth = all(c in df.columns for c in ("logical_id", "attempt"))
    # Counted before any column is read (and only where the driver's road is open): bringing
    # back the first million judged sends only to learn that there are more costs a tenth of
    # a large build.
    arrow = _local_types(df, truth, carry)
    if limit > 0 and arrow and given.limit(limit + 1).count() <= limit:
        judged = judged_sends(df, partitioning, truth, carry, bucket_us).toArrow()
        return collect_in_driver(judged, truth, bucket_us)
    return collect_in_spark(df, partitioning, carry, bucket_us, allowed, truth=truth, arrow=arrow)


def _check_carry(columns: list[str], carry: Sequence[str]) -> None:
    missing = [c for c in carry if c not in columns]
    if missing:
        raise InputError(
            f"ReplayCache.build: carry names column(s) {', '.join(missing)}, which the "
            f"input does not have; it has {', '.join(columns)}"
        )


def _local_types(df: DataFrame, truth: bool, carry: Sequence[str]) -> bool:
    fields = {f.name: f.dataType for f in df.schema.fields}
    names = ["event_id", *(["logical_id"] if truth else []), *carry]
    return all(isinstance(fields[n], _LOCAL_TYPES) for n in names)
