"""``load_telemetry``: message telemetry from Parquet, CSV or JSON Lines, in the canonical schema,
or from a structured format (OpenTelemetry traces, :mod:`dedup_lib.telemetry.formats`).

Columns are renamed onto the canonical names (a user mapping, then the names the Azure SDKs
use), text properties become strings and times become UTC timestamps. Rows that cannot take
part in the replay go to a quarantine with a reason instead of being dropped; records of a
structured format that are not sends (spans of other systems) are counted and skipped with a
reason. So valid plus quarantined plus skipped is always the number of records read.
DataFrame API only: runs on Spark Connect too.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import column
from dedup_lib.errors import DedupLibError, InputError, excerpt, printable
from dedup_lib.spark import spark_errors, to_pandas
from dedup_lib.telemetry.files import InputFiles, file_key, list_input, spark_path
from dedup_lib.telemetry.formats import NOT_SEND, RECORD_FORMATS, SOURCE_FILE, RecordFormat
from dedup_lib.telemetry.recognise import recognise
from dedup_lib.telemetry.schema import BUILTIN_ALIASES, CANONICAL_COLUMNS, REQUIRED_COLUMNS
from dedup_lib.telemetry.sources import (
    CORRUPT,
    Source,
    chained,
    failed_file,
    read_failure,
    read_sources,
    resolve_format,
)
from dedup_lib.telemetry.times import epoch_number, never, parse_time, time_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column, DataFrame, SparkSession

_MALFORMED = {"csv": "malformed CSV line", "json": "malformed JSON line"}
_CALLER = "load_telemetry"

REASON = "reason"
_PARSED = "__dedup_parsed_"
_NEVER = "__dedup_never_"
_NUMBER = "__dedup_number_"
_WHY = "__dedup_why"
_SEEN = "__dedup_seen"
_TEXT = "__dedup_text_"
_EXCERPT = 60
_GUIDE = "docs/instrumentation.md"

_TEXT_COLUMNS = ("message_id", "entity", "partition_key", "session_id", "batch_id")
_TIME_COLUMNS = ("send_time", "scheduled_enqueue_time")


def _norm(name: str) -> str:
    return name.strip().lstrip("\ufeff").replace("_", "").lower()


def _listed(columns: list[str], most: int = 20) -> str:
    shown = ", ".join(printable(c[:_EXCERPT]) for c in columns[:most]) or "none"
    return shown + (f" and {len(columns) - most} more" if len(columns) > most else "")


def _aliases(canonical: str) -> set[str]:
    return {_norm(canonical), *(_norm(a) for a in BUILTIN_ALIASES[canonical])}


def _accepted_names(canonical: str) -> str:
    return ", ".join((canonical, *BUILTIN_ALIASES[canonical]))


def _resolve_mapping(columns: list[str], mapping: Mapping[str, str], path: str) -> dict[str, str]:
    """The output name of every source column, in file order: the user's mapping (of columns
    these ones have) first, then for each canonical name the one column that matches it or
    one of its built-in aliases."""
    found = _listed(columns)
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
                + (f"; {_GUIDE} says how to record it" if canonical == "message_id" else "")
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


def _is_missing(value: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, T.StringType):
        return value.isNull() | value.rlike(r"^\s*$")
    return value.isNull()


def _cut(value: Column) -> Column:
    """A value as a reason quotes it: as text, at most :data:`_EXCERPT` characters then
    ``...``."""
    text = value.cast("string")
    cut = F.when(F.length(text) > _EXCERPT, F.concat(F.substring(text, 1, _EXCERPT), F.lit("...")))
    return F.coalesce(cut, text)


def _unparseable(name: str, value: Column) -> Column:
    return F.concat(F.lit(f"unparseable {name}: '"), _cut(value), F.lit("'"))


def _reason(
    fields: dict[str, T.DataType], fmt: str, data_columns: list[str], has_corrupt: bool
) -> Column:
    """Why a row is quarantined (null when it is valid): the first reason that applies."""
    send = column("send_time")
    rules: list[tuple[Column, Column]] = []
    if has_corrupt:
        malformed = _MALFORMED.get(fmt, f"malformed {fmt} line")
        rules.append((column(CORRUPT).isNotNull(), F.lit(malformed)))
    if fmt == "csv":
        # With column pruning, Spark flags a CSV line as malformed only when the query reads
        # every column; so the reason reads them all (a row of empty cells has no send_time).
        everything = F.coalesce(*(column(c).cast("string") for c in data_columns))
        rules.append((everything.isNull(), F.lit("missing send_time")))
    rules.append((_is_missing(send, fields["send_time"]), F.lit("missing send_time")))
    rules.append(
        (
            column(_NEVER + "send_time").isNotNull(),
            F.concat(
                F.lit("send_time is a 'never' sentinel: "),
                column(_NEVER + "send_time"),
                F.lit(" ('"),
                _cut(send),
                F.lit("')"),
            ),
        )
    )
    rules.append((column(_PARSED + "send_time").isNull(), _unparseable("send_time", send)))
    if "scheduled_enqueue_time" in fields:
        scheduled = column("scheduled_enqueue_time")
        rules.append(
            (
                ~_is_missing(scheduled, fields["scheduled_enqueue_time"])
                & column(_NEVER + "scheduled_enqueue_time").isNull()
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
    """Telemetry read by :func:`load_telemetry`, with every row accounted for.

    ``valid`` has the canonical columns (typed) and the other columns as read; ``quarantine``
    has every column as read plus ``reason`` and ``source_file``. ``mapping`` is the renames
    applied, source name to new name (for a structured format: the source key each column was
    read from). ``format`` is the format read, named or recognised from the content.
    ``files`` has, per data file, the records read and how many of them are valid, quarantined
    and skipped (counted apart, and checked to add up when loading); ``skipped`` the hidden
    and bookkeeping entries not read, with why. ``not_sends`` has the records of a structured
    format that are not message sends (a span of another system, a send call whose messages
    are the records), with ``reason`` and ``source_file``; empty for the other formats.
    """

    valid: DataFrame
    quarantine: DataFrame
    path: str
    format: str
    mapping: dict[str, str]
    files: pd.DataFrame = field(repr=False, compare=False)
    skipped: dict[str, str] = field(default_factory=dict, compare=False)
    not_sends: DataFrame | None = field(default=None, repr=False, compare=False)
    #: Quarantined and skipped records per reason category, as counted when loading
    #: (``kind``, ``reason``, ``count``); None: counted from the frames when asked.
    reasons: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    def counts(self) -> dict[str, int]:
        """Records read, valid, quarantined and skipped as not sends, as counted when loading."""
        return {name: int(self.files[name].sum()) for name in _KINDS}

    def quarantine_reasons(self) -> pd.DataFrame:
        """Quarantined rows per reason category (the reason up to its first ':'), most first."""
        if self.reasons is not None:
            return _ordered(self.reasons, "quarantined")
        return _by_reason(self.quarantine)

    def not_send_reasons(self) -> pd.DataFrame:
        """Records skipped as not sends per reason category (``not a Service Bus span``),
        most first; empty for formats whose rows are all sends."""
        if self.reasons is not None:
            return _ordered(self.reasons, "skipped")
        if self.not_sends is None:
            return _ordered(pd.DataFrame(columns=["kind", REASON, "count"]), "skipped")
        return _by_reason(self.not_sends)


_KINDS = ("read", "valid", "quarantined", "skipped")


def _category(reason: Column) -> Column:
    """A reason's category: the reason up to its first ':'."""
    return F.substring_index(reason, ":", 1)


