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

:class:`PlanIntake` does this for each plan the feed stages, and writes the plan's
quarantined rows as the driver's mode does, one Parquet file per plan.
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from dedup_lib.columns import VALID, column
from dedup_lib.live.executors.inbox import WRITE_OPTIONS, write_one_parquet
from dedup_lib.live.executors.processor import stream_columns
from dedup_lib.live.intake.micro_batch import plan_micro_batch, split_columns
from dedup_lib.live.output.sink import part_name
from dedup_lib.telemetry.tally import check_adds_up

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dedup_lib.live.checkpoint import PlanRecord
    from dedup_lib.live.intake.micro_batch import MicroBatchPass
    from dedup_lib.rules.policy import Policies
    from dedup_lib.telemetry.landing import Landing


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
    stream_columns(run.keyed).write.options(**WRITE_OPTIONS).mode("overwrite").parquet(folder)
    counts = run.counts()
    written = run.keyed.frame.sparkSession.read.parquet(folder)
    valid = F.coalesce(column(VALID), F.lit(False))
    held = written.agg(F.count_if(valid).alias("valid"), F.count_if(~valid).alias("refused"))
    (found,) = held.collect()
    written_counts = {**counts, "valid": found["valid"], "quarantined": found["refused"]}
    check_adds_up("the micro-batch written for the executors", written_counts)
    quarantined, sources = split_columns(written.columns, run.order)
    sends = written.where(valid).drop(VALID, *quarantined)
    refused = written.where(~valid).select(
        *(column(source).alias(c) for c, source in sources.items())
    )
    return StagedPass(sends, refused, counts)


class PlanIntake:
    """Each ledger plan's sends for the streaming query (a
    :class:`~dedup_lib.live.executors.plans.PlanFeed`'s ``keyed``): the plan's micro-batch
    pass over its chunks, read from ``landing`` and keyed by ``policy`` and ``content`` as the
    driver's mode keys them, written under ``root`` (:func:`stage_pass`); its quarantined
    rows written as the plan's Parquet file in ``quarantine``, as the driver's mode names it;
    its valid sends returned for the inbox. ``counts`` are the last plan's records by fate,
    ``quarantined`` its quarantined rows (read from the folder written, lazily).

    The pass's folder of a plan stays until the next plan's is written (the inbox reads it
    while it stages the plan); a restart writes a plan's again, whole.
    """

    def __init__(
        self, landing: Landing, policy: Policies, content: list[str], root: str, quarantine: str
    ) -> None:
        self.landing, self.policy, self.content = landing, policy, content
        self.root, self.quarantine = root, quarantine
        self.counts: dict[str, int] = {}
        self.quarantined: DataFrame | None = None

    def __call__(self, recorded: PlanRecord) -> DataFrame:
        """Plan ``recorded``'s valid sends, keyed, as Spark wrote them."""
        batch = recorded.batch
        for number, folder in self._written():
            if number < batch:
                shutil.rmtree(folder, ignore_errors=True)
        run = plan_micro_batch(
            self.landing, recorded.paths, recorded.names, self.policy, self.content, batch
        )
        staged = stage_pass(run, os.path.join(self.root, "read", f"plan-{batch:010d}"))
        if staged.counts["quarantined"]:
            write_quarantine(staged.quarantine, self.quarantine, batch)
        self.counts, self.quarantined = staged.counts, staged.quarantine
        return staged.sends

    def _written(self) -> list[tuple[int, str]]:
        """The passes' folders under ``root``, by plan."""
        found = glob.glob(os.path.join(self.root, "read", "plan-*"))
        return [(int(os.path.basename(f).removeprefix("plan-")), f) for f in found]


def write_quarantine(rows: DataFrame, folder: str, batch: int) -> None:
    """Plan ``batch``'s quarantined ``rows`` as its one Parquet file in ``folder``
    (:func:`~dedup_lib.live.output.sink.part_name`), written by Spark under a hidden name and
    renamed in whole, replacing what a run of the same plan left."""
    work = os.path.join(folder, f".part-{batch:010d}.spark")
    part = write_one_parquet(rows, work)
    os.replace(part, os.path.join(folder, part_name(batch)))
    shutil.rmtree(work, ignore_errors=True)
