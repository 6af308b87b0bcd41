"""How much of the driver's memory a :class:`~dedup_lib.sweep.cache.ReplayCache` would take,
known before anything is brought to it, and a refusal that says what to narrow when it would
not fit.

The cache holds in the driver every send of a key sent more than once, and with ground truth
one row per message sent several times. Their number depends on the data, not on its size:
when even every send would fit (:func:`at_most`) nothing is counted; otherwise those rows are
computed and stored where Spark runs, and counted there before any is collected
(:func:`stored`). A sample of the input, as the driver would hold it, gives the bytes per
row. Two limits apply: Spark's ``spark.driver.maxResultSize`` (what one collect may bring
back, serialized) and the memory this machine has available for the Python process. Should
the bytes per row be off, Spark's own limit stops the collect, and that failure gets the
same refusal.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import functions as F

from dedup_lib.analysis.totals import NO_ENTITY
from dedup_lib.errors import InputError, printable
from dedup_lib.memory import available_memory, size_in_bytes
from dedup_lib.spark import spark_errors

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

#: Spark's default for ``spark.driver.maxResultSize``.
_DEFAULT_RESULT_SIZE = "1g"
#: The driver holds a table about twice while converting and ordering it.
_PEAK_COPIES = 2
#: The share of the memory available now that the cache may take: the notebook, the page's
#: charts and the JVM driver share the rest.
_AVAILABLE_SHARE = 0.6
#: :func:`at_least` counts every send of one key in this many, and one send in as many
#: (a power of two).
SAMPLED_KEYS = 1024
#: Standard errors below the sample's estimate that :func:`at_least` takes as its bound.
_MARGIN = 5


@dataclass(frozen=True)
class Footprint:
    """What the cache would hold: ``rows`` (sends of repeated keys, per entity in
    ``by_entity``), ``messages`` (messages sent several times, with ground truth), their
    serialized size as Spark returns them (``result_bytes``, the larger of the two collects)
    and their size in the driver (``driver_bytes``, at the peak of the build); the input's
    first and last send time (UTC). ``estimated``: a lower bound from samples of keys and
    sends (:func:`at_least`), not a count."""

    rows: int
    messages: int
    by_entity: dict[str, int]
    result_bytes: int
    driver_bytes: int
    first: dt.datetime | None
    last: dt.datetime | None
    estimated: bool = False


@dataclass(frozen=True)
class Budget:
    """What this session lets the driver take: ``result_bytes`` per collect (None: no
    limit) and ``driver_bytes`` of memory (None: unknown), with where each comes from."""

    result_bytes: int | None
    result_source: str
    driver_bytes: int | None
    driver_source: str


def readable(size: float) -> str:
    """``size`` bytes in GiB, or in MiB below one GiB."""
    if size >= 2**30:
        return f"{size / 2**30:.1f} GiB"
    return f"{size / 2**20:.1f} MiB"


def budget(spark: SparkSession) -> Budget:
    """The limits of ``spark``'s driver and of this machine, now."""
    try:
        setting = spark.conf.get("spark.driver.maxResultSize", _DEFAULT_RESULT_SIZE)
    except spark_errors():
        setting = _DEFAULT_RESULT_SIZE
    limit = size_in_bytes(setting or _DEFAULT_RESULT_SIZE)
    result = (limit or None, f"spark.driver.maxResultSize={setting}")
    available = available_memory()
    share = None if available is None else int(available * _AVAILABLE_SHARE)
    where = "unknown" if available is None else f"{readable(available)} available on this machine"
    return Budget(*result, share, where)


def _driver_size(table: pa.Table) -> int:
    """Bytes ``table`` takes as pandas: 8 per value, plus each distinct Python object once
    (pyarrow shares equal strings)."""
    frame = table.to_pandas()
    size = 8 * int(frame.size)
    for name in frame.columns:
        if frame[name].dtype == object:
            distinct = {id(v): v for v in frame[name]}
            size += sum(sys.getsizeof(v) for v in distinct.values())
    return size


