"""``load_telemetry``: message telemetry from Parquet, CSV or JSON Lines, in the canonical schema,
or from a structured format (OpenTelemetry traces, :mod:`dedup_lib.telemetry.formats`).

Columns are renamed onto the canonical names (:mod:`~dedup_lib.telemetry.renaming`), text
properties become strings and times become UTC timestamps. Rows that cannot take part in the
replay go to a quarantine with a reason (:mod:`~dedup_lib.telemetry.quarantine`) instead of
being dropped; records of a structured format that are not sends (spans of other systems) are
counted and skipped with a reason. So valid plus quarantined plus skipped is always the number
of records read (:mod:`~dedup_lib.telemetry.tally`). One path for every format: the input is
opened (:func:`open_input`), given its reasons, then counted by a pass of its own
(:func:`load_telemetry`) or by the first action that reads it (:func:`load_once`). DataFrame
API only: runs on Spark Connect too.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import CORRUPT, FILE_ID, NOT_SEND, PARSED, column
from dedup_lib.errors import InputError, printable
from dedup_lib.spark.frames import observed
from dedup_lib.telemetry.files import InputFiles, PathText, file_key, list_input, spark_path
from dedup_lib.telemetry.formats import RECORD_FORMATS, SOURCE_FILE, RecordFormat
from dedup_lib.telemetry.loaded import KINDS, LoadedTelemetry
from dedup_lib.telemetry.quarantine import REASON, categories, category, with_reasons
from dedup_lib.telemetry.recognise import recognise
from dedup_lib.telemetry.renaming import check_types, record_keys, renamed_sources
from dedup_lib.telemetry.schema import CANONICAL_COLUMNS, LOADER, TEXT_COLUMNS, TIME_COLUMNS
from dedup_lib.telemetry.sources import (
    failed_file,
    read_failure,
    read_sources,
    reading,
    resolve_format,
)
from dedup_lib.telemetry.tally import (
    check_adds_up,
    no_sends,
    refuse_files_without_message_id,
    tally,
    union,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class OpenedInput:
    """An input read and renamed, its reasons not given yet: ``raw`` has the columns
    (``CORRUPT`` and ``SOURCE_FILE`` among them, and :data:`NOT_SEND` for a structured format),
    one row per record read. The one place that turns a frame with its reasons into the valid
    rows, the quarantine and the records that are not sends. ``corrupt``: whether the read
    can flag a record as malformed; ``message_id_key``: where a structured format read the
    MessageId."""

    files: InputFiles
    path: str
    raw: DataFrame
    fields: dict[str, T.DataType]
    fmt: str
    mapping: dict[str, str]
    corrupt: bool
    record_format: RecordFormat | None = None
    message_id_key: str = "message_id"
    #: A plain format's columns as the first files read have them, before renaming.
    source_schema: T.StructType | None = None
    #: What the read did that the user should know (:attr:`LoadedTelemetry.notes`).
    notes: tuple[str, ...] = ()

    @property
    def data_columns(self) -> list[str]:
        """The columns as read: not the loader's own (:data:`NOT_SEND` is a structured
        format's; a plain file's column of that name is data)."""
        own = (CORRUPT, SOURCE_FILE, FILE_ID, *((NOT_SEND,) if self.record_format else ()))
        return [c for c in self.raw.columns if c not in own]

    @property
    def order(self) -> list[str]:
        present = [c for c in CANONICAL_COLUMNS if c in self.fields]
        return present + [c for c in self.data_columns if c not in present]

    @property
    def skipped(self) -> Column | None:
        """True for a record that is not a send; None for formats whose rows all are."""
        if self.record_format is None:
            return None
        return column(NOT_SEND).isNotNull() & column(CORRUPT).isNull()

    def with_reasons(self, raw: DataFrame) -> DataFrame:
        return with_reasons(raw, self.fields, self.fmt, self.data_columns, self.corrupt)

    def valid(self, frame: DataFrame, keep_source_file: bool) -> DataFrame:
        def typed(name: str) -> Column:
            if name in TIME_COLUMNS:
                return column(PARSED + name).alias(name)
            if name in TEXT_COLUMNS:
                return column(name).cast("string").alias(name)
            return column(name)

        return (
            self._sends(frame)
            .where(column(REASON).isNull())
            .select(
                *(typed(c) for c in self.order),
                *([column(SOURCE_FILE)] if keep_source_file else []),
            )
        )

    def quarantine(self, frame: DataFrame) -> DataFrame:
        return (
            self._sends(frame)
            .where(column(REASON).isNotNull())
            .select(*(column(c) for c in self.order), column(REASON), column(SOURCE_FILE))
        )

    def not_sends(self, frame: DataFrame, quarantine: DataFrame | None = None) -> DataFrame:
        """A structured format's records that are not sends; for another, none (as columned
        as ``quarantine``, the frame's quarantine if already built)."""
        if self.skipped is None:
            return (self.quarantine(frame) if quarantine is None else quarantine).limit(0)
        return frame.where(self.skipped).select(
            *(column(c) for c in self.order), column(NOT_SEND).alias(REASON), column(SOURCE_FILE)
        )

    def _sends(self, frame: DataFrame) -> DataFrame:
        return frame if self.skipped is None else frame.where(~self.skipped)

    def loaded(
        self, frame: DataFrame, files: pd.DataFrame, reasons: pd.DataFrame, keep_source_file: bool
    ) -> LoadedTelemetry:
        """What the load gives, from ``frame``, with its reasons, and its counts."""
        quarantine = self.quarantine(frame)
        return LoadedTelemetry(
            valid=self.valid(frame, keep_source_file),
            quarantine=quarantine,
            path=self.path,
            format=self.fmt,
            mapping=self.mapping,
            files=files,
            ignored=dict(self.files.ignored),
            not_sends=self.not_sends(frame, quarantine),
            reasons=reasons,
            notes=self.notes,
        )


