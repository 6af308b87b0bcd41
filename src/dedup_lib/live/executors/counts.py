"""What the monitor with its state on the executors counts, kept in its checkpoint so that a
restart's counters go on from them and nothing is counted twice (as the driver's mode keeps
:class:`~dedup_lib.live.output.totals.Totals` in each commit).

Three records, each cumulative and numbered, written whole under a hidden name and renamed:

- ``loads/load-N.json``, the loads up to plan ``N`` (rows read, records that are not sends,
  quarantined rows by reason, notes by kind), written before plan ``N`` is staged: a plan
  staged again after a crash writes its record again, from the one before;
- ``verdicts/verdicts-N.json``, the verdicts up to Spark's micro-batch ``N`` (sends by entity
  and verdict, micro-batches, times), written once its verdicts are: a micro-batch Spark runs
  again writes its record again, from the one before;
- ``resent/resent-N.json``, the resend alerts up to the resends' query's micro-batch ``N``
  (:mod:`~dedup_lib.live.executors.resends`), written once they are appended to the alerts.

Each micro-batch's verdicts are counted by one Spark job over the folder it wrote, per minute
of send time, entity and verdict: nothing of the rows comes to the driver.
"""

from __future__ import annotations

import glob
import os
from collections import Counter as Tally
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F

from dedup_lib.columns import column
from dedup_lib.live.durable import read_json, remove, write_json
from dedup_lib.live.executors.query import HELD
from dedup_lib.live.output.lines import MINUTE_COLUMNS, BatchLine, StateSize
from dedup_lib.live.output.totals import Totals, counted_by
from dedup_lib.live.state.alerts import alerts_of
from dedup_lib.rules.policy import DUPLICATE
from dedup_lib.telemetry.quarantine import REASON

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dedup_lib.live.output.labels import EntityLabels

#: The records' kinds, each a folder of the executors' checkpoint: the third, the resend
#: alerts up to the resends' query's micro-batch ``N`` (:mod:`~dedup_lib.live.executors.resends`).
LOADS, VERDICTS, RESENDS = "loads", "verdicts", "resent"


def latest(root: str, kind: str, upto: int | None = None) -> tuple[int, Totals]:
    """The last record of ``kind`` under ``root`` (at most ``upto``), with its number; -1 and
    empty totals when there is none (an empty state: nothing held)."""
    found = [(n, p) for n, p in _records(root, kind) if upto is None or n <= upto]
    if not found:
        return -1, Totals(held=(0, 0))
    number, path = found[-1]
    return number, Totals.from_json(read_json(path))


def record(root: str, kind: str, number: int, counted: Totals) -> Totals:
    """Record ``number`` of ``kind``: the last one before it with ``counted`` added, written
    whole (replacing one a run of the same number left); the totals it holds. Records before
    that last one go: a run of ``number`` again needs only it, and the folder stays as small
    after weeks as after an hour. (The numbers may skip: the resends' query records only the
    micro-batches that found a resend.)"""
    base, totals = latest(root, kind, number - 1)
    totals.add(counted)
    os.makedirs(os.path.join(root, kind), exist_ok=True)
    write_json(os.path.join(root, kind, f"{kind}-{number:010d}.json"), totals.to_json())
    for older, path in _records(root, kind):
        if older < base:
            remove(path)
    return totals


def _records(root: str, kind: str) -> list[tuple[int, str]]:
    """The records of ``kind`` under ``root``, each with its number, in order."""
    return sorted(
        (int(os.path.basename(p).removeprefix(f"{kind}-").removesuffix(".json")), p)
        for p in glob.glob(os.path.join(root, kind, f"{kind}-*.json"))
    )


def held_in(folder: str) -> tuple[int, int] | None:
    """What the state gained by the micro-batch whose verdicts are in ``folder``: anchors and
    sends waiting (its :data:`~dedup_lib.live.executors.query.HELD`); None for a folder
    written before they were counted.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> held_in(folder) is None
    True
    >>> with open(os.path.join(folder, HELD), "w") as held:
    ...     _ = held.write("3 -1\n")
    >>> held_in(folder)
    (3, -1)
    """
    try:
        with open(os.path.join(folder, HELD), encoding="utf-8") as held:
            anchors, waiting = held.read().split()
    except (OSError, ValueError):
        return None
    return int(anchors), int(waiting)


