"""live.landing.chunks: the planned bytes copied out as files of their own, a finished file
linked rather than copied, each piece found by its file's identity however it was renamed, and
a file gone or cut since it was planned refused. No Spark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collector_kit import Collector
from dedup_lib.live.landing.chunks import MovedError, chunk_path, remove_chunks, write_chunks
from dedup_lib.live.landing.ledger import Chunk, Piece, Reading, file_id, plan


def _piece(path: Path, start: int, end: int) -> Piece:
    return Piece(file_id(path.stat()), str(path), start, end)


def test_each_chunk_is_its_pieces_bytes_in_order_named_by_its_place(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"0123456789")
    b.write_bytes(b"abcdef")
    chunks = [
        Chunk("a.jsonl", (_piece(a, 2, 5), _piece(b, 0, 3)), ".jsonl"),
        Chunk("b.jsonl", (_piece(b, 3, 6),), ".jsonl"),
    ]
    paths = write_chunks(str(tmp_path / "out"), chunks)
    assert paths == [chunk_path(str(tmp_path / "out"), i, c) for i, c in enumerate(chunks)]
    assert [os.path.basename(p) for p in paths] == ["chunk-000000.jsonl", "chunk-000001.jsonl"]
    assert [Path(p).read_bytes() for p in paths] == [b"234abc", b"def"]
    remove_chunks(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    remove_chunks(str(tmp_path / "out"))


def test_a_whole_finished_file_is_linked_not_copied(tmp_path: Path) -> None:
    done = tmp_path / "s.parquet"
    done.write_bytes(b"PAR1 whole PAR1")
    chunk = Chunk("s.parquet", (_piece(done, 0, done.stat().st_size),), ".parquet", whole=True)
    (path,) = write_chunks(str(tmp_path / "out"), [chunk])
    assert os.path.samefile(path, done)


def test_a_file_gone_or_cut_since_planning_is_refused(tmp_path: Path) -> None:
    landed = tmp_path / "a.jsonl"
    landed.write_bytes(b"0123456789")
    cut = Chunk("a.jsonl", (_piece(landed, 0, 20),), ".jsonl")
    with pytest.raises(MovedError, match="ended before byte 20"):
        write_chunks(str(tmp_path / "out"), [cut])
    gone = Chunk("a.jsonl", (_piece(landed, 0, 10),), ".jsonl")
    landed.unlink()
    with pytest.raises(MovedError, match="went between planning and reading"):
        write_chunks(str(tmp_path / "out"), [gone])


def lines(count: int, size: int = 300, start: int = 0) -> list[bytes]:
    """JSON lines of about ``size`` bytes, each naming its number."""
    return [
        b'{"n": %d, "pad": "%s"}' % (i, b"x" * (size - 20)) for i in range(start, start + count)
    ]


def test_a_file_renamed_between_planning_and_copying_is_found_by_its_identity(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "landing"
    folder.mkdir()
    collector = Collector(str(folder / "traces.json"), max_bytes=10_000)
    written = lines(20, 400)
    for line in written[:10]:
        collector.export(line)
    collector.flush()
    planned = plan(str(folder), {}, Reading("json"), 0)
    for line in written[10:]:  # rotates: the planned file is now a backup
        collector.export(line)
    collector.close()
    (path,) = write_chunks(str(tmp_path / "chunks"), planned.chunks)
    assert Path(path).read_bytes().split(b"\n")[:-1] == written[:10]