def _by_reason(frame: DataFrame) -> pd.DataFrame:
    counts: pd.DataFrame = to_pandas(frame.groupBy(_category(column(REASON)).alias(REASON)).count())
    return _ordered(counts.assign(kind="any"), "any")


def _ordered(reasons: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The categories of one kind of record, with their counts, most first."""
    of_kind = reasons[reasons["kind"] == kind]
    table = pd.DataFrame(
        {
            REASON: of_kind[REASON].astype(str).to_numpy(),
            "count": of_kind["count"].astype("int64").to_numpy(),
        }
    )
    ordered = table.sort_values(["count", REASON], ascending=[False, True])
    return ordered.reset_index(drop=True)


@dataclass(frozen=True)
class _Renamed:
    """One source with its columns renamed: canonical names, ``CORRUPT``, ``SOURCE_FILE``."""

    frame: DataFrame
    read: DataFrame
    fields: dict[str, T.DataType]
    names: dict[str, str]


def _renamed(source: Source, mapping: Mapping[str, str], where: str) -> _Renamed:
    schema = source.schema
    columns = [c for c in schema.names if c != CORRUPT]
    names = _resolve_mapping(columns, {s: t for s, t in mapping.items() if s in columns}, where)
    source_fields = {f.name: f.dataType for f in schema.fields}
    _check_types(source_fields, names, where)
    file_path = source.frame.metadataColumn("_metadata").getField("file_path").alias(SOURCE_FILE)
    frame = source.frame.select(
        *(column(s).alias(t) for s, t in names.items()),
        *([column(CORRUPT)] if CORRUPT in schema.names else []),
        file_path,
    )
    return _Renamed(
        frame=frame,
        read=source.frame.select(file_path),
        fields={t: source_fields[s] for s, t in names.items()},
        names=names,
    )


def _nested(schema: T.StructType, path: str) -> Column | None:
    """The value at ``path`` (``properties.MessageId``: a field of a struct column, or a key of
    a map column, at any depth), or None when ``path`` names nothing in ``schema``. Names may
    hold dots themselves (``customDimensions.servicebus.message.id``): the longest name that
    exists is taken at each level, and a map's key is the rest of the path."""
    parts = path.split(".")
    value: Column | None = None
    dtype: T.DataType = schema
    while parts:
        if isinstance(dtype, T.MapType) and value is not None:
            if not isinstance(dtype.keyType, T.StringType):
                return None
            return value.getItem(".".join(parts))
        if not isinstance(dtype, T.StructType):
            return None
        names = {f.name: f.dataType for f in dtype.fields}
        taken = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in names), 0)
        if not taken or (value is None and taken == len(parts)):
            return None
        name = ".".join(parts[:taken])
        value = column(name) if value is None else value.getField(name)
        dtype, parts = names[name], parts[taken:]
    return value


