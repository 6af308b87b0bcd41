"""The monitor's one long-running streaming query with its state on the executors: the staged
plans (:mod:`~dedup_lib.live.executors.inbox`) read one file per micro-batch, judged by the
processor (:mod:`~dedup_lib.live.executors.processor`) in Spark's RocksDB state store, and each
micro-batch's verdicts written by ``foreachBatch`` as ``batch-N/`` (Spark's batch id) in the
verdicts folder: written under a hidden name and renamed over any a run of the same
micro-batch left, so a micro-batch Spark runs again replaces its verdicts, never adds them
twice.

Nothing on the driver holds the keys: Spark's driver plans each micro-batch and the
executors hold and judge the state. The query runs in a session of its own (sharing the
Spark context), whose settings are :data:`~dedup_lib.live.executors.processor.STATE_SETTINGS`;
Spark keeps its own checkpoint (offsets, commits, state) in ``spark/`` beside the inbox.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import import_module
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import functions as F

from dedup_lib.columns import C0, C1, INTERNAL, KEYED_CONTENT, ORIGINAL_CONTENT, column
from dedup_lib.live.executors.inbox import WRITE_OPTIONS, Inbox
from dedup_lib.live.executors.processor import (
    HELD_CHANGE,
    MISSED_MS,
    ORIGINAL_CONTENT_OUT,
    ORIGINAL_MICROS,
    STATE_SETTINGS,
    TALLY,
    WAITING_CHANGE,
    judged,
    load,
)
from dedup_lib.live.state.alerts import USED
from dedup_lib.rules.policy import ACCEPTED, DUPLICATE, REJECTED
from dedup_lib.spark import LOCAL_DEFAULTS, is_connect
from dedup_lib.spark.connect import client_settings
from dedup_lib.spark.streaming import release_session, start_query, wait_for_micro_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


#: The file in a micro-batch's folder of verdicts that holds the seconds it took to judge and
#: write them.
SECONDS = "_seconds"
#: The file beside it that holds what the state gained by the micro-batch: anchors and sends
#: waiting, two integers (the sums of the judge's :data:`HELD_CHANGE` and
#: :data:`WAITING_CHANGE`).
HELD = "_held"
#: Whether a judged send raises an alert; with the send's content and its original's, the
#: columns the stream carries beside the verdicts and writes only with the alerts' rows.
ALERT = INTERNAL + "alert"
#: Whether a judged send is an accepted copy of a content: what the resends are paired from
#: (:mod:`~dedup_lib.live.executors.resends`), with the content's two hashes.
COPY = INTERNAL + "copy"
HIDDEN = (ORIGINAL_CONTENT, KEYED_CONTENT, ALERT, COPY, C0, C1, HELD_CHANGE, WAITING_CHANGE, TALLY)


#: The bytes of a RocksDB state store's files, among the custom metrics of Spark's progress.
SST_BYTES = "rocksdbSstFileSize"

#: The settings of the monitor's session its query's session takes over: the SQL ones that
#: :func:`dedup_lib.get_spark` sets.
SESSION_SQL = tuple(client_settings(LOCAL_DEFAULTS))


def verdict_folder(out: str, batch: int) -> str:
    """Where Spark's micro-batch ``batch`` writes its verdicts in ``out``.

    Examples
    --------
    >>> verdict_folder("verdicts", 12)
    'verdicts/batch-0000000012'
    """
    return os.path.join(out, f"batch-{batch:010d}")


def batch_folders(folder: str) -> list[tuple[int, str]]:
    """The micro-batches' folders in ``folder`` (:func:`verdict_folder`), each with its
    micro-batch, in order; hidden ones (being written) left out."""
    found = glob.glob(os.path.join(glob.escape(folder), "batch-*"))
    return sorted((int(os.path.basename(f).removeprefix("batch-")), f) for f in found)


def forget_folders(folder: str, upto: int) -> None:
    """The micro-batches' folders in ``folder`` up to ``upto`` removed, once counted."""
    for batch, found in batch_folders(folder):
        if batch <= upto:
            shutil.rmtree(found, ignore_errors=True)