@dataclass(frozen=True)
class RowSize:
    """Bytes per row the cache would hold: ``serialized`` as Spark returns it, ``held`` in
    the driver."""

    serialized: float
    held: float


def per_row(sample: pa.Table, repeated: Sequence[str], truth: bool) -> RowSize:
    """Bytes per repeated send, serialized and in the driver, from ``sample`` (rows judged
    as the cache judges them, :func:`dedup_lib.sweep.collected.judged_sends`): its rows with a key,
    as the cache keeps them, plus the rank Spark returns and the two columns the driver adds."""
    eligible = sample.filter(pc.is_valid(sample["key"])).select(list(repeated))
    rows = max(eligible.num_rows, 1)
    added = 4 + 2 * 8
    serialized = eligible.nbytes / rows + 4
    held = _driver_size(eligible) / rows + added
    if truth:
        # A message row: entity, a flag, the id and three counts.
        ids = sample["logical_id"]
        id_bytes = ids.nbytes / max(len(ids), 1)
        serialized = max(serialized, 8 + 1 + id_bytes + 24)
    return RowSize(serialized, held)


def persist_and_count(
    repeated: DataFrame,
    messages: DataFrame | None,
    counted: pd.DataFrame,
    size: RowSize,
    bucket_us: int,
) -> Footprint:
    """The footprint of the rows the driver would hold, counted where Spark runs before any
    is brought back: ``repeated`` (:func:`~dedup_lib.sweep.spark_road._repeated_sends`) per
    entity, and with ground truth the ``messages`` sent several times
    (:func:`~dedup_lib.sweep.spark_road._message_groups`), both persisted here (memory, then
    disk) as they are counted, for the build to collect them next and then :func:`release`
    them. ``counted``: the build's counts of every send (``bucket_us`` wide), whose buckets
    give the time span.

    Knowing their number so costs one small job over the stored rows, not a pass of its own
    over the input, where an exact count in a separate pass takes a third of the build.
    Persisted, not checkpointed: a local checkpoint's blocks
    outlive the build (until the JVM collects them), taking memory from the user's own
    persisted frames."""
    named = F.coalesce(F.col("entity"), F.lit(NO_ENTITY)).alias("entity")
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="dedup-footprint") as pool:
        held = pool.submit(repeated.persist(StorageLevel.MEMORY_AND_DISK).groupBy(named).count)
        several = (
            pool.submit(messages.persist(StorageLevel.MEMORY_AND_DISK).where("several").count)
            if messages is not None
            else None
        )
        per_entity = {r["entity"]: int(r["count"]) for r in held.result().collect()}
        messages_several = several.result() if several is not None else 0
    span = _span(counted, bucket_us)
    return _sized(
        sum(per_entity.values()), messages_several, _largest_first(per_entity), size, *span
    )


def _span(counted: pd.DataFrame, bucket_us: int) -> tuple[dt.datetime | None, dt.datetime | None]:
    """The first and last send time in ``counted``'s buckets (``bucket_us`` wide)."""
    starts = counted["bucket_us"].dropna()
    if not len(starts):
        return None, None
    return _utc(int(starts.min())), _utc(int(starts.max()) + bucket_us - 1)


def bounded(
    sends: DataFrame,
    counted: pd.DataFrame,
    size: RowSize,
    bucket_us: int,
    allowed: Budget,
    *,
    truth: bool,
) -> tuple[Footprint, bool]:
    """A bound on what the driver would hold, from the build's counts of every send
    (``counted``), and whether the rows must be stored and counted (:func:`stored`) before
    they are collected. Refused here, in the time of a scan, where samples of ``sends``
    (:func:`at_least`) say they cannot fit."""
    eligible = int(counted.loc[counted["kind"] == "eligible", "sends"].sum())
    needed = at_most(eligible, int(counted["sends"].sum()), truth, size)
    if not over(needed, allowed):
        return needed, False
    if may_refuse(eligible, size, allowed):
        refuse_over(at_least(sends, eligible, counted, size, bucket_us), allowed)
    return needed, True


