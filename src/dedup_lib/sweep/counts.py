"""Every send counted, and what the driver derives from the counts: per entity, kind
(judged by the window, no MessageId, rejected) and time bucket; with ground truth the rejected
sends per message; and the sends outside repeated keys, once the repeated ones are in the
driver."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from dedup_lib.analysis.totals import NO_ENTITY
from dedup_lib.columns import REJECTED_ID
from dedup_lib.rules.policy import REJECTED

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


#: A send's kind, by its number in :func:`kind`: judged by the window, accepted unprotected
#: (no MessageId), or rejected.
KINDS = ("eligible", "without_message_id", "rejected")
REJECTED_KIND = KINDS.index("rejected")


def kind(verdict: Column) -> Column:
    """The number of the send's kind in :data:`KINDS`: a byte to group by, not a text
    (grouping by the text is a sixth of the counting pass)."""
    return (
        F.when(verdict == REJECTED, F.lit(REJECTED_KIND))
        .when(verdict.isNull(), F.lit(KINDS.index("eligible")))
        .otherwise(F.lit(KINDS.index("without_message_id")))
        .cast("byte")
    )


def kind_names(counted: pd.DataFrame) -> pd.DataFrame:
    """``counted`` with each kind's number replaced by its name."""
    kinds = counted["kind"].to_numpy(dtype=np.int64)
    return counted.assign(kind=np.asarray(KINDS, dtype=object)[kinds])


def bucket_start(time: Column, bucket_us: int) -> Column:
    return time - F.pmod(time, F.lit(bucket_us))


#: Up to this many messages with a rejected send, the messages' pass counts every send and
#: the driver takes the rejected ones off (:func:`dedup_lib.sweep.truth.less_rejected`);
#: over it, the pass judges.
TAKEN_OFF = 100_000


@dataclass(frozen=True)
class Counts:
    """Every send counted (:func:`counted`): per entity, kind and time bucket (``table``),
    and with ground truth the rejected sends per message (``rejected``: ``entity``,
    ``logical_id``, ``rejected``), exact as Spark holds the ids."""

    table: pd.DataFrame
    rejected: pa.Table | None


def counted(
    df: DataFrame, named: Column, verdict: Column, time: Column, bucket_us: int, truth: bool
) -> Counts:
    """All sends counted per entity, kind (``eligible``, ``without_message_id``, ``rejected``)
    and time bucket, with the resends among them when there is ground truth; the rejected ones
    also per message, which spares the messages' pass the rules."""
    sort = kind(verdict)
    keys = [
        named.alias("entity"),
        sort.alias("kind"),
        bucket_start(time, bucket_us).alias("bucket_us"),
    ]
    if truth:
        keys.append(F.when(sort == REJECTED_KIND, F.col("logical_id")).alias(REJECTED_ID))
    resends = F.count(F.when(F.col("attempt").cast("int") > 1, True)).alias("resends")
    sums = [("sends", "sum"), *([("resends", "sum")] if truth else [])]
    table = df.groupBy(*keys).agg(F.count(F.lit(1)).alias("sends"), *([resends] if truth else []))
    arrow = table.toArrow()
    keyed = ["entity", "kind", "bucket_us"]
    per_bucket = arrow.group_by(keyed, use_threads=False).aggregate(sums)
    counted = per_bucket.select([*keyed, *(f"{n}_sum" for n, _ in sums)])
    counted = kind_names(counted.rename_columns([*keyed, *(n for n, _ in sums)]).to_pandas())
    if not truth:
        return Counts(counted, None)
    rejected = (
        arrow.filter(pc.equal(arrow["kind"], REJECTED_KIND))
        .group_by(["entity", REJECTED_ID], use_threads=False)
        .aggregate([("sends", "sum")])
        .select(["entity", REJECTED_ID, "sends_sum"])
        .rename_columns(["entity", "logical_id", "rejected"])
    )
    return Counts(counted, rejected if rejected.num_rows <= TAKEN_OFF else None)


def entity_codes(entity: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each send's entity as a number into the names returned, a null entity named
    :data:`NO_ENTITY` as Spark's counts name it: the texts hashed once for the tables that
    group by entity, instead of a hash of the text per table."""
    code, names = pd.factorize(entity, use_na_sentinel=False)
    named = np.asarray([NO_ENTITY if pd.isna(n) else n for n in names], dtype=object)
    merged, unique = pd.factorize(named)
    return merged[code].astype(np.int64), np.asarray(unique, dtype=object)


def fixed(
    counted: pd.DataFrame,
    rows: pd.DataFrame,
    entity: np.ndarray,
    entities: np.ndarray,
    bucket_us: int,
    truth: bool,
) -> pd.DataFrame:
    """Sends per entity, kind (``single``, ``without_message_id``, ``rejected``) and time bucket
    outside repeated keys: from ``counted``, the same for all sends, with the repeated ones (whose
    entities are numbered ``entity`` into ``entities``) taken off the eligible (``single``)
    counts."""
    counts = ["sends", "resends"] if truth else ["sends"]
    time = rows["time_us"].to_numpy(dtype=np.int64)
    bucket = time - time % bucket_us
    low = int(bucket.min()) if len(bucket) else 0
    slot = (bucket - low) // bucket_us
    width = int(slot.max()) + 1 if len(slot) else 1
    # One number per (entity, bucket), counted with bincount: a frame of the sends grouped by
    # pandas would first copy the columns into the frame.
    group, pairs = pd.factorize(entity * width + slot)
    resends = (rows["attempt"] > 1).to_numpy(dtype=np.int64) if truth else None
    repeated = pd.DataFrame(
        {
            "entity": entities[pairs // width] if len(pairs) else entities[:0],
            "kind": "eligible",
            "bucket_us": low + (pairs % width) * bucket_us,
            "sends": np.bincount(group, minlength=len(pairs)),
            **(
                {"resends": np.bincount(group, weights=resends, minlength=len(pairs))}
                if resends is not None
                else {}
            ),
        }
    ).astype({name: np.int64 for name in counts})
    keys = ["entity", "kind", "bucket_us"]
    fixed = counted.merge(repeated, on=keys, how="left", suffixes=("", "_repeated"))
    for name in counts:
        fixed[name] = fixed[name] - fixed.pop(f"{name}_repeated").fillna(0).astype("int64")
    fixed = fixed[fixed["sends"] > 0].reset_index(drop=True)
    fixed["kind"] = fixed["kind"].replace("eligible", "single")
    return fixed[[*keys, *counts]]