def written_since(out: str, after: int) -> list[tuple[int, str, float]]:
    """The micro-batches after ``after`` whose verdicts are written in ``out``, each with its
    folder and the seconds it took (its :data:`SECONDS`), oldest first. Spark numbers its
    micro-batches one after another and writes each folder whole before the next starts, so
    they are looked for from ``after + 1`` on, up to the first not there: a look costs the
    new micro-batches, not the weeks of folders before them.

    Examples
    --------
    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> for batch in (0, 1, 2):
    ...     os.makedirs(verdict_folder(out, batch))
    >>> [batch for batch, _, _ in written_since(out, 0)]
    [1, 2]
    """
    found = []
    batch = after + 1
    while os.path.isdir(folder := verdict_folder(out, batch)):
        try:
            with open(os.path.join(folder, SECONDS), encoding="utf-8") as took:
                seconds = float(took.read())
        except (OSError, ValueError):
            seconds = 0.0  # written by a version that did not record it
        found.append((batch, folder, seconds))
        batch += 1
    return found


def verdict_columns(answered: DataFrame, content: str | None = None) -> DataFrame:
    """The judged rows as the driver's monitor writes verdicts (the sends' columns without
    the monitor's own, ``original_send_time``, ``original_event_id``, ``missed_watermark``),
    then the hidden columns of :data:`HIDDEN`, for the alerts: the send's content (its column
    ``content``; none without one), its original's, and whether it raises an alert, as the
    driver's monitor raises them (:func:`dedup_lib.live.state.alerts.alerts_of`): a rejected
    send, or a duplicate whose content is not its original's (a collision); and, with the
    content's hashes (:data:`COPY`), whether it is an accepted copy of its content; and what
    the state gained (:data:`HELD_CHANGE`, :data:`WAITING_CHANGE`), with the tally rows that
    hold no send (:data:`TALLY`), which the writer counts and leaves out."""
    answers = (ORIGINAL_MICROS, "original_event_id", MISSED_MS, ORIGINAL_CONTENT_OUT)
    carried = [c for c in answered.columns if not c.startswith(INTERNAL) and c not in answers]
    verdict, original = column("verdict"), column(ORIGINAL_CONTENT_OUT)
    hidden = [original.alias(ORIGINAL_CONTENT), *map(column, (HELD_CHANGE, WAITING_CHANGE, TALLY))]
    collided, copy = F.lit(False), F.lit(False)
    if content is not None:
        mine = column(content)
        hidden.append(mine.alias(KEYED_CONTENT))
        collided = (verdict == DUPLICATE) & ~mine.eqNullSafe(original)
    if content is not None and C0 in answered.columns:
        hidden += [column(C0), column(C1)]
        copy = (verdict == ACCEPTED) & column(C0).isNotNull()
    return answered.select(
        *(column(c) for c in carried),
        F.timestamp_micros(column(ORIGINAL_MICROS)).alias("original_send_time"),
        column("original_event_id"),
        F.timestamp_millis(column(MISSED_MS)).alias("missed_watermark"),
        *hidden,
        F.coalesce((verdict == REJECTED) | collided, F.lit(False)).alias(ALERT),
        F.coalesce(copy, F.lit(False)).alias(COPY),
    )


