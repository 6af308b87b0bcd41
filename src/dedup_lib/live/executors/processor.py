"""The judge on the executors: ``java/LiveMonitor.java``, a ``transformWithState`` processor
compiled on first use, applied to a stream of keyed sends.

The Java source is built as the replay's kernel is (:func:`dedup_lib.replay.kernels.jvm.built_jar`:
the JDK's ``javac``, a jar cached per user and named by a hash of its source) and loaded into
a classic session with ``ADD JAR``, so Spark's executors fetch it. It judges by the rules the
driver's judge keeps (:mod:`dedup_lib.live.state.judge`): each key's sends in replay order once
the watermark passes them, against the accepted send whose window is open, ``late`` for a send
behind the watermark it meets. Its state (the sends waiting, each key's anchor and timer) lies
in Spark's state store, keyed by the dedup key's two hashes.

Spark drops rows behind the watermark before a stateful operator sees them when the
operator's input still has the watermark's column: the column is a copy of the send time,
dropped again before the grouping, so every send reaches the judge and a late one is answered
``late`` (Spark's ``numRowsDroppedByWatermark`` stays 0).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from dedup_lib.columns import DECIDED, INTERNAL, K0, K1, SEND_MICROS, WINDOW, column
from dedup_lib.live.executors.connect import TYPE_NAME, judged_on_server
from dedup_lib.replay.kernels.jvm import ANCHOR, JvmKernelUnavailable, built_jar, jar_name
from dedup_lib.spark import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dedup_lib.live.intake.keyed import Keyed

SOURCE = Path(__file__).with_name("java") / "LiveMonitor.java"
#: The relation plugin that reaches the processor on a Spark Connect server
#: (:mod:`~dedup_lib.live.executors.connect`).
PLUGIN = Path(__file__).with_name("java") / "LiveMonitorPlugin.java"
#: The resends' processor (:mod:`~dedup_lib.live.executors.resends`).
RESENDS = Path(__file__).with_name("java") / "ResendMonitor.java"
#: The jar's sources, and the start of its name.
SOURCES, JAR_PREFIX = (ANCHOR, SOURCE, RESENDS, PLUGIN), "dedup-live"
CLASS_NAME = "dedup_lib.LiveMonitor"
#: The column the watermark is set on: a copy of the send time, dropped before the judge.
EVENT_TIME = INTERNAL + "event_time"
#: The latest send time (microseconds) of the files staged before a send's, and of those and
#: its own: from them the judge knows the watermark a send meets and the one after its
#: micro-batch, and judges what the latter reaches in the micro-batch that reads it
#: (:meth:`~dedup_lib.live.executors.inbox.Inbox.stage` writes them).
SEEN_BEFORE = INTERNAL + "seen_before"
SEEN_AFTER = INTERNAL + "seen_after"
#: The judge's own columns beside the verdict: the original's time (microseconds) and the
#: watermark a late send missed (milliseconds); the original's event id keeps its name.
ORIGINAL_MICROS = "original_micros"
MISSED_MS = "missed_ms"
#: The judge's column of a duplicate's original's content, beside the send's.
ORIGINAL_CONTENT_OUT = "original_content"
#: What the state gained by the call of the judge that answered a row: anchors (negative:
#: let go) and sends waiting (negative: judged), carried by the call's first row, or by a row
#: of its own that holds no send (:data:`TALLY` true) when the call answered none. Summed over
#: the micro-batches, the state's anchors and waiting sends: Spark's state stores count no
#: rows (:data:`TRACK_ROWS`).
HELD_CHANGE = INTERNAL + "held_change"
WAITING_CHANGE = INTERNAL + "waiting_change"
TALLY = INTERNAL + "tally"
#: Spark's RocksDB state store: state on the executors' disks, in bounded memory.
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: Whether the state store counts its rows: on, each write first reads its key to keep the
#: count (a native RocksDB ``get`` per ``put`` and ``remove``), which took most of the data
#: micro-batch (200 k sends of the day scenario, PT10M: 88 s with the count, 10 s without;
#: docs/decisions/live-state-executors.md). The count is a metric only: off, progress reports
#: ``numRowsTotal`` 0.
TRACK_ROWS = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"
#: The bytes of a staged file's row groups (:mod:`~dedup_lib.live.executors.inbox`) and of a
#: split of the query's reads: a plan's file is one, and read whole it is one task, on one
#: core, up to the shuffle; split by its row groups, the sends reach the state store from
#: every core (a micro-batch of 1 M sends of the day scenario is a 110 MB file: 7 tasks).
SPLIT_BYTES = 16 * 1024 * 1024
#: The micro-batches whose state and logs the checkpoint keeps to restart from: a restart needs
#: only the last committed, and Spark's default (100) kept a hundred versions of each state
#: store's changes and of the files their snapshots name, which a 20-minute soak at 1,800
#: sends a second grew to 2.3 GB of checkpoint for 0.37 GB of state.
RETAINED = 10
#: How Spark writes the checkpoint's files: each to a file of its own, then renamed. Spark's
#: default renames through Hadoop's ``FileContext``, whose local file system, without Hadoop's
#: native library (pyspark ships none), runs ``readlink`` as a command for every file renamed:
#: some 1,400 processes for 1 M sends. The checkpoint is a folder on a POSIX file system (the
#: monitor writes its own records beside Spark's), where the rename of ``FileSystem`` is as
#: atomic.
CHECKPOINT_FILES = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
#: The settings the streaming query's own session runs with.
STATE_SETTINGS = {
    "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILES,
    "spark.sql.streaming.minBatchesToRetain": str(RETAINED),
    "spark.sql.files.maxPartitionBytes": str(SPLIT_BYTES),
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
    TRACK_ROWS: "false",
    "spark.sql.adaptive.enabled": "false",
}


#: The columns the processor reads, in the order it takes their names (then the content's,
#: when there is one).
COLUMNS = (K0, K1, SEND_MICROS, WINDOW, "event_id", DECIDED, "verdict", SEEN_BEFORE, SEEN_AFTER)
#: What a Connect server without the plugin answers, and the plugin of another version.
_NO_PLUGIN, _OTHER_JAR = "NO_HANDLER_FOR_EXTENSION", "DEDUP_LIB_JAR_MISMATCH: "


def jar_path() -> Path:
    """The jar holding :data:`CLASS_NAME`, compiled now if the cache lacks it.

    Examples
    --------
    >>> jar_path().name[:11]
    'dedup-live-'
    """
    return built_jar(SOURCES, JAR_PREFIX, "the live monitor's judge on the executors")


def load(spark: SparkSession) -> None:
    """The judge's jar in ``spark`` (a classic session) and its executors; nothing on Spark
    Connect, whose server has it from its start (:mod:`~dedup_lib.live.executors.connect`).

    Raises
    ------
    JvmKernelUnavailable
        When the jar cannot be built or loaded; the message says why.
    """
    if is_connect(spark):
        check_server(spark)
        return
    jar = jar_path()
    try:
        spark.sql("ADD JAR '" + str(jar).replace("\\", "\\\\").replace("'", "\\'") + "'")
    except Exception as exc:
        raise JvmKernelUnavailable(f"the session could not load {jar}: {exc}") from exc


def check_server(spark: SparkSession, jar: str | None = None, kind: str = TYPE_NAME) -> None:
    """Whether the Spark Connect server behind ``spark`` judges as this client does (whose
    jar is ``jar``, default this version's; ``kind`` the relation's type): the columns of an
    empty relation judged, asked before anything is staged. No job runs.

    Raises
    ------
    JvmKernelUnavailable
        When the server has no plugin for ``kind``, or another version's; the message says
        what to do.
    """
    types = ("long", "long", "long", "long", "long", "boolean", "string", "long", "long")
    probe = spark.createDataFrame([], ", ".join(map(" ".join, zip(COLUMNS, types, strict=True))))
    jar = jar or jar_name(SOURCES, JAR_PREFIX)
    try:
        columns = judged_on_server(probe, (*COLUMNS, ""), 0, jar, kind).columns
    except Exception as exc:
        text = str(exc)
        if _NO_PLUGIN in text:
            raise JvmKernelUnavailable(
                "the Spark Connect server has no dedup-lib judge for the state on the "
                "executors: start it with the options `dedup-lib connect-options` prints "
                "(docs/guide/live.md); where the server takes no plugin (a managed one), run "
                "with --master (classic Spark) or --state driver"
            ) from exc
        if _OTHER_JAR in text:
            said = text.split(_OTHER_JAR, 1)[1].splitlines()[0]
            raise JvmKernelUnavailable(said.split(" SQLSTATE")[0]) from None
        raise
    assert ORIGINAL_MICROS in columns, columns


def stream_columns(keyed: Keyed) -> DataFrame:
    """The keyed sends with the columns the judge reads that the driver's judge adds itself
    (:meth:`dedup_lib.live.intake.keyed.Keyed.completed`): the send's time in microseconds,
    and its entity's window where one window holds for every entity."""
    frame = keyed.frame.withColumn(SEND_MICROS, F.unix_micros(column("send_time")))
    if keyed.window is not None:
        frame = frame.withColumn(WINDOW, F.lit(keyed.window).cast("long"))
    return frame