def may_refuse(eligible: int, size: RowSize, allowed: Budget) -> bool:
    """Whether any input with ``eligible`` sends judged by the window could be refused: only
    then is :func:`at_least` worth its pass."""
    return bool(over(_sized(eligible, 0, {}, size), allowed))


def at_least(
    sends: DataFrame, eligible: int, counted: pd.DataFrame, size: RowSize, bucket_us: int
) -> Footprint:
    """A lower bound on the footprint from samples of ``sends`` (``entity``, ``key``, null
    where no window judges the send, and ``pos``, its place) taken in one scan and counted
    per key where Spark runs: a shuffle of three sends in a thousand, where gathering every
    repeated key shuffles them all (:func:`from_samples`); never more than the ``eligible``
    sends. Messages are not sampled (at least none)."""
    one_in = SAMPLED_KEYS
    bits = one_in.bit_length() - 1
    if one_in != 1 << bits:
        raise ValueError(f"SAMPLED_KEYS must be a power of two, not {one_in}")
    drawn = F.xxhash64("pos")
    chosen = {
        "keyed": F.xxhash64("entity", "key").bitwiseAND(one_in - 1) == 0,
        "first": drawn.bitwiseAND(one_in - 1) == 0,
        "second": F.shiftright(drawn, bits).bitwiseAND(one_in - 1) == 0,
    }
    any_chosen = chosen["keyed"] | chosen["first"] | chosen["second"]
    per_key = (
        sends.where(F.col("key").isNotNull() & any_chosen)
        .groupBy("entity", "key")
        .agg(*(F.count(F.when(c, True)).alias(name) for name, c in chosen.items()))
        .toArrow()
    )
    counts = [per_key[name].to_numpy() for name in chosen]
    rows, per_sampled_key = from_samples(counts[0], counts[1], counts[2], one_in)
    names = per_key["entity"].to_numpy(zero_copy_only=False)
    repeating = per_sampled_key > 0
    per_entity = _per_name(names[repeating], per_sampled_key[repeating])
    found = _sized(min(rows, eligible), 0, per_entity, size, *_span(counted, bucket_us))
    return dataclasses.replace(found, estimated=True)


def from_samples(
    keyed: np.ndarray, first: np.ndarray, second: np.ndarray, one_in: int
) -> tuple[int, np.ndarray]:
    """A bound below the sends of keys sent more than once, and each sampled key's share
    of the estimate it is taken from, from three independent samples counted per key:
    ``keyed``, every send of one key in ``one_in`` (0 for the keys not drawn); ``first`` and
    ``second``, one send in ``one_in``, drawn twice.

    A key that ``first`` draws twice is certainly repeated, and usually sent thousands of
    times: its sends are estimated from ``second`` (independent of the choice, so
    unbiased). Every other key is estimated from ``keyed``, exact for the keys sent a few
    times that make up most of the rest. The estimate less :data:`_MARGIN` standard errors
    (estimated from the same samples: one large key drawn widens the margin rather than
    inflating the bound)."""
    scale, share = float(one_in), 1.0 / one_in
    heavy = first >= 2
    light = ~heavy & (keyed >= 2)
    estimate = np.where(heavy, second * scale, 0.0) + np.where(light, keyed * scale, 0.0)
    drawn = float(second[heavy].sum()) * (1 - share) * scale**2
    exact = (scale - 1) * scale * float(np.square(keyed[light].astype(np.float64)).sum())
    variance = drawn + exact
    bound = float(estimate.sum()) - _MARGIN * math.sqrt(variance)
    return max(int(bound), 0), estimate.astype(np.int64)


def _per_name(names: np.ndarray, values: np.ndarray) -> dict[str, int]:
    """``values`` summed per name, the largest first."""
    totals: dict[str, int] = {}
    for name, value in zip(names.tolist(), values.tolist(), strict=True):
        totals[name] = totals.get(name, 0) + int(value)
    return _largest_first(totals)


def _largest_first(per_entity: dict[str, int]) -> dict[str, int]:
    """``per_entity`` ordered as a refusal lists it: the largest first, then by name."""
    return dict(sorted(per_entity.items(), key=lambda kv: (-kv[1], kv[0])))


