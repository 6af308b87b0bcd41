"""Telemetry files as Spark reads them, and Spark's failures as errors that name the file.

A format is read so that nothing is lost or misread without a word: Parquet footers are all
read up front (a column only some files have is kept), CSV records may span lines (a quoted
newline never cuts a field in two) and files whose header rows differ are read group by
group and aligned by name; a line that does not parse is kept for the quarantine.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import types as T

from dedup_lib.columns import CORRUPT
from dedup_lib.errors import ClusterPathError, InputError, excerpt, printable
from dedup_lib.spark import spark_errors, spark_message
from dedup_lib.telemetry.files import InputFiles, local_path, not_on_cluster, spark_path
from dedup_lib.telemetry.schema import FORMAT_NAMES, FORMATS, SUPPORTED_FORMATS, format_hint

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

_TEXT_EXTENSIONS = {".csv": "csv", ".jsonl": "json", ".ndjson": "json", ".json": "json"}
EXPECTED = {
    "parquet": "a Parquet file",
    "csv": "a CSV file with a header row",
    "json": "JSON Lines (one JSON object per line)",
}
_FAILED_FILE = re.compile(r"(?:reading file|for file:?|path=)\s*([a-z][\w+.-]*:\S+?)[.,}]?(?:\s|$)")
_CAUSES = (
    ("not a gzip file", "it is named .gz but is not gzip-compressed"),
    ("Not in GZIP format", "it is named .gz but is not gzip-compressed"),
    ("Unexpected end of", "it is cut short (truncated)"),
    ("Relative path in absolute URI", "Hadoop cannot read file names with ':'; rename the file"),
    ("is not a Parquet file", "it is not a Parquet file"),
    ("can not read class org.apache.parquet.format.PageHeader", "its data pages are damaged"),
    ("FAILED_TO_UNCOMPRESS", "its data pages are damaged (they do not decompress)"),
    ("ParquetDecodingException", "its data pages are damaged"),
    ("CSV header does not conform", "its header row differs from the first file's"),
    ("UNABLE_TO_INFER_SCHEMA", "Spark finds no schema in it (is it empty?)"),
)


#: Spark's refusal, as it reads the rows, of a nanosecond timestamp column that the file's own
#: Spark schema (``org.apache.spark.sql.parquet.row.metadata``) calls a timestamp: a file Spark
#: wrote, written again by pyarrow with nanoseconds. Its schema is read without complaint, so
#: :func:`read_sources` cannot read the column as epoch nanoseconds as it does pandas' files.
_NANOS_UNDER_SPARK_SCHEMA = re.compile(
    r"column: \[([^\]]+)\], physicalType: INT64, logicalType: timestamp\b"
)


def _root_cause(exc: BaseException) -> str:
    """The deepest ``Caused by`` of a Java error, else its first line."""
    text = str(exc)
    nanos = _NANOS_UNDER_SPARK_SCHEMA.search(text)
    if nanos is not None:
        return (
            f"its column {printable(nanos[1])} holds nanosecond timestamps, which the Spark "
            "schema stored in the file calls microsecond ones (a file Spark wrote, written "
            "again with nanoseconds); write it in microseconds (pyarrow: "
            "coerce_timestamps='us') or without that schema"
        )
    for needle, meaning in _CAUSES:
        if needle in text:
            return meaning
    causes = re.findall(r"Caused by: [\w.$]+: (.+)", text)
    return printable(causes[-1].strip()) if causes else printable(spark_message(exc))


def failed_file(text: str) -> str | None:
    """The file a Spark error says it failed to read, if it names one."""
    found = _FAILED_FILE.search(text)
    return found[1] if found else None


def read_failure(
    exc: BaseException, files: InputFiles, fmt: str, caller: str, expected: str | None = None
) -> InputError:
    """Spark's failure to read ``files`` as one line: which file, what is wrong with it, and
    what was expected (``expected``, else what ``fmt`` files look like). Files of this
    machine that a remote cluster does not have are said to be missing there."""
    text = str(exc)
    if files.remote and ("PATH_NOT_FOUND" in text or "FileNotFoundException" in text):
        local = local_path(files.root)
        return not_on_cluster(files.root, caller, here=local is not None and os.path.exists(local))
    found = failed_file(text)
    where = files.name(found) if found else printable(files.root)
    return InputError(
        f"{caller}: cannot read {where} as {fmt}: {_root_cause(exc)}; "
        f"expected {expected or EXPECTED[fmt]}. "
        "Fix or remove the file and load again."
    )


def chained(failure: InputError, exc: BaseException) -> BaseException | None:
    """The Spark error a failure is raised from: none for a path the cluster lacks, whose
    message says all (a notebook would show the server's whole trace under it)."""
    return None if isinstance(failure, ClusterPathError) else exc


@contextlib.contextmanager
def reading(
    files: InputFiles, fmt: str, caller: str, expected: str | None = None
) -> Iterator[None]:
    """Within: a Spark error raised as :func:`read_failure`'s one line (chained to Spark's
    error as :func:`chained` says)."""
    try:
        yield
    except spark_errors() as exc:
        failure = read_failure(exc, files, fmt, caller, expected)
        raise failure from chained(failure, exc)


def _format_of(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(".parquet"):
        return "parquet"
    lower = lower.removesuffix(".gz").removesuffix(".zst")
    return next((fmt for ext, fmt in _TEXT_EXTENSIONS.items() if lower.endswith(ext)), None)


def resolve_format(
    files: InputFiles, format: str | None, caller: str, structured: tuple[str, ...] = ()
) -> str:
    """The format the user named, else the one every file name says. ``structured`` are the
    other names a user may give, for the message."""
    path = printable(files.root)
    if format is not None:
        fmt = FORMAT_NAMES.get(format.lower())
        if fmt is None:
            raise InputError(
                f"{caller}: unknown format {excerpt(format)} for {path}; "
                f"supported: {', '.join((*FORMATS, *structured))} ({SUPPORTED_FORMATS})"
            )
        return fmt
    if not files.files:
        skipped = f" ({len(files.ignored)} hidden or bookkeeping entries ignored)"
        raise InputError(f"{caller}: no data files in {path}{skipped if files.ignored else ''}")
    by_format: dict[str, list[str]] = {}
    for file in files.files:
        name = files.name(file)
        by_format.setdefault(_format_of(name) or "unknown", []).append(name)
    unknown = by_format.pop("unknown", [])
    if unknown:
        raise InputError(
            f"{caller}: cannot tell the format of {path} from the file name(s) "
            f"{', '.join(unknown[:5])}; supported: {SUPPORTED_FORMATS}, "
            f"or pass {format_hint(FORMATS)}"
        )
    if len(by_format) > 1:
        found = "; ".join(f"{fmt}: {', '.join(names[:3])}" for fmt, names in by_format.items())
        raise InputError(
            f"{caller}: {path} mixes formats ({found}); put each format in its own "
            "folder and load them separately"
        )
    return next(iter(by_format))


@dataclass(frozen=True)
class Source:
    """Files read together (one CSV header, or all files of another format): Spark's
    DataFrame over them, and the files, the first of which messages name."""

    frame: DataFrame
    files: list[str]
    #: What the read did that the user should know, once per load (nanosecond timestamps).
    notes: tuple[str, ...] = ()

    @property
    def schema(self) -> T.StructType:
        return self.frame.schema


def read_sources(spark: SparkSession, files: InputFiles, fmt: str, caller: str) -> list[Source]:
    """The files as Spark reads them, one source per CSV header; the schemas are resolved here,
    so files whose footer or header cannot be read fail here."""
    groups = _csv_groups(files.files) if fmt == "csv" else [files.files]
    with reading(files, fmt, caller):
        try:
            sources = [Source(_reader(spark, group, fmt, files), group) for group in groups]
            for source in sources:
                _ = source.schema
        except spark_errors() as exc:
            if fmt != "parquet" or not _nanos(str(exc)):
                raise
            sources = [_nanos_source(spark, files)]
    for source in sources:
        if fmt == "json" and source.schema.names == [CORRUPT]:
            raise InputError(
                f"{caller}: no line of {files.name(source.files[0])} is a JSON object: "
                f"expected {EXPECTED[fmt]}"
            )
    return sources


#: The other way a refusal of Spark names a nanosecond timestamp column.
_NANOS_TYPE = re.compile(r"INT64, logicalType: timestamp")


def _nanos(text: str) -> bool:
    """Whether Spark refused a Parquet file for its nanosecond timestamps."""
    return "TIMESTAMP(NANOS" in text or _NANOS_TYPE.search(text) is not None


#: The setting under which Spark reads a nanosecond timestamp as its epoch nanoseconds.
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"


def _nanos_source(spark: SparkSession, files: InputFiles) -> Source:
    """Parquet files with nanosecond timestamps (what pandas and pyarrow write by default):
    their schema read with those columns as epoch nanoseconds (``long``), then the files
    read with that schema, which needs no setting later. The loader parses a time column of
    epoch nanoseconds as it does in any format (:func:`dedup_lib.telemetry.times.from_epoch`).
    """
    before = spark.conf.get(NANOS_AS_LONG, "false") or "false"
    spark.conf.set(NANOS_AS_LONG, "true")
    try:
        schema = _reader(spark, files.files, "parquet", files).schema
    finally:
        spark.conf.set(NANOS_AS_LONG, before)
    reader = _base(spark, files).schema(schema)
    frame = reader.parquet(*(spark_path(f) for f in files.files))
    note = (
        f"{printable(files.root)}: nanosecond timestamps (the pandas and pyarrow default) read "
        "as epoch nanoseconds: send and scheduled times rounded to the microsecond, which "
        "Spark holds, as epoch nanoseconds in any format are; other such columns stay epoch "
        "nanoseconds (long)"
    )
    return Source(frame, files.files, (note,))


def _base(spark: SparkSession, files: InputFiles) -> DataFrameReader:
    reader = spark.read
    if files.partitioned:
        reader = reader.option("basePath", spark_path(files.root))
    return reader


def _reader(spark: SparkSession, group: list[str], fmt: str, files: InputFiles) -> DataFrame:
    paths = [spark_path(f) for f in group]
    reader = _base(spark, files)
    if fmt == "parquet":
        # mergeSchema reads every footer: a corrupt file fails now, and no column that only
        # some files have is lost.
        return reader.option("mergeSchema", "true").parquet(*paths)
    if fmt == "json":
        return reader.options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT).json(paths)
    # The header alone: read as one line, because a multi-line read globs the paths again.
    header = reader.options(header=True, inferSchema=False).csv(paths).schema
    # enforceSchema=False checks every file's header against the first one, so files with
    # reordered columns that the grouping could not see (not on this disk) fail loudly.
    return (
        reader.options(
            header=True,
            multiLine=True,
            enforceSchema=_renamed_by_spark(header.names),
            mode="PERMISSIVE",
            columnNameOfCorruptRecord=CORRUPT,
        )
        .schema(T.StructType([*header.fields, T.StructField(CORRUPT, T.StringType())]))
        .csv(paths)
    )


def _renamed_by_spark(columns: list[str]) -> bool:
    """Spark names empty header cells ``_c<i>`` and suffixes duplicates with their index."""
    return any(name == f"_c{i}" or name.endswith(str(i)) for i, name in enumerate(columns))


def _csv_groups(files: list[str]) -> list[list[str]]:
    """CSV files grouped by header row, in order of first appearance. Files without a header
    (empty) are left out when others have one; unreadable ones join the first group, whose
    read then names them."""
    groups: dict[tuple[str, ...] | None, list[str]] = {}
    for file in files:
        groups.setdefault(_csv_header(file), []).append(file)
    unreadable = groups.pop(None, [])
    if len(groups) > 1:
        groups.pop((), None)
    ordered = list(groups.values()) or [[]]
    ordered[0] = unreadable + ordered[0]
    return [group for group in ordered if group]


def _csv_header(file: str) -> tuple[str, ...] | None:
    """A local CSV file's header row (``()`` when empty), or None when this machine cannot
    read it here (another file system, bad compression: Spark will say)."""
    local = local_path(file)
    if local is None:
        return None
    try:
        opener = gzip.open if local.lower().endswith(".gz") else open
        with opener(local, "rt", encoding="utf-8-sig", errors="replace", newline="") as text:
            return tuple(next(csv.reader(text), ()))
    except (OSError, EOFError, csv.Error, UnicodeError):
        return None