def _with_nested(source: Source, mapping: Mapping[str, str]) -> Source:
    """``source`` with a column for each mapping key that is a nested path, not a column:
    ``{"customDimensions.MessageId": "message_id"}`` reads that field of every row."""
    schema = source.schema
    added = {
        path: value
        for path in mapping
        if path not in schema.names and (value := _nested(schema, path)) is not None
    }
    if not added:
        return source
    frame = source.frame.select("*", *(v.alias(p) for p, v in added.items()))
    return Source(frame, source.files)


def _union(frames: list[DataFrame]) -> DataFrame:
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def _every_value(frame: DataFrame) -> Column:
    """A hash of every column of a row: so the tally decodes every value, and a file whose
    data pages are damaged fails while loading, not in the middle of an analysis."""
    values = [
        F.to_json(column(f.name)) if "map<" in f.dataType.simpleString() else column(f.name)
        for f in frame.schema.fields
        if f.name != SOURCE_FILE
    ]
    return F.xxhash64(*values) if values else F.lit(0)


@dataclass(frozen=True)
class _Tally:
    """Records per file (``read``, ``valid``, ``quarantined``, ``skipped``), per file the
    sends and the sends with a MessageId (structured formats only), and the quarantined and
    skipped records per reason category (``kind``, ``reason``, ``count``)."""

    table: pd.DataFrame
    sends: dict[str, tuple[int, int]]
    reasons: pd.DataFrame