def open_input(
    spark: SparkSession,
    path: str,
    format: str | None,
    mapping: Mapping[str, str] | None,
    entity: str | None,
    files: InputFiles | None = None,
) -> OpenedInput:
    """The input at ``path`` listed (``files``, when the caller has listed it), its format
    named or recognised, and read."""
    files = files if files is not None else list_input(spark, path, LOADER)
    mapping = dict(mapping or {})
    if format is not None and format.lower() in RECORD_FORMATS:
        return _records(spark, files, RECORD_FORMATS[format.lower()], mapping, entity, path)
    fmt = resolve_format(files, format, LOADER, tuple(RECORD_FORMATS))
    recognised = recognise(spark, files, LOADER) if format is None else None
    if recognised is not None:
        return _records(spark, files, RECORD_FORMATS[recognised], mapping, entity, path)
    return _plain(spark, files, fmt, mapping, entity, path)


def _plain(
    spark: SparkSession,
    files: InputFiles,
    fmt: str,
    mapping: Mapping[str, str],
    entity: str | None,
    path: str,
) -> OpenedInput:
    """Parquet, CSV or JSON Lines files, read and renamed."""
    read_as = read_sources(spark, files, fmt, LOADER)
    sources = renamed_sources(read_as, mapping, files, path, file_ids=True)
    raw = union([s.frame for s in sources])
    fields: dict[str, T.DataType] = {}
    for source in sources:
        for name, dtype in source.fields.items():
            fields.setdefault(name, dtype)
    if entity is not None:
        raw = with_entity(raw, fields, entity)
    renames = {s: t for source in sources for s, t in source.names.items() if s != t}
    first = read_as[0].schema if read_as else None
    notes = tuple(note for source in read_as for note in source.notes)
    corrupt = CORRUPT in raw.columns
    return OpenedInput(
        files, path, raw, fields, fmt, renames, corrupt, source_schema=first, notes=notes
    )


def _records(
    spark: SparkSession,
    files: InputFiles,
    record_format: RecordFormat,
    mapping: Mapping[str, str],
    entity: str | None,
    path: str,
) -> OpenedInput:
    """A structured format's files, read as one record per message or span."""
    if not files.files:
        resolve_format(files, None, LOADER)
    keys = record_keys(record_format, mapping)
    with reading(files, record_format.name, LOADER, record_format.expected):
        raw = record_format.read(spark, [spark_path(f) for f in files.files])
        file_path = raw.metadataColumn("_metadata").getField("file_path").alias(SOURCE_FILE)
        read = raw.select("*", file_path)
        records = record_format.records(read, keys, entity, keep=True)
        schema = records.schema
    fields = {f.name: f.dataType for f in schema.fields if f.name in CANONICAL_COLUMNS}
    check_types(fields, {c: c for c in fields}, printable(path))
    corrupt = CORRUPT in schema.names
    if not corrupt:
        records = records.select("*", F.lit(None).cast("string").alias(CORRUPT))
    return OpenedInput(
        files,
        path,
        raw=records,
        fields=fields,
        fmt=record_format.name,
        mapping={source: name for name, source in keys.items()},
        corrupt=corrupt,
        record_format=record_format,
        message_id_key=keys["message_id"],
    )


