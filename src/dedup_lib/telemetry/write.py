"""``write_telemetry``: telemetry to Parquet, CSV or JSON Lines, under the names a source uses."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING

import pyarrow as pa

from dedup_lib.columns import column
from dedup_lib.errors import ExistingFileError, InputError
from dedup_lib.telemetry.files import output_path
from dedup_lib.telemetry.schema import FORMAT_NAMES, FORMATS, NAMING_STYLES, TEXT_TIME_FORMAT

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame

__all__ = ["NAMING_STYLES", "write_telemetry"]


def write_telemetry(
    df: DataFrame,
    path: str,
    format: str = "parquet",
    *,
    names: str = "canonical",
    single_file: bool = False,
    overwrite: bool = False,
    order_by: tuple[str, ...] = (),
) -> None:
    """Write telemetry as Parquet (zstd), CSV with a header or JSON Lines (gzip when ``path``
    ends in ``.gz``), with the column names of ``names`` (:data:`NAMING_STYLES`).

    Spark writes a folder of part files at ``path``; ``single_file=True`` writes one file
    named ``path`` instead (through one task, for samples; ``path`` must be on the local disk).
    On a remote Spark Connect server the cluster writes the folder, on its own file system; a
    relative ``path`` is made absolute here first (:func:`dedup_lib.telemetry.files.output_path`).
    ``order_by`` sorts the rows of each file.
    Times in text files keep their microseconds."""
    fmt = _checked(path, format, names, overwrite)
    renames = NAMING_STYLES[names]
    out = df.select(*(column(c).alias(renames.get(c, c)) for c in df.columns))
    if single_file:
        out = out.coalesce(1)
    if order_by:
        # Within partitions: no sampling job; with single_file there is one partition.
        out = out.sortWithinPartitions(*(column(renames.get(c, c)) for c in order_by))
    writer = out.write.mode("overwrite").format(fmt)
    if fmt == "parquet":
        writer = writer.option("compression", "zstd")
    else:
        writer = writer.option("timestampFormat", TEXT_TIME_FORMAT)
        if path.endswith(".gz"):
            writer = writer.option("compression", "gzip")
    if fmt == "csv":
        writer = writer.option("header", True)
    if single_file:
        one_file(writer.save, path, "write_telemetry")
    else:
        writer.save(output_path(df.sparkSession, path))


def _checked(path: str, format: str, names: str, overwrite: bool) -> str:
    """The format's reader name; an error for an unknown format or naming style, or a
    ``path`` that exists when it may not be replaced."""
    fmt = FORMAT_NAMES.get(format.lower())
    if fmt is None:
        raise InputError(
            f"write_telemetry: unknown format {format!r}; supported: {', '.join(FORMATS)}"
        )
    if names not in NAMING_STYLES:
        raise InputError(
            f"write_telemetry: unknown naming style {names!r}; "
            f"supported: {', '.join(NAMING_STYLES)}"
        )
    if os.path.exists(path) and not overwrite:
        raise ExistingFileError(
            f"write_telemetry: {path} exists; pass overwrite=True to replace it"
        )
    return fmt


def one_file(save: Callable[[str], None], path: str, caller: str) -> None:
    """One local file at ``path`` from what ``save`` writes (Spark's folder of one part file),
    written beside ``path`` then moved there; compressed with zstd when ``path`` ends in
    ``.zst`` (Spark reads zstd text but has no codec to write it)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".dedup-write-") as scratch:
        target = os.path.join(scratch, "out")
        save(target)
        parts = [n for n in os.listdir(target) if n.startswith("part-")]
        if len(parts) != 1:
            raise RuntimeError(
                f"{caller}: expected one part file for {path}, Spark wrote {len(parts)}"
            )
        part = os.path.join(target, parts[0])
        if path.endswith(".zst"):
            packed = os.path.join(scratch, "packed")
            with (
                pa.input_stream(part) as source,
                pa.output_stream(packed, compression="zstd") as out,
            ):
                while chunk := source.read(1 << 20):
                    out.write(chunk)
            part = packed
        if os.path.isdir(path):
            shutil.rmtree(path)
        os.replace(part, path)
