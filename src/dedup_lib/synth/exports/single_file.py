"""One local file from text written piece by piece (gzip when its name ends in ``.gz``), for the
formats whose file is one document that Spark cannot write (a JSON array, a response body)."""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from dedup_lib.columns import column
from dedup_lib.errors import InputError, excerpt
from dedup_lib.telemetry.times import parse_time

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The most rows written into one document: the driver streams them, but a reader must parse
#: the whole document in one task, so larger exports belong in several files.
MAX_DOCUMENT_ROWS = 2_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dotnet_time(micros: int) -> str:
    """Epoch microseconds as Json.NET writes a UTC ``DateTime``: no trailing zeros, ``Z``."""
    moment = EPOCH + timedelta(microseconds=micros)
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def epoch_micros(frame: DataFrame, name: str) -> Column:
    """Column ``name`` of canonical telemetry (a timestamp, or text or a number as the
    generator and the loader accept them) as epoch microseconds: written from the driver, times
    then owe nothing to the session's or Python's time zone."""
    return F.unix_micros(parse_time(column(name), frame.schema[name].dataType))


def sends_in_time_order(frame: DataFrame, caller: str, path: str) -> Iterator[dict[str, Any]]:
    """The rows of canonical telemetry by send time (then ``event_id``), each with its times as
    epoch microseconds in ``__send`` and ``__scheduled``; an error at a send without a
    parseable ``send_time``, which these formats cannot hold."""
    times = [epoch_micros(frame, "send_time").alias("__send")]
    if "scheduled_enqueue_time" in frame.columns:
        times.append(epoch_micros(frame, "scheduled_enqueue_time").alias("__scheduled"))
    order = [column("send_time"), *([column("event_id")] if "event_id" in frame.columns else [])]
    for row in frame.orderBy(*order).select("*", *times).toLocalIterator():
        send = row.asDict()
        if send["__send"] is None:
            raise InputError(
                f"{caller}: a send (message_id {excerpt(send.get('message_id'))}) has no "
                f"parseable send_time, which {path} cannot hold; filter such rows out first"
            )
        yield send


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
    ``path`` ends in ``.gz``; through a temporary file, so a failure leaves no half file, with
    the permissions a new file gets (``mkstemp`` makes it private)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=folder, prefix=".dedup-write-")
    os.close(handle)
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(scratch, "wt", encoding="utf-8-sig" if bom else "utf-8", newline="") as out:
            for piece in pieces:
                out.write(piece)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(scratch, 0o666 & ~umask)
        os.replace(scratch, path)
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)
