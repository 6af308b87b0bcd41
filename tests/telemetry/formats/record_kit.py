"""What the loader does with a :class:`RecordFormat` (until ``load_telemetry`` dispatches to
one): read the files, add ``source_file``, ask for the records; then the sends, with their
times parsed, as :func:`dedup_lib.detect_duplicates` takes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dedup_lib.columns import CORRUPT, NOT_SEND
from dedup_lib.telemetry.formats import RecordFormat
from dedup_lib.telemetry.times import parse_time

CANONICAL_TEXT = ("message_id", "entity", "partition_key", "session_id", "batch_id")


def records(
    spark: Any,
    fmt: RecordFormat,
    paths: Sequence[Path],
    overrides: Mapping[str, str] | None = None,
    entity: str | None = None,
) -> DataFrame:
    """``fmt``'s records of ``paths``, as the loader would get them."""
    raw = fmt.read(spark, [str(p) for p in paths])
    path = raw.metadataColumn("_metadata").getField("file_path")
    raw = raw.select("*", path.alias("source_file"))
    return fmt.records(raw, {**fmt.defaults, **(overrides or {})}, entity)


def sends(frame: DataFrame) -> DataFrame:
    """The records that are sends and not damaged, in canonical types."""
    kept = frame.where(F.col(NOT_SEND).isNull())
    if CORRUPT in frame.columns:
        kept = kept.where(F.col(CORRUPT).isNull())
    return canonical(kept)


def canonical(frame: DataFrame) -> DataFrame:
    """The canonical columns of ``frame``, times parsed as the loader parses them."""
    fields = {f.name: f.dataType for f in frame.schema.fields}
    times = [
        parse_time(F.col(c), fields[c]).alias(c)
        for c in ("send_time", "scheduled_enqueue_time")
        if c in fields
    ]
    text = [F.col(c).cast("string").alias(c) for c in CANONICAL_TEXT if c in fields]
    order = [F.col("event_id")] if "event_id" in fields else []
    return frame.select(*text, *times, *order)


def micros(moment: str) -> int:
    """Epoch microseconds of an ISO 8601 instant (no offset = UTC)."""
    parsed = datetime.fromisoformat(moment)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return (parsed - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def rows(frame: DataFrame, *columns: str) -> list[tuple[Any, ...]]:
    """``columns`` of every row, times as epoch microseconds, sorted."""
    fields = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    picked = [
        F.unix_micros(F.col(c)).alias(c) if fields[c] == "timestamp" else F.col(c) for c in columns
    ]
    return sorted((tuple(r) for r in frame.select(*picked).collect()), key=repr)
