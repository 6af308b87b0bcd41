"""live.landing.records: where the last and the first whole record end in JSON Lines and in
CSV (quoted newlines inside a record), and when a file read whole is finished. No Spark."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_lib.live.landing.records import codec_of, finished, first_end, records_end


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("a.json.gz", "gzip"),
        ("a.csv.zst", "zstd"),
        ("a.bz2", "bz2"),
        ("a.lz4", "lz4"),
        ("a.json", None),
    ],
)
def test_the_codec_is_the_names_ending(name: str, codec: str | None) -> None:
    assert codec_of(name) == codec


def test_json_lines_end_at_each_newline() -> None:
    data = b'{"n": 1}\n{"n": 2}\n{"n": 3'
    assert records_end(data, csv=False) == len(b'{"n": 1}\n{"n": 2}\n')
    assert first_end(data, csv=False) == len(b'{"n": 1}\n')
    assert records_end(b'{"n": 1', csv=False) == first_end(b'{"n": 1', csv=False) == 0


def test_csv_records_end_at_newlines_outside_quotes() -> None:
    first = b'1,"two\nlines",x\n'
    second = b'2,"a ""quoted""\nvalue",y\n'
    cut = b'3,"open\n'
    data = first + second + cut
    assert first_end(data, csv=True) == len(first)
    assert records_end(data, csv=True) == len(first + second)
    assert records_end(cut, csv=True) == first_end(cut, csv=True) == 0


def test_parquet_is_finished_once_its_footer_reads(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), path)
    whole = path.read_bytes()
    assert finished(str(path), parquet=True)
    path.write_bytes(whole[: len(whole) // 2])
    assert not finished(str(path), parquet=True)
    path.write_bytes(b"PAR1")
    assert not finished(str(path), parquet=True)


def test_a_compressed_file_is_finished_once_its_stream_ends(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl.gz"
    whole = gzip.compress(b'{"n": 1}\n' * 1000)
    path.write_bytes(whole[:-8])
    assert not finished(str(path), parquet=False)
    path.write_bytes(whole)
    assert finished(str(path), parquet=False)
    (tmp_path / "plain.jsonl").write_bytes(b'{"n": 1')
    assert finished(str(tmp_path / "plain.jsonl"), parquet=False)