def _tally(
    files: InputFiles,
    read: DataFrame,
    judged: DataFrame,
    fmt: str,
    expected: str | None = None,
    skipped: Column | None = None,
) -> _Tally:
    """Records per file: read (counted from what was read, nothing judged), valid, quarantined
    and skipped (each counted, none inferred from the others), in one Spark job; an error when
    a file's valid, quarantined and skipped records do not add up to its records read."""
    kind = F.when(column(REASON).isNull(), F.lit("valid")).otherwise(F.lit("quarantined"))
    why = F.when(column(REASON).isNotNull(), _category(column(REASON)))
    if skipped is not None:
        why = F.when(skipped, _category(column(NOT_SEND))).otherwise(why)
    kinds = [kind]
    # A structured format's records are built from fully parsed lines (its read counts them):
    # hashing every derived value again would cost several times the load and find nothing.
    seen = _every_value(judged) if skipped is None else F.lit(0).cast("long")
    if skipped is not None:
        kind = F.when(skipped, F.lit("skipped")).otherwise(kind)
        identified = F.trim(column("message_id").cast("string")) != ""
        kinds = [
            kind,
            F.when(~skipped & column(CORRUPT).isNull(), F.lit("send")),
            F.when(~skipped & column(CORRUPT).isNull() & identified, F.lit("identified")),
        ]
    every = F.explode(F.array_compact(F.array(*kinds)))
    nothing = F.lit(None).cast("string")
    parts = [
        read.select(column(SOURCE_FILE), F.lit("read"), nothing, F.lit(0).cast("long")),
        judged.select(
            column(SOURCE_FILE), every.alias("kind"), why.alias(_WHY), seen.alias(_SEEN)
        ).select(
            column(SOURCE_FILE),
            "kind",
            F.when(F.col("kind").isin("quarantined", "skipped"), F.col(_WHY)),
            _SEEN,
        ),
    ]
    try:
        rows = (
            _union([p.toDF(SOURCE_FILE, "kind", REASON, "seen") for p in parts])
            .groupBy(SOURCE_FILE, "kind", REASON)
            .agg(F.count(F.lit(1)), F.max("seen"))
            .collect()
        )
    except spark_errors() as exc:
        failure = read_failure(exc, files, fmt, _CALLER, expected)
        raise failure from chained(failure, exc)
    names = (*_KINDS, "send", "identified")
    counted: dict[str, dict[str, int]] = {file_key(f): dict.fromkeys(names, 0) for f in files.files}
    by_reason: dict[tuple[str, str], int] = {}
    for row in rows:
        counts = counted.setdefault(file_key(row[0]), dict.fromkeys(names, 0))
        counts[row[1]] += int(row[3])
        if row[1] in ("quarantined", "skipped"):
            by_reason[row[1], row[2]] = by_reason.get((row[1], row[2]), 0) + int(row[3])
    table = pd.DataFrame(
        [{"file": files.name(f), **{k: c[k] for k in _KINDS}} for f, c in counted.items()],
        columns=["file", *_KINDS],
    )
    lost = table[table["read"] != table["valid"] + table["quarantined"] + table["skipped"]]
    if len(lost):
        first = lost.iloc[0]
        raise DedupLibError(
            f"{_CALLER}: rows would be lost in {first.file}: {first.read} read, but "
            f"{first.valid} valid, {first.quarantined} quarantined and {first.skipped} skipped. "
            "This is a bug in dedup_lib; please report it with the file."
        )
    sends = {files.name(f): (c["send"], c["identified"]) for f, c in counted.items()}
    reasons = pd.DataFrame(
        [{"kind": k, REASON: r, "count": n} for (k, r), n in by_reason.items()],
        columns=["kind", REASON, "count"],
    )
    return _Tally(table, sends, reasons)


def _record_keys(record_format: RecordFormat, mapping: Mapping[str, str]) -> dict[str, str]:
    """The source key of every column a structured format reads: its defaults, then the
    user's mapping (source key -> column), which may also add columns of its own."""
    by_target: dict[str, list[str]] = {}
    for source, target in mapping.items():
        by_target.setdefault(target, []).append(source)
    for target, sources in by_target.items():
        if len(sources) > 1:
            listed = " and ".join(repr(s) for s in sources)
            raise InputError(f"{_CALLER}: mapping reads {target} from {listed}; pass one of them")
        if target in (REASON, SOURCE_FILE, NOT_SEND, CORRUPT):
            raise InputError(
                f"{_CALLER}: mapping names column {target!r}, which the loader adds; "
                f"choose another name for {sources[0]!r}"
            )
    return {**record_format.defaults, **{t: s[0] for t, s in by_target.items()}}


def _no_message_ids(
    sends: dict[str, tuple[int, int]], record_format: RecordFormat, key: str
) -> None:
    """An error for the first file that has sends but no MessageId on any of them."""
    for name, (count, identified) in sends.items():
        if count and not identified:
            raise InputError(
                f"{_CALLER}: {name} has {count:,} {record_format.name} send(s) but none "
                f"carries a MessageId under {key!r}; if yours are under another key, pass "
                f"mapping={{'<your key>': 'message_id'}}; {_GUIDE} says how to add it "
                "(the Azure SDKs do not)"
            )