def judged(sends: DataFrame, lateness: timedelta, content: str | None = None) -> DataFrame:
    """The verdicts of ``sends``, a stream of keyed sends (:func:`stream_columns`), judged on
    the executors with the watermark ``lateness`` behind the latest send time seen (on Spark
    Connect, by the server's plugin).

    Each send comes out once: decided and late ones in the micro-batch that reads them, the
    rest in the first micro-batch whose watermark reaches their time, or in the one that
    reads them when the watermark after it does (:data:`SEEN_AFTER`). The rows are the
    sends' columns with their ``verdict``, and :data:`ORIGINAL_MICROS`,
    ``original_event_id``, :data:`MISSED_MS` and :data:`ORIGINAL_CONTENT_OUT` (the content,
    the column ``content`` of the sends, of the send a duplicate's original is, for the
    collision alerts), then :data:`HELD_CHANGE`, :data:`WAITING_CHANGE` and :data:`TALLY`.
    The jar must be loaded (:func:`load`).
    """
    spark = sends.sparkSession
    late_ms = lateness // timedelta(milliseconds=1)  # Spark's delay, and the judge's
    delay = f"{late_ms} milliseconds"
    watermarked = (
        sends.withColumn(EVENT_TIME, F.timestamp_micros(column(SEND_MICROS)))
        .withWatermark(EVENT_TIME, delay)
        .drop(EVENT_TIME)
    )
    names = (*COLUMNS, content or "")
    if is_connect(spark):
        return judged_on_server(watermarked, names, late_ms, jar_name(SOURCES, JAR_PREFIX))
    jvm: Any = spark._jvm
    # py4j finds classes through the calling thread's context loader, and ADD JAR set the
    # session's jar loader on the thread that ran it only: a monitor's loop runs in another.
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
    monitor = jvm.dedup_lib.LiveMonitor
    from pyspark.sql import DataFrame

    return DataFrame(monitor.apply(watermarked._jdf, *names, late_ms), spark)
