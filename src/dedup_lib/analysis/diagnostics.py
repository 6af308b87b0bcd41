"""What the broker says nothing about: resends that slipped through, and messages it destroyed.

Both read a :func:`dedup_lib.detect_duplicates` result plus the sends' content: a
``payload_hash`` column, or any columns that together say what a message carries. Service Bus
compares MessageIds only (docs/rules.md, section 1), so content tells what the ids hide:

- a **missed resend** is a send accepted although an earlier accepted send of the same entity
  carried the same content: the message reached consumers twice (docs/rules.md, section 6,
  items 1, 3, 4);
- a **collision** is a send dropped as a duplicate whose content differs from the original
  that caught it: a legitimate message lost without a signal (docs/rules.md, section 6, item 2).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import Column, Window
from pyspark.sql import functions as F

from dedup_lib.analysis.totals import NO_ENTITY, bucket_seconds, entity_column
from dedup_lib.columns import GROUP_HASH, KEY_HASH
from dedup_lib.errors import InputError
from dedup_lib.rules.policy import (
    ACCEPTED,
    DETECTION_OFF_NOTE,
    DUPLICATE,
    NO_MESSAGE_ID_WARNING,
)
from dedup_lib.spark import to_pandas

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CONTENT = "content"
#: Why a resend reached consumers again, in the order they are tested.
MISS_NO_ID = "no MessageId"
MISS_NOT_CHECKED = "detection off"
MISS_NEW_ID = "new MessageId"
MISS_PARTITION_KEY = "partition key differs"
MISS_AFTER_WINDOW = "after the window"
MISS_CAUSES = (MISS_NO_ID, MISS_NOT_CHECKED, MISS_NEW_ID, MISS_PARTITION_KEY, MISS_AFTER_WINDOW)

ALL_ZERO_GUID = "all-zero GUID"
GUID = "GUID"
NO_ID = "(none)"
_GUID = r"^\{?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\}?$"
_ZERO_GUID = r"^\{?0{8}-0{4}-0{4}-0{4}-0{12}\}?$"


def content_key(df: DataFrame, content: str | Sequence[str] | None = None) -> Column:
    """One value per distinct content: the ``payload_hash`` column by default, the named column
    as it is, or a SHA-256 over several columns. Null when every content column is null."""
    names = check_content(df.columns, content)
    if len(names) == 1:
        return F.col(names[0]).cast("string")
    packed = F.to_json(F.struct(*(F.col(n) for n in names)))
    present = functools.reduce(operator.or_, (F.col(n).isNotNull() for n in names))
    return F.when(present, F.sha2(packed, 256))


def check_content(columns: Sequence[str], content: str | Sequence[str] | None) -> list[str]:
    """The content columns, ``payload_hash`` when None, each checked to be one of ``columns``:
    a caller checks them before a replay, which would otherwise run for nothing."""
    if content is None:
        if "payload_hash" not in columns:
            raise InputError(
                "no content to compare: the telemetry has no payload_hash column; pass "
                "content=[...] with the columns that together say what a message carries "
                f"(the input has {', '.join(columns)})"
            )
        return ["payload_hash"]
    names = [content] if isinstance(content, str) else list(content)
    if not names:
        raise InputError("content: name at least one column")
    missing = [n for n in names if n not in columns]
    if missing:
        raise InputError(
            f"content: column(s) {', '.join(missing)} not in the telemetry; it has "
            f"{', '.join(columns)}"
        )
    return names


def _check_result(result: DataFrame, what: str) -> None:
    needed = ("verdict", "reason", "dedup_key", "original_send_time", "original_event_id")
    missing = [c for c in (*needed, "send_time", "event_id") if c not in result.columns]
    if missing:
        raise InputError(
            f"{what}: expected a detect_duplicates result, but column(s) {', '.join(missing)} "
            "are missing"
        )


def _ride_along(result: DataFrame, taken: Sequence[str]) -> list[Column]:
    """The telemetry's other columns, after the diagnostic's own; the engine's, and any that
    share a name with the diagnostic's own, are left out of this view."""
    engine = ("verdict", "reason", "dedup_key", "original_send_time", "original_event_id")
    return [F.col(c) for c in result.columns if c not in (*taken, *engine)]