def verdicts_writer(
    out: str,
    told: Callable[[int, str, float], None] | None = None,
    alerts: str | None = None,
    kept: Sequence[str] = (),
    copies: Callable[[DataFrame, int], None] | None = None,
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function that writes micro-batch ``N``'s verdicts
    (:func:`verdict_columns`, without :data:`HIDDEN`) as :func:`verdict_folder` ``(out,
    N)``, replacing any an earlier run of it wrote, then tells ``told`` the micro-batch, its
    folder and the seconds it took. With ``alerts``, the rows that raise an alert are written
    alike in ``alerts``, in their ``kept`` columns, before the verdicts are renamed in (none:
    no folder): the micro-batch is kept on the executors (in memory, else on their disks)
    for the two writes, so that it is judged once and none of its rows comes to the driver
    (a reused id can raise a hundred thousand collisions in a micro-batch); the alerts are
    counted, one number, while the verdicts are written. With ``copies`` (a function that
    takes the kept micro-batch and its id), the accepted copies of contents are counted alike
    and, when there are any, handed to it before the verdicts are renamed in. The seconds are
    also written in the verdicts' folder, as the text of :data:`SECONDS` (a name Parquet
    readers skip), for a monitor that is not told (:meth:`ExecutorsQuery.written`); and what
    the state gained, as :data:`HELD`, summed while the verdicts are written, from their rows
    and the tally rows, which are not written.

    It calls nothing of ``dedup_lib``: on Spark Connect the server runs it, in a Python that
    may not have the library, and it travels pickled by value (``told`` must be None there).
    """
    seconds_file, held_file, hidden, columns = SECONDS, HELD, HIDDEN, list(kept)
    flag, copy, tally, changes = ALERT, COPY, TALLY, (HELD_CHANGE, WAITING_CHANGE)
    options = dict(WRITE_OPTIONS)

    def written(frame: DataFrame, folder: str, batch: int) -> tuple[str, str]:
        target = os.path.join(folder, f"batch-{batch:010d}")
        partial = os.path.join(folder, f".batch-{batch:010d}.part")
        frame.write.options(**options).mode("overwrite").parquet(partial)
        return partial, target

    def renamed(partial: str | None, target: str) -> None:
        shutil.rmtree(target, ignore_errors=True)
        if partial is not None:
            os.replace(partial, target)

    def observation(frame: DataFrame, batch: int) -> Any:
        on = "connect." if type(frame).__module__.startswith("pyspark.sql.connect") else ""
        return import_module(f"pyspark.sql.{on}observation").Observation(f"dedup-verdicts-{batch}")

    def write(answered: DataFrame, batch: int) -> None:
        started = time.monotonic()
        if alerts is not None:
            # Kept on the executors for its two writes: judged once, no row to the driver.
            answered = answered.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            observed = observation(answered, batch)
            tallies = [F.sum(F.col(c)).alias(c) for c in changes]
            tallies.append(F.count_if(F.col(flag)).alias("rows"))
            if copies is not None:
                tallies.append(F.count_if(F.col(copy)).alias("copies"))
            counted = answered.observe(observed, *tallies).where(~F.col(tally))
            partial, target = written(counted.drop(*hidden), out, batch)
            if alerts is not None:
                found = None
                if copies is not None and observed.get["copies"]:
                    copies(answered, batch)
                if observed.get["rows"]:
                    rows = answered.where(F.col(flag)).select(*columns).coalesce(1)
                    found = written(rows, alerts, batch)[0]
                renamed(found, os.path.join(alerts, f"batch-{batch:010d}"))
        finally:
            if alerts is not None:
                answered.unpersist()
        took = time.monotonic() - started
        with open(os.path.join(partial, seconds_file), "w", encoding="utf-8") as record:
            record.write(f"{took:.6f}\n")
        with open(os.path.join(partial, held_file), "w", encoding="utf-8") as record:
            record.write(" ".join(str(observed.get[c] or 0) for c in changes) + "\n")
        renamed(partial, target)
        if told is not None:
            told(batch, target, took)

    return write


@dataclass(frozen=True)
class Figures:
    """What one of Spark's micro-batches did: sends read, rows in the state store after it
    (0 unless the store counts them:
    :data:`~dedup_lib.live.executors.processor.TRACK_ROWS`), rows Spark dropped behind the
    watermark, timers fired, its watermark, and the seconds it took.

    Examples
    --------
    >>> Figures.of({"batchId": 5, "numInputRows": 0, "eventTime": {},
    ...             "durationMs": {"triggerExecution": 1250}})
    Figures(batch=5, sends=0, state_rows=0, dropped=0, timers=0, watermark=None, seconds=1.25)
    """

    batch: int
    sends: int
    state_rows: int
    dropped: int
    timers: int
    watermark: str | None
    seconds: float = 0.0

    @classmethod
    def of(cls, progress: dict[str, Any]) -> Figures:
        """The figures of one ``StreamingQueryProgress`` (as JSON)."""
        state = (progress.get("stateOperators") or [{}])[0]
        return cls(
            int(progress["batchId"]),
            int(progress.get("numInputRows", 0)),
            int(state.get("numRowsTotal", 0)),
            int(state.get("numRowsDroppedByWatermark", 0)),
            int(state.get("customMetrics", {}).get("numExpiredTimers", 0)),
            progress.get("eventTime", {}).get("watermark"),
            progress.get("durationMs", {}).get("triggerExecution", 0) / 1000,
        )


class RunningQuery:
    """One of the monitor's streaming queries (:attr:`query`, None until it starts), in a
    session of its own (:attr:`session`, released when it stops)."""

    query: StreamingQuery | None = None
    session: SparkSession | None = None
    #: The state store's bytes, in memory and on disk, last reported.
    stores: tuple[int, int] = (0, 0)
    #: Whether :meth:`check` raised the query's failure (:meth:`stop` then does not again).
    failure_raised: bool = False

    def store_bytes(self) -> tuple[int, int]:
        """The bytes of the query's state store, in memory and on disk, as Spark's progress of
        its last micro-batch reports them; those reported before when it ran none since (a
        trigger without a micro-batch reports no state), (0, 0) before any. Only the last
        progress is read: Spark keeps a hundred, each a round trip to the JVM.

        Examples
        --------
        >>> RunningQuery().store_bytes()
        (0, 0)
        """
        progress = self.query.lastProgress if self.query is not None else None
        if progress is not None:
            state = json.loads(progress.json).get("stateOperators") or []
            if state:
                memory = sum(int(s.get("memoryUsedBytes", 0)) for s in state)
                disk = sum(int(s.get("customMetrics", {}).get(SST_BYTES, 0)) for s in state)
                self.stores = (memory, disk)
        return self.stores

    def settle(self) -> None:
        """Wait until the query has read every file in its folder and fired the timers their
        watermark made due. (Twice: a trigger that looked before the last file landed may
        answer the first wait.)"""
        if self.query is not None:
            self.query.processAllAvailable()
            self.query.processAllAvailable()

    def check(self) -> None:
        """Raise what stopped the query, if it failed (a micro-batch's error, Spark's own)."""
        failure = self.query.exception() if self.query is not None else None
        if failure is not None:
            self.failure_raised = True
            raise failure

    def stop(self) -> None:
        """Stop the query (once its micro-batch in hand is committed:
        :func:`~dedup_lib.spark.streaming.wait_for_micro_batch`) and release its session. A
        failure no :meth:`check` raised (one in the moments before the stop) is raised once the
        query is stopped, not cleared with it: the command then fails, as a step does."""
        query, self.query = self.query, None
        if query is not None:
            wait_for_micro_batch(query)
        failure = None if self.failure_raised or query is None else query.exception()
        try:
            if query is not None:
                query.stop()
        finally:
            self.release()
        if failure is not None:
            raise failure

    def release(self) -> None:
        """Release the query's session (:func:`~dedup_lib.spark.streaming.release_session`)."""
        session, self.session = self.session, None
        if session is not None:
            release_session(session)