def release(*frames: DataFrame | None) -> None:
    """The rows :func:`stored` persisted, let go."""
    for frame in frames:
        if frame is not None:
            frame.unpersist()


def at_most(eligible: int, sends: int, truth: bool, size: RowSize) -> Footprint:
    """A bound on the footprint from counts the build takes anyway: every ``eligible`` send
    repeated, and with ground truth every two of the ``sends`` one message. When it fits,
    nothing needs counting exactly."""
    return _sized(eligible, sends // 2 if truth else 0, {}, size)


def _sized(
    rows: int,
    messages: int,
    by_entity: dict[str, int],
    size: RowSize,
    first: dt.datetime | None = None,
    last: dt.datetime | None = None,
) -> Footprint:
    return Footprint(
        rows=rows,
        messages=messages,
        by_entity=by_entity,
        result_bytes=int(max(rows, messages) * size.serialized),
        driver_bytes=int(_PEAK_COPIES * (rows + messages) * size.held),
        first=first,
        last=last,
    )


def too_large(exc: BaseException, found: Footprint, allowed: Budget) -> InputError | None:
    """The refusal, for Spark's own failure to return a result over
    ``spark.driver.maxResultSize``: the bytes per row come from a sample, and may be off."""
    if "maxResultSize" not in str(exc):
        return None
    return refusal(
        found,
        [
            f"Spark could not return it within {allowed.result_source} (estimated: about "
            f"{readable(found.result_bytes)})"
        ],
    )


def _utc(micros: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)


def over(footprint: Footprint, allowed: Budget) -> list[str]:
    """What ``footprint`` would exceed of ``allowed``, in words; empty when it fits."""
    found = []
    if allowed.result_bytes is not None and footprint.result_bytes > allowed.result_bytes:
        found.append(
            f"Spark would return about {readable(footprint.result_bytes)} in one result, over "
            f"{allowed.result_source}"
        )
    if allowed.driver_bytes is not None and footprint.driver_bytes > allowed.driver_bytes:
        found.append(
            f"the driver would hold about {readable(footprint.driver_bytes)}, with "
            f"{allowed.driver_source}"
        )
    return found


def refuse_over(footprint: Footprint, allowed: Budget) -> None:
    """The :func:`refusal` when ``footprint`` exceeds ``allowed``."""
    too_much = over(footprint, allowed)
    if too_much:
        raise refusal(footprint, too_much)


def refusal(footprint: Footprint, over: list[str]) -> InputError:
    """The error that says what the build would need, which entities hold most of it, and
    what to narrow."""
    top = list(footprint.by_entity.items())[:4]
    entities = ", ".join(f"{printable(name)} {count:,}" for name, count in top)
    more = " and others" if len(footprint.by_entity) > len(top) else ""
    estimated = ", estimated" if footprint.estimated else ""
    listed = f" (sends in repeated keys{estimated}: {entities}{more})" if top else ""
    span = ""
    if footprint.first is not None and footprint.last is not None:
        span = (
            f" (the sends span {footprint.first:%Y-%m-%d %H:%M} to "
            f"{footprint.last:%Y-%m-%d %H:%M} UTC)"
        )
    messages = (
        f" and {footprint.messages:,} messages sent several times" if footprint.messages else ""
    )
    rows = f"{footprint.rows:,} sends in keys sent more than once"
    if footprint.estimated:
        rows = (
            f"at least {rows} (a bound from samples of one key and one send in "
            f"{SAMPLED_KEYS:,}, taken before gathering any)"
        )
    return InputError(
        f"ReplayCache.build: too large for the driver: {rows}{messages}; "
        f"{'; and '.join(over)}. Narrow the input before "
        f"building: one entity{listed}, or a time range"
        f"{span}, e.g. df.where(F.col('entity') == '...') or "
        "df.where(F.col('send_time').between(start, end)). Or give the driver more room: "
        "spark.driver.maxResultSize and DEDUP_DRIVER_MEMORY (its JVM heap) on a machine "
        "that has the memory."
    )