def loads_of(counts: dict[str, int], quarantine: DataFrame, notes: Tally[str]) -> Totals:
    """A plan's loads: its records by fate (``counts``), its quarantined rows by reason
    category (one Spark job, when there are any) and the ``notes`` said since the last plan."""
    refused: Tally[str] = Tally()
    if counts.get("quarantined"):
        category = F.substring_index(F.coalesce(column(REASON), F.lit("")), ":", 1)
        for row in quarantine.groupBy(category.alias("reason")).count().collect():
            refused[row["reason"]] += row["count"]
    return Totals(
        refused=refused, notes=Tally(notes), skipped=counts["skipped"], rows=counts["read"]
    )


def raised(spark: SparkSession, folder: str) -> pa.Table:
    """The alerts of a micro-batch whose alerts' rows are in ``folder``
    (:meth:`~dedup_lib.live.executors.query.ExecutorsQuery.alert_folder`), as the driver's
    monitor raises them (:func:`~dedup_lib.live.state.alerts.alerts_of`): one Spark job; none
    when the micro-batch raised none (no folder)."""
    if not os.path.isdir(folder):
        return alerts_of(pa.table({c: pa.array([], pa.string()) for c in NONE_RAISED}))
    return alerts_of(spark.read.parquet(folder).toArrow())


#: The columns of a micro-batch of verdicts that raised no alert, as :func:`raised` reads it.
NONE_RAISED = ("verdict", "reason", "event_id")


def counted_batch(
    spark: SparkSession,
    batch: int,
    folder: str,
    labels: EntityLabels,
    now: float,
    alerts: pa.Table | None = None,
) -> tuple[BatchLine | None, Totals]:
    """Micro-batch ``batch``'s line (None when it answered nothing) and its totals at ``now``,
    from its verdicts in ``folder``, counted per minute of send time, entity and verdict by
    one Spark job, and its ``alerts`` (:func:`raised`), by entity and kind; with what the
    state gained by it (:func:`held_in`)."""
    verdict = column("verdict")
    counted = (
        spark.read.parquet(folder)
        .groupBy(
            F.floor(F.unix_micros(column("send_time")) / 60_000_000).alias("minute"),
            F.coalesce(column("entity").cast("string"), F.lit("")).alias("entity"),
            verdict.alias("verdict"),
        )
        .count()
        .toPandas()
    )
    sends: Tally[tuple[str, str]] = Tally()
    by_pair = counted.groupby(["entity", "verdict"], as_index=False)["count"].sum()
    for entity, said, n in by_pair.itertuples(index=False):
        sends[(labels.label(str(entity)), str(said or ""))] += int(n)
    judged = not counted.empty
    totals = Totals(
        sends=sends,
        batches=1,
        judged_at=now if judged else None,
        committed_at=now,
        held=held_in(folder),
    )
    if alerts is not None:
        totals.alerts = counted_by(alerts, "kind", labels)
        totals.last_alert = dict.fromkeys(totals.alerts, now)
    if not judged:
        return None, totals
    counted["duplicates"] = counted["count"].where(counted["verdict"] == DUPLICATE, 0)
    counted["late"] = counted["count"].where(counted["verdict"] == "late", 0)
    minutes = counted.groupby("minute", as_index=False)[["count", "duplicates", "late"]].sum()
    minutes = minutes.rename(columns={"count": "sends"}).sort_values("minute")
    minutes["minute"] = pd.to_datetime(minutes["minute"] * 60, unit="s", utc=True)
    minutes = minutes.astype({c: "int64" for c in MINUTE_COLUMNS[1:]})[MINUTE_COLUMNS]
    line = BatchLine(batch, minutes.reset_index(drop=True), state=StateSize(executors=True))
    return (line if alerts is None else line.with_alerts(alerts)), totals