def _no_sends(
    table: pd.DataFrame, record_format: RecordFormat, path: str, not_sends: DataFrame
) -> None:
    """An error when a structured format's files hold records but no message send at all:
    the wrong format was named, or the traces come from an app that sends none."""
    read, skipped = int(table["read"].sum()), int(table["skipped"].sum())
    if read and read == skipped:
        reasons = not_sends.groupBy(REASON).count().orderBy(F.desc("count")).limit(3).collect()
        seen = ", ".join(f"{excerpt(r[0])}: {r[1]:,}" for r in reasons)
        where = table["file"].iloc[0] if len(table) == 1 else printable(path)
        raise InputError(
            f"{_CALLER}: none of the {read:,} record(s) in {where} is a Service Bus "
            f"message send ({seen}), so there is nothing to replay; expected "
            f"{record_format.expected}; see {_GUIDE}"
        )


def _with_entity(frame: DataFrame, fields: dict[str, T.DataType], entity: str) -> DataFrame:
    """``entity`` where a row names none (or the file has no entity column at all)."""
    named = column("entity").cast("string")
    filled = F.coalesce(F.when(F.trim(named) != "", named), F.lit(entity))
    known = "entity" in fields
    fields["entity"] = T.StringType()
    if not known:
        return frame.select("*", F.lit(entity).alias("entity"))
    return frame.select(*(filled.alias(c) if c == "entity" else column(c) for c in frame.columns))


def load_telemetry(
    spark: SparkSession,
    path: str,
    format: str | None = None,
    mapping: Mapping[str, str] | None = None,
    *,
    entity: str | None = None,
    keep_source_file: bool = False,
) -> LoadedTelemetry:
    """Read message telemetry (one row per send) from a file or a folder of files.

    ``path`` is literal (``day[1].csv`` is that file, not a pattern); a folder is read with
    its subfolders, skipping hidden and bookkeeping entries (``_SUCCESS``, ``.crc``), and
    ``key=value`` folders become columns when every file sits in them. ``format`` is
    ``"parquet"``, ``"csv"`` or ``"json"`` (JSON Lines), guessed from the file names when
    omitted. ``mapping`` renames source columns, ``{"Id": "message_id"}``, or reads nested
    fields (``{"customDimensions.MessageId": "message_id"}``); columns it leaves out are
    matched to :data:`CANONICAL_COLUMNS` by name or by :data:`BUILTIN_ALIASES`.
    ``send_time`` and ``scheduled_enqueue_time`` accept timestamps, epoch numbers (s, ms, us
    or ns, by magnitude; also as text) and ISO 8601 text, without an offset meaning UTC.
    Rows with a missing, unparseable or "never" send time, or a malformed line, go to the
    quarantine. Every file is read once here, so a damaged one fails now, naming it.

    ``format`` may also name a structured format (:data:`RECORD_FORMATS`: ``"otlp"``); JSON
    or CSV files whose first 64 KiB one of them recognises are read as that format (then
    ``LoadedTelemetry.format`` names it). For these, ``mapping`` names the key a column is
    read from, ``{"my.partition.key": "partition_key"}``, over the format's defaults; records
    that are not sends are counted and skipped (``not_sends``), and a file with sends but no
    MessageId under the key looked at is an error that says where it looked.
    ``entity`` is the entity of rows whose file names none: it fills a missing or empty
    entity and never replaces one the file gives (a file with several entities keeps them).
    ``keep_source_file`` adds the ``source_file`` column to the valid rows.
    """
    files = list_input(spark, path, _CALLER)
    mapping = dict(mapping or {})
    if format is not None and format.lower() in RECORD_FORMATS:
        record_format: str | None = format.lower()
    else:
        fmt = resolve_format(files, format, _CALLER, tuple(RECORD_FORMATS))
        record_format = recognise(spark, files, _CALLER) if format is None else None
    if record_format is not None:
        return _load_records(
            spark, files, RECORD_FORMATS[record_format], mapping, entity, keep_source_file, path
        )
    plain = _plain(spark, files, fmt, mapping, entity, path)
    frame = plain.judged(plain.raw)
    tally = _tally(files, plain.read, frame, fmt)
    quarantine = plain.quarantine(frame)
    return LoadedTelemetry(
        valid=plain.valid(frame, keep_source_file),
        quarantine=quarantine,
        path=path,
        format=fmt,
        mapping=plain.renames,
        files=tally.table,
        skipped=dict(files.skipped),
        not_sends=quarantine.limit(0),
        reasons=tally.reasons,
    )