class ExecutorsQuery(RunningQuery):
    """The streaming query over the plans staged under ``root`` (a folder of the
    checkpoint), verdicts to ``out``, judged with ``lateness``.

    It starts with the first plan staged (the stream takes that file's columns), or at once
    on a checkpoint that has one; ``trigger`` is Spark's processing-time interval (each
    trigger looks for a new file, and a micro-batch without one fires the timers the last
    watermark made due); ``partitions`` is the state store's number of partitions, fixed by
    the first start of a checkpoint (default: the session's shuffle partitions); ``settings``
    are set on the query's session over
    :data:`~dedup_lib.live.executors.processor.STATE_SETTINGS`; ``on_written`` is called with
    each micro-batch's id, folder of verdicts and the seconds it took to judge and write them,
    once they are written (in Spark's thread); ``content`` are the columns compared as
    content (the collision alerts'). Each micro-batch's alerts' rows are written in
    :meth:`alert_folder`, and its accepted copies of contents handed to ``copies``
    (:func:`verdicts_writer`).
    """

    def __init__(
        self,
        spark: SparkSession,
        root: str,
        out: str,
        lateness: timedelta,
        *,
        trigger: str = "1 second",
        partitions: int | None = None,
        settings: Mapping[str, str] | None = None,
        on_written: Callable[[int, str, float], None] | None = None,
        content: Sequence[str] = (),
        copies: Callable[[DataFrame, int], None] | None = None,
    ) -> None:
        self.spark, self.root, self.out, self.lateness = spark, root, out, lateness
        self.content, self.copies = list(content), copies
        self.trigger, self.partitions, self.on_written = trigger, partitions, on_written
        self.settings = {**STATE_SETTINGS, **(settings or {})}
        self.inbox = Inbox(root)
        self.query = None
        load(spark)
        if self.inbox.schema is not None:
            self._start()

    @property
    def next_plan(self) -> int:
        """The plan to stage next: the one after the last staged whole."""
        return self.inbox.staged + 1

    def feed(self, batch: int, sends: DataFrame) -> None:
        """Plan ``batch``'s keyed sends (:func:`~dedup_lib.live.executors.processor.stream_columns`)
        staged for the query, which starts with the first."""
        self.inbox.stage(batch, sends)
        if self.query is None:
            self._start()

    def figures(self) -> list[Figures]:
        """The figures of the micro-batches this query ran, oldest first."""
        if self.query is None:
            return []
        return [Figures.of(json.loads(p.json)) for p in self.query.recentProgress]

    def watermark_ms(self) -> int | None:
        """The watermark of the last micro-batch the query finished (milliseconds), if any."""
        progress: dict[str, Any] = (self.query.lastProgress if self.query else None) or {}
        mark = progress.get("eventTime", {}).get("watermark")
        if mark is None:
            return None
        return int(datetime.fromisoformat(mark.replace("Z", "+00:00")).timestamp() * 1000)

    def written(self, after: int) -> list[tuple[int, str, float]]:
        """The micro-batches after ``after`` whose verdicts are written
        (:func:`written_since`): what a monitor on Spark Connect, whose server writes the
        verdicts without telling it, counts."""
        return written_since(self.out, after)

    @property
    def alerts(self) -> str:
        """The folder of the micro-batches' alerts' rows (:meth:`alert_folder`)."""
        return os.path.join(self.root, "alerts")

    def alert_folder(self, batch: int) -> str:
        """Where micro-batch ``batch``'s alerts' rows are written (in the verdicts' columns,
        with the contents compared)."""
        return verdict_folder(self.alerts, batch)

    @property
    def told(self) -> bool:
        """bool: Whether ``on_written`` is called as each micro-batch is written: not on Spark
        Connect, where the server writes them (:meth:`written`)."""
        return not is_connect(self.spark)

    def _start(self) -> None:
        schema = self.inbox.schema
        if schema is None:
            return
        # Released by :meth:`stop`, which the runner calls after a failure too.
        self.session = session = query_session(self.spark, self.settings, self.partitions)
        # Each plan's file is deleted once the micro-batch that read it is committed (Spark
        # does it as the next one starts): the inbox holds the plans not yet judged, not a
        # copy of every send the monitor ever read.
        sends = (
            session.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .option("cleanSource", "delete")
            .parquet(self.inbox.folder)
        )
        os.makedirs(self.out, exist_ok=True)
        os.makedirs(self.alerts, exist_ok=True)
        told = self.on_written if self.told else None
        content = _content_column(schema.names, self.content)
        answered = verdict_columns(judged(sends, self.lateness, content), content)
        kept = [c for c in answered.columns if c in USED]
        self.query = start_query(
            answered.writeStream.outputMode("append")
            .foreachBatch(verdicts_writer(self.out, told, self.alerts, kept, self.copies))
            .option("checkpointLocation", os.path.join(self.root, "spark"))
            .trigger(processingTime=self.trigger)
            .queryName(f"dedup-watch-{os.path.basename(os.path.dirname(self.root)) or 'state'}")
        )


