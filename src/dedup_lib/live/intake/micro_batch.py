"""One micro-batch's chunks through Spark in one pass: read, judged by the loader's rules,
keyed as the batch replay keys sends (:func:`plan_micro_batch`), and brought into the driver
as Arrow, the quarantined rows beside the valid ones (:func:`load_micro_batch`). Spark reads
and parses each chunk once; what follows (the walk, the verdicts' files) is the driver's.
With the state on the executors, the same pass is written by Spark instead
(:mod:`dedup_lib.live.executors.staging`).

Records that are not sends (other spans of OTLP traces) are counted as they pass and left in
Spark. The counts must add up (:func:`dedup_lib.telemetry.tally.check_adds_up`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Observation, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import PARSED, QUARANTINED, VALID, column
from dedup_lib.errors import printable
from dedup_lib.live.intake.keyed import Keyed, keyed_sends
from dedup_lib.replay.sql_rules import with_batches
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.landing import source_names
from dedup_lib.telemetry.quarantine import REASON
from dedup_lib.telemetry.schema import TEXT_COLUMNS, TIME_COLUMNS
from dedup_lib.telemetry.tally import check_adds_up

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from dedup_lib.rules.policy import Policies
    from dedup_lib.telemetry.landing import Landing
    from dedup_lib.telemetry.loader import OpenedInput

#: Event ids given to the sends of a micro-batch without one: its id times this, plus the
#: send's place in it (by chunk, then as read).
_BATCH_SPAN = 10**12


@dataclass(frozen=True)
class Intake:
    """One micro-batch in the driver: its valid ``sends`` (keyed), its ``quarantine`` (as
    :func:`dedup_lib.load_telemetry` quarantines rows) and its counts."""

    sends: pa.Table
    quarantine: pa.Table
    counts: dict[str, int]


@dataclass(frozen=True)
class MicroBatchPass:
    """A micro-batch's Spark pass, planned and not yet run: every send of its chunks keyed in
    one frame (``keyed``), the valid ones flagged in :data:`VALID` and the refused ones with
    their reason and the columns as read under :data:`QUARANTINED`; the loader's column
    ``order``; what the pass counts as it runs (``seen``), and the folder it reads (``where``,
    for messages)."""

    keyed: Keyed
    order: list[str]
    seen: Observation
    where: str

    def counts(self) -> dict[str, int]:
        """The records the pass read, by fate; an error if they do not add up. Known once
        an action has run the pass."""
        counts = {k: int(v) for k, v in self.seen.get.items()}
        check_adds_up(self.where, counts)
        return counts


def plan_micro_batch(
    landing: Landing,
    paths: list[str],
    names: dict[str, str],
    policy: Policies,
    content: list[str],
    batch: int,
) -> MicroBatchPass:
    """The Spark pass over the chunks at ``paths`` (``names``: each chunk file's name to the
    file the user landed): read, judged by the loader's rules, keyed as the batch replay keys
    sends. Records that are not sends are counted and left out."""
    raw = source_names(landing.read(paths), names)
    opened, frame = landing.with_reasons(raw)
    seen = Observation(f"dedup-watch-{uuid.uuid4().hex}")
    not_send = opened.skipped if opened.skipped is not None else F.lit(False)
    valid = ~not_send & column(REASON).isNull()
    frame = frame.observe(
        seen,
        F.count(F.lit(1)).alias("read"),
        F.count_if(valid).alias("valid"),
        F.count_if(~not_send & ~valid).alias("quarantined"),
        F.count_if(not_send).alias("skipped"),
    )
    rows = _both(opened, frame.where(~not_send), valid)
    if "event_id" not in rows.columns:
        # One partition, named as such: a micro-batch's sends are numbered in one order
        # (without a partition, Spark Connect's client warns on every plan it sends).
        whole = Window.partitionBy(F.lit(0))
        place = F.row_number().over(
            whole.orderBy(column(SOURCE_FILE), F.monotonically_increasing_id())
        )
        rows = rows.withColumn("event_id", F.lit(batch * _BATCH_SPAN) + place)
    rows = with_batches(rows, policy, F.monotonically_increasing_id())
    return MicroBatchPass(
        keyed_sends(rows, policy, content), opened.order, seen, printable(landing.path)
    )


def load_micro_batch(run: MicroBatchPass) -> Intake:
    """The pass ``run`` (:func:`plan_micro_batch`) run, its sends and quarantine brought into
    the driver."""
    table = run.keyed.completed(run.keyed.frame.toArrow())
    return _split(table, run.counts(), run.order)


def _both(opened: OpenedInput, frame: DataFrame, valid: Column) -> DataFrame:
    """Every send of ``frame`` in one row, typed as the loader's valid rows are; where it is
    refused, its reason and the columns whose values typing changed (times, numbers read
    as text) as read, under :data:`QUARANTINED`. (Every column again as read made Spark's
    pass half again as long.)"""
    fields = {f.name: f.dataType for f in frame.schema.fields}

    def typed(name: str) -> Column:
        if name in TIME_COLUMNS:
            return column(PARSED + name)
        if name in TEXT_COLUMNS:
            return column(name).cast("string")
        return column(name)

    changed = [
        c
        for c in opened.order
        if c in TIME_COLUMNS or (c in TEXT_COLUMNS and not isinstance(fields[c], T.StringType))
    ]
    return frame.select(
        *(typed(c).alias(c) for c in opened.order),
        column(SOURCE_FILE),
        valid.alias(VALID),
        *(F.when(~valid, column(c)).alias(QUARANTINED + c) for c in [*changed, REASON]),
    )


def split_columns(columns: list[str], order: list[str]) -> tuple[list[str], dict[str, str]]:
    """Of a pass's ``columns`` (:func:`_both`'s, keyed): those only quarantined rows fill, which
    the valid sends drop; and each column of the quarantine (the loader's ``order``, the
    reason, the file) with the pass's column it is read from: the value as read where typing
    changed it.

    Examples
    --------
    >>> split_columns(["message_id", "send_time", "__dedup_q_send_time"], ["send_time"])[1]
    {'send_time': '__dedup_q_send_time', 'reason': 'reason', 'source_file': 'source_file'}
    """
    quarantined = [c for c in columns if c.startswith(QUARANTINED)]
    kept = {c.removeprefix(QUARANTINED): c for c in quarantined}
    return quarantined, {c: kept.get(c, c) for c in [*order, REASON, SOURCE_FILE]}


def _split(table: pa.Table, counts: dict[str, int], order: list[str]) -> Intake:
    """The valid sends and the quarantined rows (in the loader's quarantine columns), each
    with its own columns; an error if they are not the rows counted."""
    valid = pc.fill_null(table[VALID], False)
    quarantined, sources = split_columns(table.column_names, order)
    sends = table.filter(valid).drop_columns([VALID, *quarantined])
    refused = table.filter(pc.invert(valid))
    refused = pa.table({c: refused[source] for c, source in sources.items()})
    check_adds_up(
        "the micro-batch brought into the driver",
        {**counts, "read": sends.num_rows + refused.num_rows + counts["skipped"]},
    )
    return Intake(sends, refused, counts)