@dataclass(frozen=True)
class _Plain:
    """Parquet, CSV or JSON Lines files read and renamed (``raw``), with what judging their
    rows needs; ``read`` has one row (its file) per record read, nothing judged."""

    raw: DataFrame
    read: DataFrame
    fields: dict[str, T.DataType]
    fmt: str
    renames: dict[str, str]

    @property
    def data_columns(self) -> list[str]:
        return [c for c in self.raw.columns if c not in (CORRUPT, SOURCE_FILE)]

    def judged(self, raw: DataFrame) -> DataFrame:
        has_corrupt = CORRUPT in raw.columns
        return _judged(raw, self.fields, self.fmt, self.data_columns, has_corrupt)

    @property
    def order(self) -> list[str]:
        present = [c for c in CANONICAL_COLUMNS if c in self.fields]
        return present + [c for c in self.data_columns if c not in present]

    def valid(self, frame: DataFrame, keep_source_file: bool) -> DataFrame:
        times = [c for c in _TIME_COLUMNS if c in self.fields]

        def typed(name: str) -> Column:
            if name in times:
                return column(_PARSED + name).alias(name)
            if name in _TEXT_COLUMNS:
                return column(name).cast("string").alias(name)
            return column(name)

        return frame.where(column(REASON).isNull()).select(
            *(typed(c) for c in self.order), *([column(SOURCE_FILE)] if keep_source_file else [])
        )

    def quarantine(self, frame: DataFrame) -> DataFrame:
        return frame.where(column(REASON).isNotNull()).select(
            *(column(c) for c in self.order), column(REASON), column(SOURCE_FILE)
        )


def _plain(
    spark: SparkSession,
    files: InputFiles,
    fmt: str,
    mapping: Mapping[str, str],
    entity: str | None,
    path: str,
) -> _Plain:
    read = [_with_nested(s, mapping) for s in read_sources(spark, files, fmt, _CALLER)]
    every = list(dict.fromkeys(c for s in read for c in s.schema.names if c != CORRUPT))
    for source_name in mapping:
        if source_name not in every:
            raise InputError(
                f"{_CALLER}: mapping names column {excerpt(source_name)}, which "
                f"{printable(path)} does not have; columns found: {_listed(every)}"
            )
    sources = [
        _renamed(s, mapping, files.name(s.files[0]) if len(s.files) == 1 else printable(path))
        for s in read
    ]
    raw = _union([s.frame for s in sources])
    fields: dict[str, T.DataType] = {}
    for source in sources:
        for name, dtype in source.fields.items():
            fields.setdefault(name, dtype)
    if entity is not None:
        raw = _with_entity(raw, fields, entity)
    renames = {s: t for source in sources for s, t in source.names.items() if s != t}
    return _Plain(raw, _union([s.read for s in sources]), fields, fmt, renames)


@dataclass(frozen=True)
class PendingLoad:
    """Telemetry whose records are counted by the first action that reads ``valid``, not by
    a pass of the load's own: for a run that reads its input once (``dedup-lib simulate``).

    :meth:`loaded` gives the :class:`LoadedTelemetry` once that action ran: the same counts
    and reasons as :func:`load_telemetry`, with one row in ``files`` for all the files read
    (``(N files)``, or the file's name). :meth:`failure` turns that action's Spark error into
    the load's own error when it is a failure to read an input file. The structured formats
    are counted while loading, as :func:`load_telemetry` does.
    """

    valid: DataFrame
    path: str
    format: str
    file_count: int
    settle: Callable[[], LoadedTelemetry] = field(repr=False)
    files: InputFiles | None = field(default=None, repr=False)

    def loaded(self) -> LoadedTelemetry:
        """The counts, once an action has read ``valid``."""
        return self.settle()

    def failure(self, exc: BaseException) -> InputError | None:
        """The load's error for a Spark error of the action that read ``valid``: which input
        file could not be read, and why; None when the error names no input file."""
        if self.files is None or not _names_input(str(exc), self.files):
            return None
        return read_failure(exc, self.files, self.format, _CALLER)


def _names_input(text: str, files: InputFiles) -> bool:
    found = failed_file(text)
    return found is not None and file_key(found) in {file_key(f) for f in files.files}