def with_entity(frame: DataFrame, fields: dict[str, T.DataType], entity: str) -> DataFrame:
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
    path: PathText,
    format: str | None = None,
    mapping: Mapping[str, str] | None = None,
    *,
    entity: str | None = None,
    keep_source_file: bool = False,
) -> LoadedTelemetry:
    """Read message telemetry (one row per send) from a file or a folder of files.

    Every file is read once here, so a damaged one fails now, naming it. Each row ends up
    valid or in the quarantine with a reason; records of a structured format that are not
    sends are counted and skipped.

    Parameters
    ----------
    spark : SparkSession
        A classic or Spark Connect session (:func:`dedup_lib.get_spark`).
    path : str or os.PathLike
        A file, or a folder read with its subfolders (hidden and bookkeeping entries such as
        ``_SUCCESS`` and ``.crc`` skipped; ``key=value`` folders become columns when every
        file sits in them). Literal: ``day[1].csv`` is that file, not a pattern.
    format : str, optional
        ``"parquet"``, ``"csv"``, ``"json"`` (JSON Lines), or a structured format of
        :data:`RECORD_FORMATS` (``"otlp"``, ``"app-insights"``, ``"sb-explorer"``). Guessed
        when omitted: from the file names, and for JSON or CSV from the first 64 KiB, which a
        structured format may recognise (``LoadedTelemetry.format`` then names it).
    mapping : Mapping[str, str], optional
        Source column to canonical column, ``{"Id": "message_id"}``, or a nested field,
        ``{"customDimensions.MessageId": "message_id"}``; for a structured format, the key a
        column is read from, ``{"my.partition.key": "partition_key"}``. Columns it leaves
        out are matched to :data:`CANONICAL_COLUMNS` by name or by :data:`BUILTIN_ALIASES`.
    entity : str, optional
        The entity of rows whose file names none: fills a missing or empty entity, never
        replaces one the file gives.
    keep_source_file : bool, default False
        Add the ``source_file`` column to the valid rows.

    Returns
    -------
    LoadedTelemetry
        ``valid`` (the sends, canonical columns: ``send_time`` a UTC timestamp from
        timestamps, epoch numbers in any unit or ISO 8601 text), ``quarantine`` (each row
        with its ``reason``), ``counts()`` and ``format``.

    Raises
    ------
    MissingFileError
        ``path`` does not exist.
    InputError
        A file that cannot be read as ``format``, a mapping that names no column, a
        structured format's sends without a MessageId under the key looked at: the message
        names the file, the column or the key, and what was expected.

    Examples
    --------
    A CSV file with the Azure SDK's names, a time as epoch milliseconds and one that does
    not read:

    >>> from dedup_lib import get_spark, load_telemetry
    >>> with open("sends.csv", "w") as file:
    ...     _ = file.write("EntityPath,MessageId,EnqueuedTimeUtc\\n"
    ...                    "orders,order-1,2026-11-03T20:00:00Z\\n"
    ...                    "orders,order-1,1793736030000\\n"
    ...                    "orders,order-2,yesterday\\n")
    >>> loaded = load_telemetry(get_spark(), "sends.csv")
    >>> loaded.counts()
    {'read': 3, 'valid': 2, 'quarantined': 1, 'skipped': 0}
    >>> loaded.valid.select("entity", "message_id", "send_time").show()
    +------+----------+-------------------+
    |entity|message_id|          send_time|
    +------+----------+-------------------+
    |orders|   order-1|2026-11-03 20:00:00|
    |orders|   order-1|2026-11-03 20:00:30|
    +------+----------+-------------------+
    <BLANKLINE>
    >>> print(loaded.quarantine.first().reason)
    unparseable send_time: 'yesterday'
    """
    opened = open_input(spark, os.fspath(path), format, mapping, entity)
    return _counted(opened, keep_source_file)