def id_pattern(message_id: Column) -> Column:
    """The shape of a MessageId: ``all-zero GUID``, ``GUID``, ``(none)``, or the id with its
    digit runs written ``#`` (``order-#``), so reused ids of one scheme fall together."""
    text = message_id.cast("string")
    return (
        F.when(text.isNull() | (text == ""), F.lit(NO_ID))
        .when(text.rlike(_ZERO_GUID), F.lit(ALL_ZERO_GUID))
        .when(text.rlike(_GUID), F.lit(GUID))
        .otherwise(F.regexp_replace(text, r"[0-9]+", "#"))
    )


def missed_resends(result: DataFrame, content: str | Sequence[str] | None = None) -> DataFrame:
    """Sends accepted although an earlier accepted send of the same entity carried the same
    content: each reached consumers again.

    Parameters
    ----------
    result : DataFrame
        A :func:`dedup_lib.detect_duplicates` result.
    content : str or sequence of str, optional
        The column(s) that tell one message's content from another's; default
        ``payload_hash`` (see :func:`content_key`).

    Returns
    -------
    DataFrame
        One row per missed resend:

        - ``event_id``
        - ``entity``
        - ``send_time``
        - ``message_id``
        - ``miss_cause``: one of :data:`MISS_CAUSES`: no MessageId, detection off on the
          entity, a new MessageId for the same content, the same MessageId under another
          partition key, or a resend after the window
        - ``delay``: after the earlier copy that was delivered, in seconds
        - ``caught_from``: for a resend after the window, the shortest window, in
          seconds, from which on every window catches it
        - ``previous_event_id``: the earlier copy's, and so the next two
        - ``previous_send_time``
        - ``previous_message_id``
        - ``content``: the content key
        - the input's other columns

    Raises
    ------
    InputError
        ``result`` is not a detect_duplicates result, or has no content column.

    Examples
    --------
    >>> from dedup_lib import DedupPolicy, detect_duplicates, get_spark, load_telemetry
    >>> from dedup_lib import sample_path
    >>> sends = load_telemetry(get_spark(), sample_path("incident.parquet")).valid
    >>> from dedup_lib import missed_resends
    >>> result = detect_duplicates(sends, DedupPolicy("PT10M"))
    >>> missed = missed_resends(result)
    >>> missed.groupBy("miss_cause").count().orderBy("miss_cause").collect()
    [Row(miss_cause='new MessageId', count=206)]
    """
    _check_result(result, "missed_resends")
    keyed = result.withColumn(CONTENT, content_key(result, content)).withColumn(
        "__entity", entity_column(result)
    )
    repeats = _repeats(keyed)
    cause = _miss_cause()
    first_of_key = _first_sends(keyed, repeats.where(cause == MISS_AFTER_WINDOW))
    misses = repeats.join(first_of_key, ["__entity", "dedup_key"], "left")
    micros = F.unix_micros("send_time")
    caught_from = F.when(
        cause == MISS_AFTER_WINDOW,
        (micros - F.unix_micros("__key_first") + 1) / F.lit(1_000_000.0),
    )
    return misses.select(
        "event_id",
        F.col("__entity").alias("entity"),
        "send_time",
        "message_id",
        cause.alias("miss_cause"),
        ((micros - F.unix_micros("__prev_send_time")) / F.lit(1_000_000.0)).alias("delay"),
        caught_from.alias("caught_from"),
        F.col("__prev_event_id").alias("previous_event_id"),
        F.col("__prev_send_time").alias("previous_send_time"),
        F.col("__prev_message_id").alias("previous_message_id"),
        CONTENT,
        *_ride_along(result, _MISSED_COLUMNS),
    )


#: The columns :func:`missed_resends` gives of its own; the result's others ride along.
_MISSED_COLUMNS = (
    "event_id",
    "entity",
    "send_time",
    "message_id",
    "miss_cause",
    "delay",
    "caught_from",
    "previous_event_id",
    "previous_send_time",
    "previous_message_id",
    CONTENT,
)