def load_once(
    spark: SparkSession,
    path: str,
    format: str | None = None,
    mapping: Mapping[str, str] | None = None,
    *,
    entity: str | None = None,
) -> PendingLoad:
    """:func:`load_telemetry` without its pass: the records are counted by the first action
    that reads ``valid`` (a Spark observation), so a run that replays and writes the verdicts
    reads its input once. The same checks of names, types and formats run now; a damaged
    file fails that action instead (:meth:`PendingLoad.failure` names it)."""
    files = list_input(spark, path, _CALLER)
    mapping = dict(mapping or {})
    if format is not None and format.lower() in RECORD_FORMATS:
        record_format: str | None = format.lower()
    else:
        fmt = resolve_format(files, format, _CALLER, tuple(RECORD_FORMATS))
        record_format = recognise(spark, files, _CALLER) if format is None else None
    if record_format is not None:
        loaded = _load_records(
            spark, files, RECORD_FORMATS[record_format], mapping, entity, False, path
        )
        return PendingLoad(loaded.valid, path, loaded.format, len(files.files), lambda: loaded)
    plain = _plain(spark, files, fmt, mapping, entity, path)
    read_seen = Observation(f"dedup-read-{uuid.uuid4().hex}")
    judged_seen = Observation(f"dedup-judged-{uuid.uuid4().hex}")
    raw = plain.raw.observe(read_seen, F.count(F.lit(1)).alias("read"))
    categories = _categories(fmt)
    category = _category(column(REASON))
    frame = plain.judged(raw).observe(
        judged_seen,
        F.count_if(column(REASON).isNull()).alias("valid"),
        F.count_if(column(REASON).isNotNull()).alias("quarantined"),
        *(F.count_if(category == c).alias(f"reason {i}") for i, c in enumerate(categories)),
    )
    unobserved = plain.judged(plain.raw)

    def settle() -> LoadedTelemetry:
        read, judged = read_seen.get, judged_seen.get
        counts = {"read": int(read["read"]), "valid": int(judged["valid"])}
        counts["quarantined"] = int(judged["quarantined"])
        reasons = {c: int(judged[f"reason {i}"]) for i, c in enumerate(categories)}
        _check_counts(counts, reasons, path)
        name = (
            files.name(files.files[0]) if len(files.files) == 1 else f"({len(files.files)} files)"
        )
        table = pd.DataFrame([{"file": name, **counts, "skipped": 0}], columns=["file", *_KINDS])
        quarantine = plain.quarantine(unobserved)
        return LoadedTelemetry(
            valid=plain.valid(unobserved, False),
            quarantine=quarantine,
            path=path,
            format=fmt,
            mapping=plain.renames,
            files=table,
            skipped=dict(files.skipped),
            not_sends=quarantine.limit(0),
            reasons=pd.DataFrame(
                [{"kind": "quarantined", REASON: c, "count": n} for c, n in reasons.items() if n],
                columns=["kind", REASON, "count"],
            ),
        )

    return PendingLoad(plain.valid(frame, False), path, fmt, len(files.files), settle, files)


def _categories(fmt: str) -> tuple[str, ...]:
    """Every reason category :func:`_reason` can give, for files of ``fmt``."""
    return (
        _MALFORMED.get(fmt, f"malformed {fmt} line"),
        "missing send_time",
        "send_time is a 'never' sentinel",
        "unparseable send_time",
        "unparseable scheduled_enqueue_time",
    )


def _check_counts(counts: dict[str, int], reasons: dict[str, int], path: str) -> None:
    """An error when the records judged do not add up to the records read, or the
    quarantined ones to their reasons: rows would be lost without a word."""
    if counts["read"] != counts["valid"] + counts["quarantined"] or counts["quarantined"] != sum(
        reasons.values()
    ):
        raise DedupLibError(
            f"{_CALLER}: rows would be lost in {printable(path)}: {counts['read']} read, but "
            f"{counts['valid']} valid and {counts['quarantined']} quarantined "
            f"({sum(reasons.values())} with a known reason). This is a bug in dedup_lib; "
            "please report it with the file."
        )