def query_session(
    spark: SparkSession, settings: Mapping[str, str], partitions: int | None = None
) -> SparkSession:
    """A session of its own for one of the monitor's streaming queries, sharing ``spark``'s
    Spark context, with ``spark``'s own SQL settings (:data:`SESSION_SQL`), then ``settings``,
    and ``partitions`` shuffle partitions (the state store's) when given. A new session starts
    from the context's or the server's settings, not ``spark``'s (a Connect server's: 200
    shuffle partitions, each a state store partition), hence the SQL settings set first. On
    Connect, the session is a clone, which carries them too (pyspark 4.1 has no newSession)."""
    active: Any = spark
    session: SparkSession = active.cloneSession() if is_connect(spark) else active.newSession()
    chosen = {k: v for k in SESSION_SQL if (v := spark.conf.get(k, None)) is not None}
    chosen.update(settings)
    if partitions is not None:
        chosen["spark.sql.shuffle.partitions"] = str(partitions)
    for key, value in chosen.items():
        session.conf.set(key, value)
    return session


def _content_column(names: Sequence[str], content: Sequence[str]) -> str | None:
    """The stream's column of the sends' content: the keyed content, else the one text
    column compared as it is (:func:`~dedup_lib.live.intake.keyed.keyed_sends`); None when
    no content is compared."""
    if KEYED_CONTENT in names:
        return KEYED_CONTENT
    return content[0] if len(content) == 1 and content[0] in names else None
