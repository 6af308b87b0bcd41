"""``detect_duplicates``: Service Bus duplicate detection replayed exactly, on Spark.

One shuffle by (entity, key), a sort by time within each partition, then one streaming pass that
walks the anchor chain of each key over two 64-bit hashes of (entity, key), the time, the event
id and a flag; the other columns are never touched. The pass is the JVM kernel
(:mod:`dedup_lib.replay.kernels.jvm`, a Java function Spark calls once per send in sort order)
or, where that cannot be built or loaded, :mod:`dedup_lib.replay.kernels.python` over Arrow
batches in Spark's Python workers; both give the same verdicts. Rejections and missing
MessageIds are decided in Spark SQL before the pass. Uses the DataFrame API only, so it runs on
classic Spark and on Spark Connect alike.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import JUDGED, POS, WINDOW
from dedup_lib.errors import DedupLibWarning, InputError
from dedup_lib.replay.kernels import KERNELS, Kernel, jvm
from dedup_lib.replay.kernels import python as arrow_kernel
from dedup_lib.replay.passes import Prepared, decided, finish, judged, originals_type, prepare
from dedup_lib.rules.policy import DedupPolicy, Policies, check_policies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Seeds the second key hash, so that it is independent of the first (Spark's fixed seed 42).
_SECOND_HASH_SEED = 0x5EED


#: The reasons the JVM kernel was unavailable that this process already warned about.
_warned: set[str] = set()


def detect_duplicates(
    df: DataFrame,
    policy: Policies | None = None,
    *,
    kernel: Kernel = "auto",
) -> DataFrame:
    """Every input row once, with the verdict Service Bus would have given it.

    The rules are those of docs/rules.md: a send is a duplicate when an accepted send of
    its dedup key is within the window before it (the anchor), and a duplicate never moves
    the anchor. Lazy: nothing runs until the result is read.

    Parameters
    ----------
    df : DataFrame
        Sends with the canonical columns (``LoadedTelemetry.valid``). An input without
        ``event_id`` gets one: the row's position in the input as Spark reads it.
    policy : DedupPolicy or Mapping[str, DedupPolicy | None], optional
        One policy for every entity (default: ``DedupPolicy()``, PT10M), or per entity,
        ``None`` where detection is off, as :func:`dedup_lib.load_entity_policies` returns:
        sends to an entity without detection are accepted with a note that they were not
        checked, and sends to an entity the mapping lacks are rejected.
    kernel : {"auto", "jvm", "python"}, default "auto"
        What walks each key's sends after the sort: ``"jvm"`` (compiled from
        ``java/Replay.java`` on first use; needs a JDK), ``"python"`` (Arrow batches in
        Spark's Python workers, slower), or ``"auto"``: the JVM one where it can be built
        and loaded, else the Python one, with a warning that says why. Same verdicts.

    Returns
    -------
    DataFrame
        Every input row once, its columns untouched:

        - the input's other columns
        - ``verdict``: ``accepted``, ``duplicate`` or ``rejected``
        - ``reason``: why rejected, or a warning such as a missing MessageId
        - ``dedup_key``
        - ``original_send_time``: for a duplicate, the anchor that caught it
        - ``original_event_id``: the same anchor's

    Raises
    ------
    InputError
        An unknown ``kernel``, a policy that is not one, or an input without the columns
        the rules need (named).

    Warns
    -----
    DedupLibWarning
        With ``kernel="auto"``, once per reason, when the JVM kernel cannot be built or
        loaded and the Python one runs instead.

    Examples
    --------
    A retry within the window, the same id after it, and a send without MessageId:

    >>> from datetime import datetime, timezone
    >>> from dedup_lib import DedupPolicy, detect_duplicates, get_spark
    >>> def at(minute, second=0):
    ...     return datetime(2026, 11, 3, 20, minute, second, tzinfo=timezone.utc)
    >>> sends = get_spark().createDataFrame(
    ...     [(1, "orders", "order-1", at(0)), (2, "orders", "order-1", at(0, 30)),
    ...      (3, "orders", "order-1", at(11)), (4, "orders", None, at(12))],
    ...     "event_id long, entity string, message_id string, send_time timestamp")
    >>> result = detect_duplicates(sends, DedupPolicy("PT10M"))
    >>> result.orderBy("event_id").select("event_id", "verdict", "original_event_id").show()
    +--------+---------+-----------------+
    |event_id|  verdict|original_event_id|
    +--------+---------+-----------------+
    |       1| accepted|             NULL|
    |       2|duplicate|                1|
    |       3| accepted|             NULL|
    |       4| accepted|             NULL|
    +--------+---------+-----------------+
    <BLANKLINE>
    >>> print(result.where("event_id = 4").first().reason)
    no MessageId: the service assigns a unique one, so duplicate detection cannot protect it
    """
    if kernel not in KERNELS:
        raise InputError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
    policy = check_policies(policy if policy is not None else DedupPolicy())
    p = prepare(df, policy)
    ordered, spread, second = _sorted(p)
    returns = originals_type(ordered)
    name = _jvm_function(df.sparkSession, returns, kernel)
    if name is not None:
        window = F.col(WINDOW) if isinstance(p.window, dict) else F.lit(p.window)
        found = F.call_function(
            name,
            spread,
            second,
            F.unix_micros(F.col(p.send_time)),
            F.col("event_id"),
            decided(),
            window.cast("long"),
            F.monotonically_increasing_id(),
        )
        return finish(ordered.withColumn(JUDGED, found), p)

    micros = 0 if isinstance(p.window, dict) else p.window
    has_window = isinstance(p.window, dict)

    def walk(batches: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        return arrow_kernel.find_originals(batches, micros, has_window)

    return finish(judged(ordered, walk, p.arguments(spread, second)), p)


def _sorted(p: Prepared) -> tuple[DataFrame, Column, Column]:
    """The prepared sends shuffled by key and sorted within partitions in replay order, with
    the key's two hashes (the first spreads the keys; the second tells apart keys whose first
    hashes collide)."""
    entity = F.col("entity") if p.has_entity else F.lit(None).cast("string")
    # Eligible sends spread by key; the others (rejected, no MessageId) one by one, so that
    # they never pile up in one partition. It stays an expression, not a column: eight bytes
    # less per row through the shuffle make the replay faster (docs/decisions/replay-kernel.md).
    first, second = _key_hashes(entity, p.key_text())
    spread = F.when(~decided(), first).otherwise(F.col(POS))
    # Sorted by the key's text first: the sorter's prefix is its first 8 bytes, which settle
    # nearly every comparison of random ids (GUIDs), and ids that grow with time (order-123456)
    # arrive nearly in order, so the sort walks runs and reads the rows where they lie, where
    # a hash first reads them in random order (docs/decisions/replay-kernel.md). The sends
    # decided before the pass come
    # after the key's others, so no decided send parts a key's judged sends.
    ordered = p.frame.repartition(spread).sortWithinPartitions(
        p.key,
        decided(),
        *(["entity"] if p.has_entity else []),
        p.send_time,
        F.col("event_id").asc_nulls_last(),
        POS,
    )
    return ordered, spread, second


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
                DedupLibWarning,
                stacklevel=3,
            )
        return None


def _key_hashes(entity: Column, key: Column) -> tuple[Column, Column]:
    """Two independent 64-bit hashes of (entity, key): the first spreads and sorts the sends,
    the pair tells the keys apart in the pass.

    The pass compares hashes, not texts: copying the texts into Python cost 15 % more time.
    The sort orders by the texts, so keys that share a first hash never interleave, and the
    second tells them apart; two keys would have to collide on both (about 1 in 10^25 for
    10 M keys) to be taken for one.
    """
    return F.xxhash64(entity, key), F.xxhash64(F.lit(_SECOND_HASH_SEED), entity, key)
