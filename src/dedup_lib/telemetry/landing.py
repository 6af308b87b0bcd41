"""A folder where telemetry files land, read a micro-batch at a time: the files present when it
opens tell the format and the columns (later files must have the same), and each micro-batch
of files is read and given its reasons as :func:`dedup_lib.load_telemetry` reads a file, with
its mapping, types, quarantine and reasons. Within a micro-batch the rows are a static frame,
so every rule of the loader applies unchanged, the joins and windows of OTLP traces too.

This is the loader's seam for streams: :func:`open_landing` once, then :meth:`Landing.read`
and :meth:`Landing.with_reasons` for each micro-batch's files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import CORRUPT, column
from dedup_lib.errors import InputError, printable
from dedup_lib.telemetry.files import list_input, local_path, spark_path
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.formats.otlp import TRACES_DATA, OtlpFormat
from dedup_lib.telemetry.loader import OpenedInput, open_input, with_entity
from dedup_lib.telemetry.renaming import record_keys, renamed_sources
from dedup_lib.telemetry.sources import Source

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

WATCH = "watch_duplicates"


@dataclass(frozen=True)
class Landing:
    """The landing folder at ``path``: its format, the schema its files are read with, and
    how a micro-batch of them is read (:meth:`read`) and given its reasons
    (:meth:`with_reasons`)."""

    path: str
    format: str
    opened: OpenedInput
    mapping: dict[str, str]
    schema: T.StructType
    entity: str | None = None

    @property
    def spark(self) -> SparkSession:
        return self.opened.raw.sparkSession

    @property
    def notes(self) -> tuple[str, ...]:
        """What reading the folder did that the user should know."""
        return self.opened.notes

    def read(self, paths: list[str]) -> DataFrame:
        """The records of the files at ``paths`` (read with the folder's schema), each with
        the file it came from in ``source_file``."""
        reader = self.spark.read.schema(self.schema)
        spark_paths = [spark_path(p) for p in paths]
        fmt = "json" if self.opened.record_format is not None else self.opened.fmt
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        if fmt == "parquet":
            frame = reader.parquet(*spark_paths)
        elif fmt == "json":
            frame = reader.options(**options).json(spark_paths)
        else:
            frame = reader.options(header=True, multiLine=True, **options).csv(spark_paths)
        if self.opened.record_format is not None:
            file_path = frame.metadataColumn("_metadata").getField("file_path")
            return frame.select("*", file_path.alias(SOURCE_FILE))
        source = Source(frame, paths)
        (renamed,) = renamed_sources([source], self.mapping, self.opened.files, self.path)
        return renamed.frame

    def with_reasons(self, raw: DataFrame) -> tuple[OpenedInput, DataFrame]:
        """The records of ``raw`` (rows of :meth:`read`) as the loader reads them, each with
        its reason if refused; and the opened input that says which rows are valid sends."""
        opened = self.opened
        if opened.record_format is not None:
            keys = record_keys(opened.record_format, self.mapping)
            records = opened.record_format.records(raw, keys, self.entity)
            if CORRUPT not in records.columns:
                records = records.select("*", F.lit(None).cast("string").alias(CORRUPT))
            raw = records
        elif self.entity is not None:
            named: dict[str, T.DataType] = (
                {"entity": T.StringType()} if "entity" in raw.columns else {}
            )
            raw = with_entity(raw, named, self.entity)
        opened = replace(opened, raw=raw)
        return opened, opened.with_reasons(raw)

    def valid_columns(self) -> DataFrame:
        """The valid rows of a micro-batch, of no rows: their columns before any file is
        read, without a Spark job."""
        empty = self.read(self.opened.files.files[:1]).limit(0)
        opened, frame = self.with_reasons(empty)
        return opened.valid(frame, keep_source_file=True)


class NothingLandedError(InputError):
    """A landing folder that holds no data file yet: nothing tells its format and columns."""


def open_landing(
    spark: SparkSession,
    path: str,
    format: str | None = None,
    mapping: Mapping[str, str] | None = None,
    *,
    entity: str | None = None,
) -> Landing:
    """The folder ``path`` (on this machine's disk) as a landing: the files already there
    tell the format and columns; :class:`NothingLandedError` while it holds none."""
    local = local_path(path)
    if local is None:
        raise InputError(
            f"{WATCH}: {printable(path)} is not on this machine's disk: the monitor follows "
            "each file it reads as it grows and rotates, so it watches a local folder (or a "
            "mount)"
        )
    path = local  # absolute: the process may change its folder while the monitor runs
    files = list_input(spark, path, WATCH)
    if not files.files:
        raise NothingLandedError(f"{WATCH}: nothing has landed in {printable(path)} yet")
    mapping = dict(mapping or {})
    opened = open_input(spark, path, format, mapping, entity, files)
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
        return Landing(path, opened.fmt, opened, mapping, TRACES_DATA, entity)
    assert opened.source_schema is not None
    schema = opened.source_schema
    if opened.fmt != "parquet" and CORRUPT not in schema.names:
        schema = T.StructType([*schema.fields, T.StructField(CORRUPT, T.StringType())])
        opened = replace(opened, corrupt=True)
    return Landing(path, opened.fmt, opened, mapping, schema, entity)


def source_names(frame: DataFrame, names: dict[str, str]) -> DataFrame:
    """``frame`` with each ``source_file`` that ``names`` knows (a path's last part) given
    the name it stands for."""
    if not names:
        return frame
    last = F.element_at(F.split(column(SOURCE_FILE), "/"), -1)
    mapped = F.create_map(*(F.lit(x) for pair in names.items() for x in pair))
    return frame.withColumn(SOURCE_FILE, F.coalesce(mapped[last], column(SOURCE_FILE)))