def _counted(opened: OpenedInput, keep_source_file: bool) -> LoadedTelemetry:
    """The input given its reasons and counted by a pass of its own, which reads every file."""
    expected = opened.record_format.expected if opened.record_format else None
    if opened.record_format is not None:
        opened = _materialized(opened, expected)
    frame = opened.with_reasons(opened.raw)
    counts = tally(opened.files, frame, opened.fmt, expected, opened.skipped)
    if opened.record_format is not None:
        refuse_files_without_message_id(counts.sends, opened.record_format, opened.message_id_key)
        no_sends(counts.table, opened.record_format, opened.path, opened.not_sends(frame))
    return opened.loaded(frame, counts.table, counts.reasons, keep_source_file)


def _materialized(opened: OpenedInput, expected: str | None) -> OpenedInput:
    """A structured format's records built once and kept (``localCheckpoint``): they come
    from parsed JSON or CSV joined with itself (an OTLP message span with the send call
    that links to it), which every later read would parse again, for the count of what was
    read, the count of what each record became, and each action on the valid rows
    (docs/decisions/query-shapes.md)."""
    with reading(opened.files, opened.fmt, LOADER, expected):
        records = opened.raw.localCheckpoint()
    return replace(opened, raw=records)


@dataclass(frozen=True)
class PendingLoad:
    """Telemetry whose records are counted by the first action that reads ``valid``, not by
    a pass of the load's own: for a run that reads its input once (``dedup-lib simulate``).

    :meth:`loaded` gives the :class:`LoadedTelemetry` once that action ran: the same counts
    and reasons as :func:`load_telemetry`, with one row in ``files`` for all the files read
    (``(N files)``, or the file's name); where Spark lost the counts it observed (no row
    valid: :func:`~dedup_lib.spark.frames.observed`), counted by a pass of their own, a row per
    file as :func:`load_telemetry` gives them. :meth:`failure` turns that action's Spark error into
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
        return read_failure(exc, self.files, self.format, LOADER)


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
    that reads ``valid`` (Spark observations), so a run that replays and writes the verdicts
    reads its input once. The same checks of names, types and formats run now; a damaged
    file fails that action instead (:meth:`PendingLoad.failure` names it)."""
    opened = open_input(spark, path, format, mapping, entity)
    count = len(opened.files.files)
    if opened.record_format is not None:
        loaded = _counted(opened, False)
        return PendingLoad(loaded.valid, path, loaded.format, count, lambda: loaded)
    read_seen = Observation(f"dedup-read-{uuid.uuid4().hex}")
    fates_seen = Observation(f"dedup-fates-{uuid.uuid4().hex}")
    reasons = categories(opened.fmt)
    why = category(column(REASON))
    frame = opened.with_reasons(opened.raw.observe(read_seen, F.count(F.lit(1)).alias("read")))
    frame = frame.observe(
        fates_seen,
        F.count_if(column(REASON).isNull()).alias("valid"),
        F.count_if(column(REASON).isNotNull()).alias("quarantined"),
        *(F.count_if(why == c).alias(f"reason {i}") for i, c in enumerate(reasons)),
    )

    def settle() -> LoadedTelemetry:
        read, seen = observed(read_seen), observed(fates_seen)
        if read is None or seen is None:  # lost by Spark with a plan that kept no row
            return _counted(opened, False)
        counts = {"read": int(read["read"]), "valid": int(seen["valid"])}
        counts |= {"quarantined": int(seen["quarantined"]), "skipped": 0}
        by_reason = {c: int(seen[f"reason {i}"]) for i, c in enumerate(reasons)}
        check_adds_up(printable(path), counts, sum(by_reason.values()))
        name = opened.files.name(opened.files.files[0]) if count == 1 else f"({count} files)"
        table = pd.DataFrame([{"file": name, **counts}], columns=["file", *KINDS])
        rows = [{"kind": "quarantined", REASON: c, "count": n} for c, n in by_reason.items() if n]
        found = pd.DataFrame(rows, columns=["kind", REASON, "count"])
        return opened.loaded(opened.with_reasons(opened.raw), table, found, False)

    return PendingLoad(opened.valid(frame, False), path, opened.fmt, count, settle, opened.files)