def _repeats(keyed: DataFrame) -> DataFrame:
    """The accepted sends with content that an earlier accepted send of the entity carried,
    with that send's event id, time, MessageId and key (``__prev_*``)."""
    # Grouped by a 64-bit hash of the group first, a column: the sort then settles nearly
    # every comparison on its prefix instead of comparing texts (as the replay does). As an
    # expression, each lag got a shuffle of its own (docs/decisions/query-shapes.md).
    order = Window.partitionBy(GROUP_HASH, "__entity", CONTENT).orderBy(
        "send_time", F.col("event_id").asc_nulls_last()
    )
    delivered = keyed.where((F.col("verdict") == ACCEPTED) & F.col(CONTENT).isNotNull())
    delivered = delivered.withColumn(GROUP_HASH, F.xxhash64("__entity", CONTENT)).select(
        "*",
        *(
            F.lag(name).over(order).alias(f"__prev_{name}")
            for name in ("event_id", "send_time", "message_id", "dedup_key")
        ),
    )
    return delivered.where(F.col("__prev_send_time").isNotNull())


def _first_sends(keyed: DataFrame, late: DataFrame) -> DataFrame:
    """The first send (``__key_first``) of each key of the ``late`` resends (after the
    window: few): their keys go to every task, and no send of another key is shuffled."""
    keys = late.select("__entity", "dedup_key").distinct()
    return (
        keyed.where(F.col("dedup_key").isNotNull())
        .join(F.broadcast(keys), ["__entity", "dedup_key"], "left_semi")
        .groupBy("__entity", "dedup_key")
        .agg(F.min("send_time").alias("__key_first"))
    )


def _miss_cause() -> Column:
    """Why a resend was delivered again, compared with the earlier copy (``__prev_*``): the
    first of :data:`MISS_CAUSES` that applies."""
    mid = F.col("message_id").cast("string")
    prev_mid = F.col("__prev_message_id").cast("string")
    return (
        F.when(F.col("reason") == DETECTION_OFF_NOTE, F.lit(MISS_NOT_CHECKED))
        .when(F.col("reason") == NO_MESSAGE_ID_WARNING, F.lit(MISS_NO_ID))
        .when(~mid.eqNullSafe(prev_mid), F.lit(MISS_NEW_ID))
        .when(~F.col("dedup_key").eqNullSafe(F.col("__prev_dedup_key")), F.lit(MISS_PARTITION_KEY))
        .otherwise(F.lit(MISS_AFTER_WINDOW))
    )


def collisions(result: DataFrame, content: str | Sequence[str] | None = None) -> DataFrame:
    """Sends dropped as duplicates whose content differs from the original that caught them:
    legitimate messages lost without a signal.

    Sends whose content or whose original's content is unknown (null) are not counted:
    nothing says they differ.

    Parameters
    ----------
    result : DataFrame
        A :func:`dedup_lib.detect_duplicates` result.
    content : str or sequence of str, optional
        The column(s) that tell one message's content from another's; default
        ``payload_hash``.

    Returns
    -------
    DataFrame
        One row per lost send:

        - ``event_id``
        - ``entity``
        - ``send_time``
        - ``message_id``
        - ``id_pattern``: :func:`id_pattern`
        - ``original_event_id``: the accepted send that caught it, and so the next
        - ``original_send_time``
        - ``content``: the lost send's content key
        - ``original_content``: the original's
        - the input's other columns

    Raises
    ------
    InputError
        ``result`` is not a detect_duplicates result, or has no content column.

    Examples
    --------
    A retry (2), and a new message sent under a MessageId already used (3):

    >>> from datetime import datetime, timezone
    >>> from dedup_lib import DedupPolicy, collisions, detect_duplicates, get_spark
    >>> def at(minute, second=0):
    ...     return datetime(2026, 11, 3, 20, minute, second, tzinfo=timezone.utc)
    >>> sends = get_spark().createDataFrame(
    ...     [(1, "orders", "order-1", at(0), "a"), (2, "orders", "order-1", at(0, 30), "a"),
    ...      (3, "orders", "order-1", at(4), "b")],
    ...     "event_id long, entity string, message_id string, send_time timestamp, "
    ...     "payload_hash string")
    >>> lost = collisions(detect_duplicates(sends, DedupPolicy("PT10M")))
    >>> lost.select("event_id", "id_pattern", "original_event_id", "content",
    ...             "original_content").show()
    +--------+----------+-----------------+-------+----------------+
    |event_id|id_pattern|original_event_id|content|original_content|
    +--------+----------+-----------------+-------+----------------+
    |       3|   order-#|                1|      b|               a|
    +--------+----------+-----------------+-------+----------------+
    <BLANKLINE>
    """
    _check_result(result, "collisions")
    keyed = result.withColumn(CONTENT, content_key(result, content)).withColumn(
        "__entity", entity_column(result)
    )
    originals = keyed.where(F.col("verdict") == ACCEPTED).select(
        "__entity",
        "dedup_key",
        F.col("send_time").alias("original_send_time"),
        F.col("event_id").alias("original_event_id"),
        F.col(CONTENT).alias("original_content"),
    )
    dropped = keyed.where(F.col("verdict") == DUPLICATE).drop("entity")
    # Joined on a 64-bit hash of the key first, so the join's sort compares numbers first.
    dropped = dropped.withColumn(KEY_HASH, F.xxhash64("__entity", "dedup_key"))
    originals = originals.withColumn(KEY_HASH, F.xxhash64("__entity", "dedup_key"))
    joined = dropped.join(
        originals,
        [KEY_HASH, "__entity", "dedup_key", "original_send_time", "original_event_id"],
        "inner",
    ).where(F.col(CONTENT) != F.col("original_content"))
    own = (
        "event_id",
        "entity",
        "send_time",
        "message_id",
        "id_pattern",
        CONTENT,
        "original_content",
    )
    return joined.select(
        "event_id",
        F.col("__entity").alias("entity"),
        "send_time",
        "message_id",
        id_pattern(F.col("message_id")).alias("id_pattern"),
        "original_event_id",
        "original_send_time",
        CONTENT,
        "original_content",
        *_ride_along(result, own),
    )


