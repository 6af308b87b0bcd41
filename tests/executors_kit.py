"""The live monitor's state on the executors, run as the tests need it: sends keyed as a plan's
are, staged plan by plan into a streaming query, its verdicts read back and lined up with the
batch replay's (:func:`dedup_lib.detect_duplicates`)."""

from __future__ import annotations

import glob
import os
from datetime import timedelta
from typing import Any

from pyspark.sql import functions as F

from dedup_lib import detect_duplicates
from dedup_lib.live.executors.processor import TRACK_ROWS, stream_columns
from dedup_lib.live.executors.query import ExecutorsQuery
from dedup_lib.live.intake.keyed import keyed_sends
from dedup_lib.replay.sql_rules import with_batches

#: What is compared of each send's answer.
ANSWER = ("event_id", "verdict", "original_event_id", "original_send_time")


def keyed(sends: Any, policy: Any) -> Any:
    """``sends`` (loaded, with ``event_id``) keyed as a plan's sends are for the stream."""
    rows = with_batches(sends, policy, F.monotonically_increasing_id())
    return stream_columns(keyed_sends(rows, policy, []))


def start(spark: Any, root: str, lateness: timedelta) -> ExecutorsQuery:
    """A query over the plans staged in ``root``, verdicts in ``root/out``: one state
    partition and a short trigger, test-sized; the state store counts its rows, which the
    tests of anchors let go read (the monitor leaves the count off: a read per write)."""
    return ExecutorsQuery(
        spark,
        os.path.join(root, "executors"),
        os.path.join(root, "out"),
        lateness,
        trigger="200 milliseconds",
        partitions=1,
        settings={TRACK_ROWS: "true"},
    )


def run(query: ExecutorsQuery, plans: list[Any], policy: Any, first: int = 0) -> None:
    """Each of ``plans`` (DataFrames of sends) staged as a plan, the query settled after each."""
    for number, plan in enumerate(plans, start=first):
        query.feed(number, keyed(plan, policy))
        query.settle()


def verdicts(spark: Any, root: str) -> list[Any]:
    """Every verdict row the query wrote, each micro-batch's folder once."""
    folders = sorted(glob.glob(os.path.join(root, "out", "batch-*")))
    if not folders:
        return []
    return spark.read.parquet(*folders).collect()


def stored(spark: Any, checkpoint: str, batch: int | None = None) -> tuple[int, int]:
    """The anchors and waiting sends in the judge's state store of the query whose Spark
    checkpoint is ``checkpoint``, after micro-batch ``batch`` (default its last), read by
    Spark's state reader: the ``held`` values with an anchor, the ``pending`` lists' sends."""
    state = spark.read.format("statestore")
    if batch is not None:
        state = state.option("batchId", batch)
    held = state.option("stateVarName", "held").load(checkpoint)
    pending = state.option("stateVarName", "pending").load(checkpoint)
    return held.where("value.micros is not null").count(), pending.count()


def answers(rows: list[Any]) -> dict[Any, tuple[Any, ...]]:
    """Each send's answer by its event id; an error if one is answered twice."""
    found: dict[Any, tuple[Any, ...]] = {}
    for row in rows:
        assert row["event_id"] not in found, f"answered twice: {row['event_id']}"
        found[row["event_id"]] = tuple(row[c] for c in ANSWER)
    return found


def replayed(sends: Any, policy: Any) -> dict[Any, tuple[Any, ...]]:
    """The batch replay's answer for each of ``sends``, by event id."""
    return answers(detect_duplicates(sends, policy).select(*ANSWER).collect())