def _load_records(
    spark: SparkSession,
    files: InputFiles,
    record_format: RecordFormat,
    mapping: Mapping[str, str],
    entity: str | None,
    keep_source_file: bool,
    path: str,
) -> LoadedTelemetry:
    """:func:`load_telemetry` for a structured format: its records judged like rows, those
    that are not sends counted and set apart."""
    fmt, expected = record_format.name, record_format.expected
    if not files.files:
        resolve_format(files, None, _CALLER)
    keys = _record_keys(record_format, mapping)
    try:
        raw = record_format.read(spark, [spark_path(f) for f in files.files])
        file_path = raw.metadataColumn("_metadata").getField("file_path").alias(SOURCE_FILE)
        records = record_format.records(raw.select("*", file_path), keys, entity)
        schema = records.schema
    except spark_errors() as exc:
        failure = read_failure(exc, files, fmt, _CALLER, expected)
        raise failure from chained(failure, exc)
    fields = {f.name: f.dataType for f in schema.fields if f.name in CANONICAL_COLUMNS}
    _check_types(fields, {c: c for c in fields}, printable(path))
    has_corrupt = CORRUPT in schema.names
    if not has_corrupt:
        records = records.select("*", F.lit(None).cast("string").alias(CORRUPT))
    hidden = (CORRUPT, SOURCE_FILE, NOT_SEND)
    data_columns = [c for c in schema.names if c not in hidden]
    frame = _judged(records, fields, fmt, data_columns, has_corrupt)
    skipped = column(NOT_SEND).isNotNull() & column(CORRUPT).isNull()

    present = [c for c in CANONICAL_COLUMNS if c in fields]
    order = present + [c for c in data_columns if c not in present]

    def typed(name: str) -> Column:
        if name in _TIME_COLUMNS:
            return column(_PARSED + name).alias(name)
        if name in _TEXT_COLUMNS:
            return column(name).cast("string").alias(name)
        return column(name)

    valid = frame.where(~skipped & column(REASON).isNull()).select(
        *(typed(c) for c in order), *([column(SOURCE_FILE)] if keep_source_file else [])
    )
    quarantine = frame.where(~skipped & column(REASON).isNotNull()).select(
        *(column(c) for c in order), column(REASON), column(SOURCE_FILE)
    )
    not_sends = frame.where(skipped).select(
        *(column(c) for c in order), column(NOT_SEND).alias(REASON), column(SOURCE_FILE)
    )
    tally = _tally(files, records.select(SOURCE_FILE), frame, fmt, expected, skipped)
    _no_message_ids(tally.sends, record_format, keys["message_id"])
    _no_sends(tally.table, record_format, path, not_sends)
    return LoadedTelemetry(
        valid=valid,
        quarantine=quarantine,
        path=path,
        format=fmt,
        mapping={source: name for name, source in keys.items()},
        files=tally.table,
        skipped=dict(files.skipped),
        not_sends=not_sends,
        reasons=tally.reasons,
    )


def _judged(
    raw: DataFrame,
    fields: dict[str, T.DataType],
    fmt: str,
    data_columns: list[str],
    has_corrupt: bool,
) -> DataFrame:
    """``raw`` with its times parsed, "never" sentinels named, and each row's ``reason``
    (null when valid). A "never" scheduled time means not scheduled: it becomes null."""
    times = [c for c in _TIME_COLUMNS if c in fields]
    numeric = [c for c in times if isinstance(fields[c], T.NumericType | T.StringType)]
    textual = [c for c in times if isinstance(fields[c], T.StringType)]
    staged = raw.select(
        "*",
        *(epoch_number(column(c), fields[c]).alias(_NUMBER + c) for c in numeric),
        *(time_text(column(c)).alias(_TEXT + c) for c in textual),
    )

    def number(name: str) -> Column | None:
        return column(_NUMBER + name) if name in numeric else None

    def text(name: str) -> Column | None:
        return column(_TEXT + name) if name in textual else None

    parsed = staged.select(
        "*",
        *(parse_time(column(c), fields[c], number(c), text(c)).alias(_PARSED + c) for c in times),
    )
    sentinels = parsed.select(
        "*",
        *(
            never(column(c), fields[c], column(_PARSED + c), number(c)).alias(_NEVER + c)
            for c in times
        ),
    )

    def cleared(name: str) -> Column:
        parsed_time = column(_PARSED + name)
        if name == "scheduled_enqueue_time":
            parsed_time = F.when(column(_NEVER + name).isNull(), parsed_time)
        return parsed_time.alias(_PARSED + name)

    return sentinels.select(
        *(column(c) for c in raw.columns),
        *(cleared(c) for c in times),
        _reason(fields, fmt, data_columns, has_corrupt).alias(REASON),
    )
