"""One local file from text written piece by piece (gzip when its name ends in ``.gz``), for the
formats whose file is one document that Spark cannot write (a JSON array, a response body)."""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from dedup_lib.columns import column
from dedup_lib.errors import InputError
from dedup_lib.telemetry.times import parse_time

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The most rows written into one document: the driver streams them, but a reader must parse
#: the whole document in one task, so larger exports belong in several files.
MAX_DOCUMENT_ROWS = 2_000_000


def epoch_micros(frame: DataFrame, name: str) -> Column:
    """Column ``name`` of canonical telemetry (a timestamp, or text or a number as the
    generator and the loader accept them) as epoch microseconds: written from the driver, times
    then owe nothing to the session's or Python's time zone."""
    return F.unix_micros(parse_time(column(name), frame.schema[name].dataType))


def check_size(frame: DataFrame, caller: str, path: str) -> int:
    """The rows of ``frame``; an error naming ``path`` when one document cannot hold them."""
    rows = frame.count()
    if rows > MAX_DOCUMENT_ROWS:
        raise InputError(
            f"{caller}: {rows:,} rows are too many for one document ({path}); at most "
            f"{MAX_DOCUMENT_ROWS:,}: write a filtered part per file"
        )
    return rows


def write_text(path: str, pieces: Iterable[str], *, bom: bool = False) -> None:
    """Write ``pieces`` to ``path`` as UTF-8 (with a byte-order mark when ``bom``), gzip when
    ``path`` ends in ``.gz``; through a temporary file, so a failure leaves no half file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=folder, prefix=".dedup-write-")
    os.close(handle)
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(scratch, "wt", encoding="utf-8-sig" if bom else "utf-8", newline="") as out:
            for piece in pieces:
                out.write(piece)
        os.replace(scratch, path)
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)
