"""The monitor's micro-batches with the state on the executors, as ``watch --state executors``
runs them: each :meth:`ExecutorsRunner.step` plans what is new in the landing folder and stages
it for the streaming query (:mod:`~dedup_lib.live.executors.plans`,
:mod:`~dedup_lib.live.executors.staging`); the query judges it in Spark's state store and
writes the verdicts of each of its micro-batches (:mod:`~dedup_lib.live.executors.query`),
after which that micro-batch's line (:class:`~dedup_lib.live.output.lines.BatchLine`) is
counted by Spark from the verdicts written and told.

It has the driver's runner's face (:class:`dedup_lib.live.runner.Runner`: ``step``,
``more``, ``settle``, ``stop``), so the watch's loop runs either.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import functions as F

from dedup_lib.columns import column
from dedup_lib.live.checkpoint import check_settings
from dedup_lib.live.executors.plans import PlanFeed
from dedup_lib.live.executors.query import ExecutorsQuery
from dedup_lib.live.executors.staging import PlanIntake
from dedup_lib.live.output.lines import MINUTE_COLUMNS, BatchLine, StateSize, Tell
from dedup_lib.rules.policy import DUPLICATE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dedup_lib.live.checkpoint import Folders, PlanRecord, Settings
    from dedup_lib.telemetry.landing import Landing


class ExecutorsRunner:
    """Micro-batches of the folder ``landing`` watched with ``settings`` (whose ``state`` is
    ``executors``), written to ``folders``, Spark's query triggered every ``trigger``; the
    state, Spark's, under ``<checkpoint>/executors``."""

    def __init__(
        self,
        spark: SparkSession,
        landing: Landing,
        settings: Settings,
        folders: Folders,
        tell: Tell,
        trigger: str = "1 second",
    ) -> None:
        check_settings(folders.checkpoint, settings)
        self.on_line, self.on_load, on_note = tell
        root = os.path.join(folders.checkpoint, "executors")
        self.query = ExecutorsQuery(
            spark, root, folders.out, settings.lateness, trigger=trigger, on_written=self._told
        )
        self.intake = PlanIntake(
            landing, settings.policy, settings.content, root, folders.quarantine
        )
        self.feed = PlanFeed(
            landing.path, settings.reading, folders, self.query, self.intake, on_note
        )

    @property
    def more(self) -> bool:
        """bool: Whether the ledger left records for the next plan."""
        return self.feed.more

    def step(self) -> PlanRecord | None:
        """Plan what is new and stage it for the query; None when nothing new has landed.

        Raises
        ------
        BaseException
            What stopped the query, if it failed.
        """
        self.query.check()
        recorded = self.feed.step()
        if recorded is not None:
            self.on_load(dict(self.intake.counts))
        return recorded

    def settle(self) -> None:
        """Wait until the query has judged every plan staged, and what their watermark made
        due."""
        self.query.settle()
        self.query.check()

    def stop(self) -> None:
        """Stop the query between two of its micro-batches."""
        self.query.stop()

    def _told(self, batch: int, folder: str) -> None:
        """Micro-batch ``batch``'s line, from its verdicts written in ``folder``; none when it
        answered nothing (a micro-batch whose timers found nothing due)."""
        line = line_of(self.query.spark, batch, folder)
        if line is not None:
            self.on_line(line)


def line_of(spark: SparkSession, batch: int, folder: str) -> BatchLine | None:
    """The line of micro-batch ``batch`` from its verdicts in ``folder``, counted per minute
    of send time by one Spark job; None when it holds none."""
    verdict = column("verdict")
    minutes = (
        spark.read.parquet(folder)
        .groupBy(F.floor(F.unix_micros(column("send_time")) / 60_000_000).alias("minute"))
        .agg(
            F.count(F.lit(1)).alias("sends"),
            F.count_if(verdict == DUPLICATE).alias("duplicates"),
            F.count_if(verdict == "late").alias("late"),
        )
        .orderBy("minute")
        .toPandas()
    )
    if minutes.empty:
        return None
    minutes["minute"] = pd.to_datetime(minutes["minute"] * 60, unit="s", utc=True)
    minutes = minutes.astype({c: "int64" for c in MINUTE_COLUMNS[1:]})[MINUTE_COLUMNS]
    return BatchLine(batch, minutes, state=StateSize(executors=True))
