"""Where records end in a file still being written, and whether a file read whole is finished.

JSON Lines (OTLP traces among them) end a record at each newline. CSV ends one at a newline
outside quotes (a quoted field may hold newlines; a quote inside one is doubled, so the
quotes before a record's end are even in number). Parquet is finished when its footer is
whole; a compressed file when its stream decompresses to its end.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

#: File name endings of compressed files, and the codec that reads each.
CODECS = {".gz": "gzip", ".zst": "zstd", ".bz2": "bz2", ".lz4": "lz4"}
_NEWLINE, _QUOTE = ord("\n"), ord('"')


def codec_of(name: str) -> str | None:
    """The compression of a file by its name's ending, None when it has none."""
    return next((codec for end, codec in CODECS.items() if name.endswith(end)), None)


def records_end(data: bytes, csv: bool) -> int:
    """Where the last whole record in ``data`` ends (after its newline); 0 if none does.
    ``data`` starts at a record's start."""
    if not csv:
        return data.rfind(b"\n") + 1
    ends = _csv_ends(data)
    return int(ends[-1]) + 1 if len(ends) else 0


def first_end(data: bytes, csv: bool) -> int:
    """Where the first whole record in ``data`` ends (after its newline); 0 if none does."""
    if not csv:
        return data.find(b"\n") + 1
    ends = _csv_ends(data)
    return int(ends[0]) + 1 if len(ends) else 0


def _csv_ends(data: bytes) -> np.ndarray:
    """The newlines of ``data`` outside quotes."""
    raw = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(raw == _NEWLINE)
    quotes = np.cumsum(raw == _QUOTE)
    ends: np.ndarray = newlines[quotes[newlines] % 2 == 0]
    return ends


def finished(path: str, parquet: bool) -> bool:
    """Whether a file read whole is all there: a Parquet footer that reads, a compressed
    stream that ends. An uncompressed text file read whole is finished once it has stopped
    changing, which the caller judges."""
    try:
        if parquet:
            return _footer_reads(path)
        codec = codec_of(path)
        if codec is None:
            return True
        with pa.input_stream(path, compression=codec) as stream:
            while stream.read(1 << 24):
                pass
        return True
    except (OSError, pa.ArrowException, ValueError):
        return False


def _footer_reads(path: str) -> bool:
    size = os.path.getsize(path)
    if size < 12:
        return False
    with open(path, "rb") as file:
        file.seek(size - 4)
        if file.read(4) != b"PAR1":
            return False
    pq.read_metadata(path)
    return True
