"""A folder where telemetry files land, read as a stream: each micro-batch of new files is
loaded as :func:`dedup_lib.load_telemetry` loads a file, with its mapping, types, quarantine
and reasons, and its count that adds up.

The files present when the stream opens tell the format and the columns (a stream needs its
schema before the first file is read); files that land later must have the same columns.
Within one micro-batch the rows are a static frame, so every rule of the loader applies to
them unchanged, including those a stream cannot run (the joins and windows of OTLP traces).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import column
from dedup_lib.errors import InputError, printable
from dedup_lib.telemetry.files import InputFiles, spark_path
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.formats.otlp import TRACES_DATA, OtlpFormat
from dedup_lib.telemetry.loader import _open, _Opened, _with_entity
from dedup_lib.telemetry.quarantine import REASON
from dedup_lib.telemetry.renaming import record_keys, renamed_sources
from dedup_lib.telemetry.sources import CORRUPT, Source
from dedup_lib.telemetry.tally import check_adds_up

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

WATCH = "watch_duplicates"


@dataclass(frozen=True)
class BatchLoad:
    """One micro-batch loaded: its valid rows (with ``source_file``), its quarantine (with
    ``reason``), its records that are not sends, and their counts."""

    valid: DataFrame
    quarantine: DataFrame
    not_sends: DataFrame
    counts: dict[str, int]
    #: The judged micro-batch the three frames read, cached while they are written.
    judged: DataFrame

    def release(self) -> None:
        """Drop the cached micro-batch, once its frames are written."""
        self.judged.unpersist()


@dataclass(frozen=True)
class Landing:
    """The landing folder at ``path`` as a stream of raw records (:attr:`stream`), and how a
    micro-batch of them is loaded (:meth:`load`)."""

    path: str
    format: str
    stream: DataFrame
    opened: _Opened
    mapping: dict[str, str]
    entity: str | None = None

    def load(self, batch: DataFrame) -> BatchLoad:
        """The micro-batch ``batch`` (rows of :attr:`stream`) loaded; an error if its rows do
        not add up (none is ever dropped without a word)."""
        opened, judged = self._judged(batch)
        frame = judged.cache()
        not_send = opened.skipped if opened.skipped is not None else F.lit(False)
        row = frame.agg(
            F.count(F.lit(1)).alias("read"),
            F.count_if(~not_send & column(REASON).isNull()).alias("valid"),
            F.count_if(~not_send & column(REASON).isNotNull()).alias("quarantined"),
            F.count_if(not_send).alias("skipped"),
        ).first()
        assert row is not None
        counts = {k: int(row[k]) for k in ("read", "valid", "quarantined", "skipped")}
        check_adds_up(printable(self.path), counts)
        return BatchLoad(
            valid=opened.valid(frame, keep_source_file=True),
            quarantine=opened.quarantine(frame),
            not_sends=opened.not_sends(frame),
            counts=counts,
            judged=frame,
        )

    def valid_columns(self) -> DataFrame:
        """The valid rows of a micro-batch, as :meth:`load` gives them, of no rows: their
        columns before any file is read, without a Spark job."""
        empty = self.stream.sparkSession.createDataFrame([], self.stream.schema)
        opened, judged = self._judged(empty)
        return opened.valid(judged, keep_source_file=True)

    def _judged(self, batch: DataFrame) -> tuple[_Opened, DataFrame]:
        """The rows of ``batch`` as records of the format, each with its reason (if refused)."""
        opened = self.opened
        if opened.record_format is not None:
            keys = record_keys(opened.record_format, self.mapping)
            records = opened.record_format.records(batch, keys, self.entity)
            if CORRUPT not in records.columns:
                records = records.select("*", F.lit(None).cast("string").alias(CORRUPT))
            batch = records
        elif self.entity is not None:
            named: dict[str, T.DataType] = (
                {"entity": T.StringType()} if "entity" in batch.columns else {}
            )
            batch = _with_entity(batch, named, self.entity)
        opened = replace(opened, raw=batch)
        return opened, opened.judged(batch)


def open_landing(
    spark: SparkSession,
    path: str,
    format: str | None = None,
    mapping: Mapping[str, str] | None = None,
    *,
    entity: str | None = None,
) -> Landing:
    """The folder ``path`` as a stream of telemetry files; the files already there tell the
    format and columns. An error that says what to do when none has landed yet."""
    mapping = dict(mapping or {})
    opened = _open(spark, path, format, mapping, entity)
    files = opened.files
    if not files.files:
        raise InputError(f"{WATCH}: nothing has landed in {printable(path)} yet")
    if files.partitioned:
        raise InputError(
            f"{WATCH}: {printable(path)} has key=value folders; a live folder is read flat: "
            "let files land in the folder itself"
        )
    if opened.record_format is not None:
        if not isinstance(opened.record_format, OtlpFormat):
            raise InputError(
                f"{WATCH}: {opened.record_format.name} files cannot be watched (they are "
                "exports, written once); load them with load_telemetry or dedup-lib simulate"
            )
        raw = spark.readStream.schema(TRACES_DATA).options(
            mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT
        )
        stream = raw.json(spark_path(files.root))
        file_path = stream.metadataColumn("_metadata").getField("file_path")
        framed = stream.select("*", file_path.alias(SOURCE_FILE))
        return Landing(path, opened.fmt, framed, opened, mapping, entity)
    assert opened.source_schema is not None
    schema = opened.source_schema
    if opened.fmt != "parquet" and CORRUPT not in schema.names:
        schema = T.StructType([*schema.fields, T.StructField(CORRUPT, T.StringType())])
        opened = replace(opened, corrupt=True)
    source = Source(_plain_stream(spark, opened.fmt, schema, files), files.files)
    (renamed,) = renamed_sources([source], mapping, files, path)
    return Landing(path, opened.fmt, renamed.frame, opened, mapping, entity)


def _plain_stream(
    spark: SparkSession, fmt: str, schema: T.StructType, files: InputFiles
) -> DataFrame:
    """The folder read as a stream with the schema its present files have."""
    reader = spark.readStream.schema(schema)
    folder = spark_path(files.root)
    if fmt == "parquet":
        return reader.parquet(folder)
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    if fmt == "json":
        return reader.options(**options).json(folder)
    return reader.options(header=True, multiLine=True, **options).csv(folder)