def collision_groups(lost: DataFrame) -> pd.DataFrame:
    """:func:`collisions` grouped by entity, sender (when the telemetry names one) and id
    pattern: ``sends_dropped``, ``distinct_contents`` among them (the different messages
    hit), ``distinct_ids``, and the ``first`` and ``last`` drop; most drops first. A small
    pandas table."""
    by = ["entity", *(["sender"] if "sender" in lost.columns else []), "id_pattern"]
    counts = ["sends_dropped", "distinct_contents", "distinct_ids"]
    table = to_pandas(
        lost.groupBy(*by).agg(
            F.count(F.lit(1)).alias("sends_dropped"),
            F.count_distinct(CONTENT).alias("distinct_contents"),
            F.count_distinct("message_id").alias("distinct_ids"),
            F.min("send_time").alias("first"),
            F.max("send_time").alias("last"),
        )
    )
    table[counts] = table[counts].astype("int64")
    order = table.sort_values(["sends_dropped", *by], ascending=[False] + [True] * len(by))
    return order.reset_index(drop=True)


def missed_summary(misses: DataFrame) -> pd.DataFrame:
    """:func:`missed_resends` counted per entity and cause, with the longest ``caught_from``
    among resends after the window (the window that would have caught all of them)."""
    table = to_pandas(
        misses.groupBy("entity", "miss_cause").agg(
            F.count(F.lit(1)).alias("resends"),
            F.max("caught_from").alias("longest_caught_from"),
            F.percentile_approx("delay", 0.5).alias("median_delay"),
        )
    )
    table["resends"] = table["resends"].astype("int64")
    rank = {cause: i for i, cause in enumerate(MISS_CAUSES)}
    table["__rank"] = table["miss_cause"].map(rank)
    return (
        table.sort_values(["entity", "__rank"])
        .drop(columns="__rank")
        .reset_index(drop=True)
        .fillna({"entity": NO_ENTITY})
    )


def counts_over_time(found: DataFrame, by: str, bucket: str = "PT1M") -> pd.DataFrame:
    """Rows of :func:`missed_resends` or :func:`collisions` counted per time ``bucket`` (an
    ISO 8601 duration or shorthand), entity and the column ``by`` (``miss_cause``,
    ``id_pattern``, ``sender``): ``time``, ``entity``, ``by``, ``sends``. Small: one row per
    bucket and group that has any."""
    if by not in found.columns:
        raise InputError(f"counts_over_time: no column {by!r}; it has {', '.join(found.columns)}")
    seconds = bucket_seconds(bucket)
    start = F.timestamp_seconds(
        F.floor(F.unix_seconds("send_time") / seconds).cast("long") * seconds
    )
    table = to_pandas(
        found.groupBy(start.alias("time"), "entity", F.col(by).cast("string").alias(by)).agg(
            F.count(F.lit(1)).alias("sends")
        )
    )
    table["sends"] = table["sends"].astype("int64")
    table["time"] = pd.to_datetime(table["time"], utc=True)
    return table.sort_values(["time", "entity", by]).reset_index(drop=True)
