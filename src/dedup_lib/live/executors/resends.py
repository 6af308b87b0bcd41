"""The resend alerts with the state on the executors: a second streaming query, beside the
judge's, whose state (the last accepted copy of each content, by entity, for the horizon) is
in Spark's state store too, keyed by the content's two hashes.

The judge's query hands each micro-batch's accepted copies of contents (the sends accepted
with content: only the columns an alert names) to :func:`copies_writer`, which writes them as
one file, ``inbox/batch-N.parquet`` under ``<checkpoint>/executors/resends``, each row with
its micro-batch ``N``. The second query reads the new files at each trigger and pairs them on
the executors (``java/ResendMonitor.java``): a key's copies micro-batch by micro-batch, each in
replay order, against the copy before, as the driver's
:class:`~dedup_lib.live.state.resends.Resends` does. Each of its micro-batches writes the
resends it found as ``found/batch-M/`` (none: no folder), which the monitor makes alerts of
(:func:`found_alerts`), appends to the alerts file once, counts, and removes.

Exactly once, whatever is killed when: the file of a micro-batch of the judge's that Spark
runs again is left as it was written (the same rows: the judge's state is Spark's), and
Spark's file source reads each path once; the second query's own micro-batch run again
writes the same folder again, which the alerts file's record skips. A copy is let go once the
second query's watermark (its copies' latest time less the lateness) passes its horizon's
end: that watermark trails the judge's, which every send accepted later is after. The keys
lie in buckets of the content's first hash, each bucket a map of its keys' copies and one
event-time timer that sweeps it (``ResendMonitor.BUCKETS``): a timer per key cost each copy
more reads and writes of the state store than the copy itself.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import C0, C1, INTERNAL, SEND_MICROS, column
from dedup_lib.live.executors.connect import RESENDS_TYPE, judged_on_server
from dedup_lib.live.executors.inbox import WRITE_OPTIONS
from dedup_lib.live.executors.processor import JAR_PREFIX, SOURCES, STATE_SETTINGS
from dedup_lib.live.executors.query import (
    COPY,
    RunningQuery,
    batch_folders,
    forget_folders,
    query_session,
)
from dedup_lib.live.state.resends import resend_alerts
from dedup_lib.replay.kernels.jvm import jar_name
from dedup_lib.spark import is_connect
from dedup_lib.spark.streaming import start_query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The judge's micro-batch that accepted a copy.
BATCH = INTERNAL + "batch"
#: A copy's columns, as the judge's query writes them: the content's hashes, what an alert
#: names, and the micro-batch.
COPY_COLUMNS = (C0, C1, SEND_MICROS, "event_id", "message_id", "entity", "dedup_key", "send_time")
#: The types of the copies' columns the judge's stream may lack (others: text).
_TYPES = {
    C0: T.LongType(),
    C1: T.LongType(),
    SEND_MICROS: T.LongType(),
    "event_id": T.LongType(),
    "send_time": T.TimestampType(),
}
#: The columns of the copy a resend pairs with, beside the resend's.
ORIGINAL_MICROS, ORIGINAL_MESSAGE_ID = "original_micros", "original_message_id"
#: Where the event time of the second query's watermark is: a copy of the send time, dropped
#: before the pairing (else Spark would drop rows behind the watermark before it).
EVENT_TIME = INTERNAL + "copy_time"


def copies_writer(folder: str) -> Callable[[DataFrame, int], None]:
    """The function that writes a micro-batch's accepted copies of contents (the rows of the
    judge's kept micro-batch whose :data:`~dedup_lib.live.executors.query.COPY` is true) in
    ``folder`` as one file, ``batch-N.parquet``, each row with its micro-batch ``N``; nothing
    when that file is there (the same micro-batch, run again, has the same copies). Written
    under a hidden name and renamed in, with a modification time after the file before it:
    Spark's file source takes files by it.

    It calls nothing of ``dedup_lib``: it runs where the judge's ``foreachBatch`` runs (on
    Spark Connect, the server's Python).
    """
    names, flag, options = list(COPY_COLUMNS), COPY, dict(WRITE_OPTIONS)
    micros, batch_name = SEND_MICROS, BATCH

    def write(answered: DataFrame, batch: int) -> None:
        target = os.path.join(folder, f"batch-{batch:010d}.parquet")
        if os.path.exists(target):
            return
        partial = os.path.join(folder, f".batch-{batch:010d}.part")
        micro_batch = F.lit(batch).cast("long").alias(batch_name)
        time_of = F.unix_micros(F.col("send_time"))
        rows = answered.where(F.col(flag)).withColumn(micros, time_of).select(*names, micro_batch)
        rows.coalesce(1).write.options(**options).mode("overwrite").parquet(partial)
        (part,) = glob.glob(os.path.join(glob.escape(partial), "part-*.parquet"))
        before = [os.path.getmtime(f) for f in glob.glob(os.path.join(folder, "batch-*"))]
        stamp = max([time.time(), *(m + 0.002 for m in before)])
        os.utime(part, (stamp, stamp))
        os.replace(part, target)
        shutil.rmtree(partial, ignore_errors=True)

    return write


def found_writer(folder: str) -> Callable[[DataFrame, int], None]:
    """The second query's ``foreachBatch`` function: micro-batch ``M``'s resends written as
    ``batch-M`` in ``folder``, under a hidden
    name and renamed over any an earlier run of it left; no folder when it found none. Calls
    nothing of ``dedup_lib`` (it runs on a Connect server)."""

    def write(found: DataFrame, batch: int) -> None:
        target = os.path.join(folder, f"batch-{batch:010d}")
        partial = os.path.join(folder, f".batch-{batch:010d}.part")
        if type(found).__module__.startswith("pyspark.sql.connect"):
            from pyspark.sql.connect.observation import Observation as OnServer

            observed: Any = OnServer(f"dedup-resends-{batch}")
        else:
            from pyspark.sql.observation import Observation

            observed = Observation(f"dedup-resends-{batch}")
        counted = found.observe(observed, F.count(F.lit(1)).alias("rows"))
        counted.coalesce(1).write.mode("overwrite").parquet(partial)
        shutil.rmtree(target, ignore_errors=True)
        if observed.get["rows"]:
            os.replace(partial, target)
        else:
            shutil.rmtree(partial, ignore_errors=True)

    return write


def paired(copies: DataFrame, horizon: timedelta, lateness: timedelta) -> DataFrame:
    """The resends among ``copies`` (a stream of :data:`COPY_COLUMNS` and :data:`BATCH`),
    paired on the executors within ``horizon``, each with :data:`ORIGINAL_MICROS`,
    ``original_event_id`` and :data:`ORIGINAL_MESSAGE_ID` of the copy before it; its
    watermark ``lateness`` behind the latest copy. The judge's jar must be loaded
    (:func:`~dedup_lib.live.executors.processor.load`)."""
    spark = copies.sparkSession
    delay = f"{lateness // timedelta(milliseconds=1)} milliseconds"
    watermarked = (
        copies.withColumn(EVENT_TIME, F.timestamp_micros(column(SEND_MICROS)))
        .withWatermark(EVENT_TIME, delay)
        .drop(EVENT_TIME)
    )
    names = (C0, C1, SEND_MICROS, "event_id", "message_id", BATCH)
    micros = horizon // timedelta(microseconds=1)
    if is_connect(spark):
        jar = jar_name(SOURCES, JAR_PREFIX)
        return judged_on_server(watermarked, names, micros, jar, RESENDS_TYPE)
    jvm: Any = spark._jvm
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
    from pyspark.sql import DataFrame

    return DataFrame(jvm.dedup_lib.ResendMonitor.apply(watermarked._jdf, *names, micros), spark)


def found_alerts(spark: SparkSession, folder: str) -> pa.Table:
    """The resend alerts of the resends a micro-batch of the second query wrote in
    ``folder`` (:func:`found_writer`): one Spark job."""
    found = spark.read.parquet(folder).toArrow()
    originals = (ORIGINAL_MICROS, "original_event_id", ORIGINAL_MESSAGE_ID)
    return resend_alerts(found.drop_columns(list(originals)), *(found[c] for c in originals))


class ResendsQuery(RunningQuery):
    """The second streaming query under ``root`` (the executors' folder of the checkpoint):
    the copies the judge's query writes in :attr:`inbox` paired within ``horizon``, the
    resends written in :attr:`found`. Started at once (its input's columns are known), in a
    session of its own with ``settings`` over the state store's; the copies' ``schema`` is
    the judge's stream's for the columns it takes."""

    def __init__(
        self,
        spark: SparkSession,
        root: str,
        schema: T.StructType,
        horizon: timedelta,
        lateness: timedelta,
        *,
        trigger: str = "1 second",
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.spark = spark
        self.folder = os.path.join(root, "resends")
        self.inbox = os.path.join(self.folder, "inbox")
        self.found = os.path.join(self.folder, "found")
        for made in (self.inbox, self.found):
            os.makedirs(made, exist_ok=True)
        types = {c: schema[c].dataType for c in COPY_COLUMNS if c in schema.names}
        fields = [
            T.StructField(c, types.get(c, _TYPES.get(c, T.StringType()))) for c in COPY_COLUMNS
        ]
        fields.append(T.StructField(BATCH, T.LongType()))
        self.session = session = query_session(spark, {**STATE_SETTINGS, **(settings or {})})
        try:  # no runner holds this query yet to stop it and release its session
            # Each file read is deleted once its micro-batch is committed: the inbox stays small.
            copies = (
                session.readStream.schema(T.StructType(fields))
                .option("cleanSource", "delete")
                .parquet(self.inbox)
            )
            self.query = start_query(
                paired(copies, horizon, lateness)
                .writeStream.outputMode("append")
                .foreachBatch(found_writer(self.found))
                .option("checkpointLocation", os.path.join(self.folder, "spark"))
                .trigger(processingTime=trigger)
                .queryName(f"dedup-resends-{os.path.basename(os.path.dirname(root)) or 'state'}")
            )
        except BaseException:
            self.release()
            raise

    def writer(self) -> Callable[[DataFrame, int], None]:
        """What the judge's query hands its micro-batches' copies to (:func:`copies_writer`)."""
        return copies_writer(self.inbox)

    def written(self) -> list[tuple[int, str]]:
        """The micro-batches whose resends are written, each with its folder, oldest first."""
        return batch_folders(self.found)

    def forget(self, upto: int) -> None:
        """The resends of the micro-batches up to ``upto`` gone, once appended and counted."""
        forget_folders(self.found, upto)
