"""A plan's micro-batch pass written by Spark, for the state on the executors: the driver's
mode brings the pass's rows into the driver as Arrow
(:func:`~dedup_lib.live.intake.micro_batch.load_micro_batch`); here nothing of them does.

One Spark job reads the plan's chunks once and writes every send of them, keyed, with the
stream's columns (:func:`~dedup_lib.live.executors.processor.stream_columns`) and the
quarantine's, to a folder of the checkpoint. The valid sends (what the inbox stages for the
streaming query) and the quarantined rows (in the loader's quarantine columns) are then two
reads of that folder, and a third counts both against what the pass counted: no row is lost
between the chunks and the stream, nor counted twice. A crash while the folder is written
leaves a partial folder, which the plan staged again overwrites.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from dedup_lib.columns import QUARANTINED, VALID, column
from dedup_lib.live.executors.processor import stream_columns
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.quarantine import REASON
from dedup_lib.telemetry.tally import check_adds_up

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dedup_lib.live.intake.micro_batch import MicroBatchPass


@dataclass(frozen=True)
class StagedPass:
    """A plan's pass as Spark wrote it: its valid ``sends`` in the stream's columns, its
    ``quarantine`` in the loader's columns (both read from the written folder, lazily), and
    the records read by fate."""

    sends: DataFrame
    quarantine: DataFrame
    counts: dict[str, int]


def stage_pass(run: MicroBatchPass, folder: str) -> StagedPass:
    """``run`` written to ``folder`` (replacing what is there) by one Spark job, and read
    back as valid sends and quarantined rows, checked against the pass's counts.

    Raises
    ------
    DedupLibError
        When the records the pass counted are not the rows written (the message says which).
    """
    stream_columns(run.keyed).write.mode("overwrite").parquet(folder)
    counts = run.counts()
    written = run.keyed.frame.sparkSession.read.parquet(folder)
    valid = F.coalesce(column(VALID), F.lit(False))
    held = written.agg(F.count_if(valid).alias("valid"), F.count_if(~valid).alias("refused"))
    (found,) = held.collect()
    written_counts = {**counts, "valid": found["valid"], "quarantined": found["refused"]}
    check_adds_up("the micro-batch written for the executors", written_counts)
    quarantined = [c for c in written.columns if c.startswith(QUARANTINED)]
    kept = {c.removeprefix(QUARANTINED): c for c in quarantined}
    sends = written.where(valid).drop(VALID, *quarantined)
    refused = written.where(~valid).select(
        *(column(kept.get(c, c)).alias(c) for c in [*run.order, REASON, SOURCE_FILE])
    )
    return StagedPass(sends, refused, counts)
