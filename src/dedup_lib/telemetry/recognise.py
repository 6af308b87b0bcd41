"""Which structured format a telemetry file is, from its first 64 KiB, when its name only says
JSON or CSV: an OTLP trace file is ``traces.json`` to the Collector."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F

from dedup_lib.errors import InputError
from dedup_lib.spark import spark_errors
from dedup_lib.telemetry.files import InputFiles, local_path, spark_path
from dedup_lib.telemetry.formats import RECORD_FORMATS
from dedup_lib.telemetry.schema import format_hint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HEAD_BYTES = 64 * 1024


def file_head(spark: SparkSession, file: str) -> str:
    """The first :data:`HEAD_BYTES` of ``file`` as text, decompressed when ``.gz`` or ``.zst``
    (pyarrow's streams, as Spark's codecs decompress them): read here for
    a local file, through Spark's text reader (its first line) otherwise. Empty when it cannot
    be read: the load that follows names a damaged file."""
    local = local_path(file)
    if local is not None and os.path.exists(local):
        try:
            with pa.input_stream(local, compression="detect") as data:
                head: bytes = data.read(HEAD_BYTES)
        except (OSError, EOFError, pa.ArrowException):
            return ""
        return head.decode("utf-8", errors="replace")
    try:
        rows = (
            spark.read.text(spark_path(file))
            .select(F.substring("value", 1, HEAD_BYTES))
            .limit(1)
            .collect()
        )
    except spark_errors():
        return ""
    return str(rows[0][0] or "") if rows else ""


def recognise(spark: SparkSession, files: InputFiles, caller: str) -> str | None:
    """The one structured format whose ``recognise`` accepts the first file's head, else None;
    an error when several do."""
    if not files.files:
        return None
    head = file_head(spark, files.files[0])
    if not head:
        return None
    found = [name for name, fmt in RECORD_FORMATS.items() if fmt.recognise(head)]
    if len(found) > 1:
        raise InputError(
            f"{caller}: {files.name(files.files[0])} looks like {' and '.join(found)}; "
            f"pass {format_hint(found)}"
        )
    return found[0] if found else None
