"""``load_telemetry``: message telemetry from Parquet, CSV or JSON Lines, in the canonical schema.

Columns are renamed onto the canonical names (a user mapping, then the names the Azure SDKs
use), text properties become strings and times become UTC timestamps. Rows that cannot take
part in the replay go to a quarantine with a reason instead of being dropped, so valid plus
quarantined is always the number of rows read. DataFrame API only: runs on Spark Connect too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import column, utc_wall_clock
from dedup_lib.errors import InputError, MissingFileError
from dedup_lib.telemetry.schema import (
    BUILTIN_ALIASES,
    CANONICAL_COLUMNS,
    FORMAT_NAMES,
    FORMATS,
    REQUIRED_COLUMNS,
    SUPPORTED_FORMATS,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession

_TEXT_EXTENSIONS = {".csv": "csv", ".jsonl": "json", ".ndjson": "json", ".json": "json"}
_EXPECTED = {
    "parquet": "a Parquet file",
    "csv": "a CSV file with a header row",
    "json": "JSON Lines (one JSON object per line)",
}
_MALFORMED = {"csv": "malformed CSV line", "json": "malformed JSON line"}

REASON = "reason"
SOURCE_FILE = "source_file"
_CORRUPT = "__dedup_corrupt_record"
_PARSED = "__dedup_parsed_"

_TEXT_COLUMNS = ("message_id", "entity", "partition_key", "session_id")
_TIME_COLUMNS = ("send_time", "scheduled_enqueue_time")
_NUMBER = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"
_ISO_DATE = r"^\s*(?!0000)\d{4}-\d{2}-\d{2}([T ]|\s*$)"
_HAS_ZONE = r"\d:\d{2}(:\d{2}(\.\d*)?)?\s*[^\d\s.:]"
_MIN_MICROS = -62_135_596_800_000_000
_MAX_MICROS = 253_402_300_799_999_999


def _spark_errors() -> tuple[type[Exception], ...]:
    """Errors Spark raises while resolving a read: classic leaves some as Py4JJavaError."""
    try:
        from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
    except ImportError:
        return (PySparkException,)
    return (PySparkException, Py4JJavaError)


def _spark_message(exc: Exception) -> str:
    """The first meaningful line of a Spark error, without the Py4J and Java class prefixes."""
    for line in str(exc).splitlines():
        line = line.strip().removeprefix(": ")
        if line and not line.startswith("An error occurred while calling"):
            return re.sub(r"^[\w.$]+(Exception|Error): ", "", line)
    return type(exc).__name__


def _norm(name: str) -> str:
    return name.strip().lstrip("\ufeff").replace("_", "").lower()


def _format_of(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(".parquet"):
        return "parquet"
    lower = lower.removesuffix(".gz")
    return next((fmt for ext, fmt in _TEXT_EXTENSIONS.items() if lower.endswith(ext)), None)


def _list_files(spark: SparkSession, path: str) -> list[str]:
    """Names of the data files under ``path`` as Spark lists them (folders and partitions
    included), without hidden names such as ``_SUCCESS``. No Spark job: only the file index."""
    try:
        files = spark.read.format("text").load(path).inputFiles()
    except _spark_errors() as exc:
        if "PATH_NOT_FOUND" in str(exc):
            raise MissingFileError(f"load_telemetry: {path} does not exist") from exc
        raise InputError(f"load_telemetry: cannot list {path}: {_spark_message(exc)}") from exc
    names = [unquote(uri.rstrip("/").rsplit("/", 1)[-1]) for uri in files]
    named = path.rstrip("/").rsplit("/", 1)[-1]
    return sorted(n for n in names if n == named or not n.startswith(("_", ".")))


def _resolve_format(path: str, files: list[str], format: str | None) -> str:
    if format is not None:
        fmt = FORMAT_NAMES.get(format.lower())
        if fmt is None:
            raise InputError(
                f"load_telemetry: unknown format {format!r} for {path}; "
                f"supported: {', '.join(FORMATS)} ({SUPPORTED_FORMATS})"
            )
        return fmt
    if not files:
        raise InputError(f"load_telemetry: no data files in {path}")
    by_format: dict[str, list[str]] = {}
    for name in files:
        by_format.setdefault(_format_of(name) or "unknown", []).append(name)
    unknown = by_format.pop("unknown", [])
    if unknown:
        raise InputError(
            f"load_telemetry: cannot tell the format of {path} from the file name(s) "
            f"{', '.join(unknown[:5])}; supported: {SUPPORTED_FORMATS}, "
            "or pass format='parquet', 'csv' or 'json'"
        )
    if len(by_format) > 1:
        found = "; ".join(f"{fmt}: {', '.join(names[:3])}" for fmt, names in by_format.items())
        raise InputError(
            f"load_telemetry: {path} mixes formats ({found}); put each format in its own "
            "folder and load them separately"
        )
    return next(iter(by_format))


def _renamed_by_spark(columns: list[str]) -> bool:
    """Spark names empty header cells ``_c<i>`` and suffixes duplicates with their index."""
    return any(name == f"_c{i}" or name.endswith(str(i)) for i, name in enumerate(columns))


def _read(spark: SparkSession, path: str, fmt: str) -> tuple[DataFrame, T.StructType]:
    """The files as Spark reads them; schema resolved here, so unreadable files fail here."""
    try:
        if fmt == "parquet":
            # mergeSchema reads every footer: a corrupt file fails now, and no column that
            # only some files have is lost.
            df = spark.read.option("mergeSchema", "true").parquet(path)
        elif fmt == "json":
            df = spark.read.options(mode="PERMISSIVE", columnNameOfCorruptRecord=_CORRUPT).json(
                path
            )
        else:
            header = spark.read.options(header=True, inferSchema=False).csv(path).schema
            # enforceSchema=False checks every file's header against the first one, so
            # files with reordered columns fail loudly instead of being read misaligned.
            df = (
                spark.read.options(
                    header=True,
                    enforceSchema=_renamed_by_spark(header.names),
                    mode="PERMISSIVE",
                    columnNameOfCorruptRecord=_CORRUPT,
                )
                .schema(T.StructType([*header.fields, T.StructField(_CORRUPT, T.StringType())]))
                .csv(path)
            )
        schema = df.schema
    except _spark_errors() as exc:
        message = _spark_message(exc)
        hint = ""
        if "TIMESTAMP(NANOS" in str(exc):
            hint = (
                " Spark cannot read nanosecond timestamps (the pandas default): write with "
                "to_parquet(..., coerce_timestamps='us', allow_truncated_timestamps=True), or "
                "set spark.sql.legacy.parquet.nanosAsLong=true to read them as epoch "
                "nanoseconds, which load_telemetry parses."
            )
        raise InputError(
            f"load_telemetry: cannot read {path} as {fmt}: expected {_EXPECTED[fmt]}. "
            f"Spark says: {message}.{hint}"
        ) from exc
    if fmt == "json" and schema.names == [_CORRUPT]:
        raise InputError(
            f"load_telemetry: no line of {path} is a JSON object: expected {_EXPECTED[fmt]}"
        )
    return df, schema


def _aliases(canonical: str) -> set[str]:
    return {_norm(canonical), *(_norm(a) for a in BUILTIN_ALIASES[canonical])}


def _accepted_names(canonical: str) -> str:
    return ", ".join((canonical, *BUILTIN_ALIASES[canonical]))


def _resolve_mapping(columns: list[str], mapping: Mapping[str, str], path: str) -> dict[str, str]:
    """The output name of every source column, in file order: the user's mapping first, then
    for each canonical name the one column that matches it or one of its built-in aliases."""
    found = ", ".join(columns) or "none"
    for source in mapping:
        if source not in columns:
            raise InputError(
                f"load_telemetry: mapping names column {source!r}, which {path} does not "
                f"have; columns found: {found}"
            )
    by_target: dict[str, list[str]] = {}
    for source, target in mapping.items():
        by_target.setdefault(target, []).append(source)
    for canonical in CANONICAL_COLUMNS:
        if canonical not in by_target:
            matches = [c for c in columns if c not in mapping and _norm(c) in _aliases(canonical)]
            if matches:
                by_target[canonical] = matches
    for target, sources in by_target.items():
        if len(sources) > 1:
            listed = " and ".join(repr(s) for s in sources)
            raise InputError(
                f"load_telemetry: in {path}, columns {listed} would all become {target}; "
                f"pass mapping={{{sources[0]!r}: {target!r}}} to choose one"
            )
    renames = {sources[0]: target for target, sources in by_target.items()}
    names = {c: renames.get(c, c) for c in columns}

    seen: dict[str, str] = {}
    for source, target in names.items():
        other = seen.setdefault(target.lower(), source)
        if other != source:
            kept, renamed = (source, other) if names[other] != other else (other, source)
            raise InputError(
                f"load_telemetry: in {path}, column {renamed!r} would be renamed to "
                f"{target!r}, which is taken by column {kept!r}; map {kept!r} to another name "
                f"as well, for example mapping={{{renamed!r}: {target!r}, {kept!r}: "
                f"{kept + '_original'!r}}}"
            )
    for reserved in (REASON, SOURCE_FILE):
        if reserved in seen:
            raise InputError(
                f"load_telemetry: {path} has a column {seen[reserved]!r}, a name the quarantine "
                f"adds; rename it, for example mapping={{{seen[reserved]!r}: "
                f"{reserved + '_original'!r}}}"
            )
    for canonical in REQUIRED_COLUMNS:
        if canonical not in seen:
            raise InputError(
                f"load_telemetry: {path} has no {canonical} column; columns found: {found}. "
                f"Accepted names (case and '_' ignored): {_accepted_names(canonical)}; or pass "
                f"mapping={{'<your column>': {canonical!r}}}"
            )
    return names


def _check_types(fields: dict[str, T.DataType], names: dict[str, str], path: str) -> None:
    """Canonical columns must hold something the parsers understand."""
    text: tuple[type[T.DataType], ...] = (T.StringType, T.NumericType, T.NullType)
    for source, target in names.items():
        if target in _TEXT_COLUMNS:
            kinds, expected = text, "text or a number"
        elif target in _TIME_COLUMNS:
            kinds = (*text, T.TimestampType, T.TimestampNTZType)
            expected = "a timestamp, an epoch number or text"
        else:
            continue
        if not isinstance(fields[source], kinds):
            raise InputError(
                f"load_telemetry: in {path}, column {source!r} ({target}) is "
                f"{fields[source].simpleString()}; expected {expected}"
            )


def _from_epoch(value: Column) -> Column:
    """Epoch seconds, milliseconds, microseconds or nanoseconds (a decimal), told apart by
    magnitude; null outside the years 1 to 9999."""
    size = F.abs(value)
    scale = (
        F.when(size < 10**11, F.lit(Decimal(10**6)))
        .when(size < 10**14, F.lit(Decimal(1000)))
        .when(size < 10**17, F.lit(Decimal(1)))
        .otherwise(F.lit(Decimal("0.001")))
    )
    micros = F.round(value * scale)
    return F.when(
        micros.between(_MIN_MICROS, _MAX_MICROS), F.timestamp_micros(micros.try_cast("long"))
    )


def _is_missing(value: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, T.StringType):
        return value.isNull() | value.rlike(r"^\s*$")
    return value.isNull()


def _parse_time(value: Column, dtype: T.DataType) -> Column:
    """A UTC timestamp from a timestamp, an epoch number, or text: a number (epoch) or ISO 8601
    with a 4-digit year (no offset = UTC). Null when the value does not parse; never throws
    under ANSI mode.

    Each input is referenced only a few times: Spark inlines these expressions into one tree
    (and into the quarantine filter), so repeated references would multiply its size."""
    if isinstance(dtype, T.TimestampType):
        return value
    if isinstance(dtype, T.TimestampNTZType):
        return utc_wall_clock(value)
    if isinstance(dtype, T.NumericType):
        return _from_epoch(value.try_cast("decimal(38,9)"))
    if isinstance(dtype, T.NullType):
        return F.lit(None).cast("timestamp")
    iso = F.upper(value)
    return F.coalesce(
        F.when(value.rlike(_NUMBER), _from_epoch(value.try_cast("decimal(38,9)"))),
        F.when(
            iso.rlike(_ISO_DATE),
            F.when(iso.rlike(_HAS_ZONE), iso.try_cast("timestamp")).otherwise(
                utc_wall_clock(iso.try_cast("timestamp_ntz"))
            ),
        ),
    )


def _unparseable(name: str, value: Column) -> Column:
    return F.concat(F.lit(f"unparseable {name}: '"), value.cast("string"), F.lit("'"))


def _reason(
    fields: dict[str, T.DataType], fmt: str, data_columns: list[str], has_corrupt: bool
) -> Column:
    """Why a row is quarantined (null when it is valid): the first reason that applies."""
    send = column("send_time")
    rules: list[tuple[Column, Column]] = []
    if has_corrupt:
        rules.append((column(_CORRUPT).isNotNull(), F.lit(_MALFORMED[fmt])))
    if fmt == "csv":
        # With column pruning, Spark flags a CSV line as malformed only when the query reads
        # every column; so the reason reads them all (a row of empty cells has no send_time).
        everything = F.coalesce(*(column(c).cast("string") for c in data_columns))
        rules.append((everything.isNull(), F.lit("missing send_time")))
    rules.append((_is_missing(send, fields["send_time"]), F.lit("missing send_time")))
    rules.append((column(_PARSED + "send_time").isNull(), _unparseable("send_time", send)))
    if "scheduled_enqueue_time" in fields:
        scheduled = column("scheduled_enqueue_time")
        rules.append(
            (
                ~_is_missing(scheduled, fields["scheduled_enqueue_time"])
                & column(_PARSED + "scheduled_enqueue_time").isNull(),
                _unparseable("scheduled_enqueue_time", scheduled),
            )
        )
    reason = F.when(*rules[0])
    for condition, value in rules[1:]:
        reason = reason.when(condition, value)
    return reason


@dataclass(frozen=True)
class LoadedTelemetry:
    """Telemetry read by :func:`load_telemetry`.

    ``valid`` has the canonical columns (typed) and the other columns as read; ``quarantine``
    has every column as read plus ``reason`` and ``source_file``. ``mapping`` is the renames
    applied, source name to new name.
    """

    valid: DataFrame
    quarantine: DataFrame
    path: str
    format: str
    mapping: dict[str, str]
    _frame: DataFrame = field(repr=False, compare=False)

    def counts(self) -> dict[str, int]:
        """Rows read, valid and quarantined, in one Spark job."""
        row = self._frame.agg(
            F.count(F.lit(1)).alias("read"), F.count(REASON).alias("quarantined")
        ).first()
        read, quarantined = (0, 0) if row is None else (int(row[0]), int(row[1]))
        return {"read": read, "valid": read - quarantined, "quarantined": quarantined}

    def quarantine_reasons(self) -> pd.DataFrame:
        """Quarantined rows per reason category (the reason up to its first ':'), most first."""
        counts: pd.DataFrame = (
            self.quarantine.groupBy(F.substring_index(REASON, ":", 1).alias(REASON))
            .count()
            .toPandas()
        )
        ordered = counts.sort_values(["count", REASON], ascending=[False, True])
        return ordered.reset_index(drop=True)


def load_telemetry(
    spark: SparkSession,
    path: str,
    format: str | None = None,
    mapping: Mapping[str, str] | None = None,
    *,
    keep_source_file: bool = False,
) -> LoadedTelemetry:
    """Read message telemetry (one row per send) from a file or a folder of files.

    ``format`` is ``"parquet"``, ``"csv"`` or ``"json"`` (JSON Lines), guessed from the file
    names when omitted. ``mapping`` renames source columns, ``{"Id": "message_id"}``; columns
    it leaves out are matched to :data:`CANONICAL_COLUMNS` by name or by
    :data:`BUILTIN_ALIASES`. ``send_time`` and ``scheduled_enqueue_time`` accept timestamps,
    epoch numbers (s, ms, us or ns, by magnitude; also as text) and ISO 8601 text, without an
    offset meaning UTC. Rows with a missing or unparseable time, or a malformed line, go to
    the quarantine. ``keep_source_file`` adds the ``source_file`` column to the valid rows.
    """
    files = _list_files(spark, path)
    fmt = _resolve_format(path, files, format)
    df, schema = _read(spark, path, fmt)
    has_corrupt = _CORRUPT in schema.names
    columns = [c for c in schema.names if c != _CORRUPT]
    names = _resolve_mapping(columns, mapping or {}, path)
    source_fields = {f.name: f.dataType for f in schema.fields}
    _check_types(source_fields, names, path)

    raw = df.select(
        *(column(source).alias(target) for source, target in names.items()),
        *([column(_CORRUPT)] if has_corrupt else []),
        F.col("_metadata.file_path").alias(SOURCE_FILE),
    )
    fields = {target: source_fields[source] for source, target in names.items()}
    times = [c for c in _TIME_COLUMNS if c in fields]
    parsed = raw.select("*", *(_parse_time(column(c), fields[c]).alias(_PARSED + c) for c in times))
    frame = parsed.select(
        *(column(c) for c in raw.columns),
        *(column(_PARSED + c) for c in times),
        _reason(fields, fmt, list(names.values()), has_corrupt).alias(REASON),
    )

    present = [c for c in CANONICAL_COLUMNS if c in fields]
    order = present + [c for c in names.values() if c not in present]

    def typed(name: str) -> Column:
        if name in times:
            return column(_PARSED + name).alias(name)
        if name in _TEXT_COLUMNS:
            return column(name).cast("string").alias(name)
        return column(name)

    valid = frame.where(column(REASON).isNull()).select(
        *(typed(c) for c in order), *([column(SOURCE_FILE)] if keep_source_file else [])
    )
    quarantine = frame.where(column(REASON).isNotNull()).select(
        *(column(c) for c in order), column(REASON), column(SOURCE_FILE)
    )
    return LoadedTelemetry(
        valid=valid,
        quarantine=quarantine,
        path=path,
        format=fmt,
        mapping={s: t for s, t in names.items() if s != t},
        _frame=frame,
    )
