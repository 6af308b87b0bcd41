"""The ledger and its chunks, without Spark: every record of the folder read once, whole,
however its file arrived (docs/rules.md, section 8, "what is a landed send"). A reader scans
the folder as the monitor does, copies each plan's chunks, and keeps the records they hold;
writers land files in every way the guide names."""

from __future__ import annotations

import csv
import gzip
import io
import os
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collector_kit import Collector
from dedup_lib.live.landing.chunks import write_chunks
from dedup_lib.live.landing.ledger import Reading, plan

SETTLE = 5.0


class Reader:
    """The monitor's side: the ledger, and the records of every chunk it planned."""

    def __init__(self, folder, fmt: str = "json", budget: int = 256 << 20) -> None:
        self.folder = str(folder)
        self.reading = Reading(fmt, SETTLE, budget)
        self.files: dict = {}
        self.records: list[bytes] = []
        self.notes: list[str] = []
        self.kinds: list[str] = []
        self.scans = 0
        self.now = 2e9  # seconds: later than any file's time, unless a test says

    def scan(self, now: float | None = None) -> int:
        planned = plan(self.folder, self.files, self.reading, self.now if now is None else now)
        out = os.path.join(self.folder, "..", f"chunks-{self.scans}")
        self.scans += 1
        for path in write_chunks(out, planned.chunks):
            self.records += self._records(path)
        self.files = planned.files
        self.notes += [note.text for note in planned.notes]
        self.kinds += [note.kind for note in planned.notes]
        return len(planned.chunks)

    def _records(self, path: str) -> list[bytes]:
        if path.endswith(".parquet"):
            return [str(v).encode() for v in pq.read_table(path)["id"].to_pylist()]
        data = Path(path).read_bytes()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        if self.reading.csv:  # each chunk whole CSV: its header, then whole records
            rows = list(csv.reader(io.StringIO(data.decode(), newline="")))
            assert rows[0] == ["id", "body", "other"]
            return [",".join(row).encode() for row in rows[1:]]
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        return lines


def lines(count: int, size: int = 300, start: int = 0) -> list[bytes]:
    """JSON lines of about ``size`` bytes, each naming its number."""
    return [
        b'{"n": %d, "pad": "%s"}' % (i, b"x" * (size - 20)) for i in range(start, start + count)
    ]


def test_a_growing_file_is_read_up_to_its_last_whole_line_then_its_unended_tail(tmp_path):
    folder = tmp_path / "landing"
    folder.mkdir()
    reader = Reader(folder)
    written = lines(10)
    path = folder / "sends.jsonl"
    path.write_bytes(b"\n".join(written[:3]) + b"\n" + written[3][:50])
    reader.scan(now=0)
    assert reader.records == written[:3]
    with open(path, "ab") as out:
        out.write(written[3][50:] + b"\n" + b"\n".join(written[4:]))  # no newline at the end
    stamp = path.stat().st_mtime
    reader.scan(now=stamp + 1)
    assert reader.records == written[:9], "the last line waits while the file may change"
    reader.scan(now=stamp + SETTLE + 0.01)
    assert reader.records == written
    assert reader.scan() == 0


def test_the_collectors_rotating_files_are_read_once_whatever_the_scans_meet(tmp_path):
    """Lines longer than the Collector's 4 KiB buffer, rotations inside them, backups beyond
    max_backups removed, scans at random moments: every line read once, whole, in order."""
    rng = random.Random(5)
    folder = tmp_path / "landing"
    folder.mkdir()
    collector = Collector(str(folder / "traces.json"), max_bytes=60_000, max_backups=3)
    reader = Reader(folder)
    written = [line for i in range(400) for line in lines(1, rng.randint(100, 9000), i)]
    for line in written:
        collector.export(line)
        if rng.random() < 0.2:
            collector.flush()
        if rng.random() < 0.1:
            reader.scan(now=0)  # every file just written: no unended line taken
    collector.close()
    reader.scan(now=0)
    assert len(reader.records) == len(set(reader.records)), "a line was read twice"
    assert reader.records == written
    assert not reader.notes


def test_a_monitor_started_after_rotations_reads_the_line_cut_between_two_backups(tmp_path):
    folder = tmp_path / "landing"
    folder.mkdir()
    collector = Collector(str(folder / "traces.json"), max_bytes=20_000)
    written = lines(30, 5000)
    for line in written:
        collector.export(line)
    collector.close()
    assert len(os.listdir(folder)) > 3
    ends = [(folder / n).read_bytes()[-1:] for n in sorted(os.listdir(folder))]
    assert b"x" in ends or b"}" in ends, "some backup ends inside a line"
    reader = Reader(folder)
    reader.scan(now=0)
    assert reader.records == written


def test_a_file_copied_in_place_is_read_as_it_grows_never_half_a_line(tmp_path):
    source, folder = tmp_path / "sends.jsonl", tmp_path / "landing"
    folder.mkdir()
    written = lines(500, 200)
    source.write_bytes(b"\n".join(written) + b"\n")
    reader = Reader(folder)
    data = source.read_bytes()
    with open(folder / "sends.jsonl", "wb") as copy:
        for start in range(0, len(data), 7777):
            copy.write(data[start : start + 7777])
            copy.flush()
            reader.scan(now=0)
    reader.scan()
    assert reader.records == written


def test_a_csv_is_read_record_by_record_with_its_header_and_its_quoted_newlines(tmp_path):
    folder = tmp_path / "landing"
    folder.mkdir()
    reader = Reader(folder, fmt="csv")
    rows = [b'%d,"two\nlines, and ""quotes""",x' % i for i in range(40)]
    data = b"id,body,other\n" + b"\n".join(rows) + b"\n"
    parsed = [b'%d,two\nlines, and "quotes",x' % i for i in range(40)]
    with open(folder / "sends.csv", "wb") as out:
        for start in range(0, len(data), 97):
            out.write(data[start : start + 97])
            out.flush()
            reader.scan(now=0)
    reader.scan()
    assert reader.records == parsed
    assert reader.scans > 10


def test_parquet_is_read_once_finished_and_a_change_after_is_said_not_read(tmp_path):
    folder, made = tmp_path / "landing", tmp_path / "made.parquet"
    folder.mkdir()
    pq.write_table(pa.table({"id": list(range(1000))}), made)
    data = made.read_bytes()
    reader = Reader(folder, fmt="parquet")
    (folder / "sends.parquet").write_bytes(data[: len(data) // 2])  # copied in place, half
    assert reader.scan(now=0) == 0
    (folder / "sends.parquet").write_bytes(data)
    assert reader.scan() == 1
    assert reader.records == [str(i).encode() for i in range(1000)]
    pq.write_table(pa.table({"id": list(range(2000))}), folder / "sends.parquet")
    reader.scan()
    reader.scan()
    assert len(reader.records) == 1000
    assert len(reader.notes) == 1
    assert "changed after it was read whole" in reader.notes[0]
    assert reader.kinds == ["changed_after_read"]


def test_a_compressed_file_is_read_once_its_stream_ends(tmp_path):
    folder = tmp_path / "landing"
    folder.mkdir()
    written = lines(100)
    data = gzip.compress(b"\n".join(written) + b"\n")
    target = folder / "sends.jsonl.gz"
    target.write_bytes(data[:-10])  # copied in place, not all there yet
    stamp = target.stat().st_mtime
    reader = Reader(folder)
    assert reader.scan(now=stamp) == 0, "a cut gzip stream is not finished"
    assert reader.scan(now=stamp + 6 * SETTLE + 1) == 0
    assert "is not a whole file (cut short?)" in reader.notes[0]
    assert reader.kinds == ["unfinished"]
    target.write_bytes(data)
    assert reader.scan(now=stamp) == 1
    assert reader.records == written


def test_a_file_rewritten_in_place_or_renamed_is_known_by_its_bytes(tmp_path):
    folder = tmp_path / "landing"
    folder.mkdir()
    reader = Reader(folder)
    first, second = lines(5), lines(5, start=100)
    (folder / "a.jsonl").write_bytes(b"\n".join(first) + b"\n")
    reader.scan()
    os.rename(folder / "a.jsonl", folder / "b.jsonl")  # the same file: nothing new
    assert reader.scan() == 0
    (folder / "b.jsonl").write_bytes(b"\n".join(second) + b"\n")  # other bytes, same inode
    reader.scan()
    assert reader.records == first + second
    assert "rewritten in place" in reader.notes[0]
    assert reader.kinds[-1] == "rewritten"


def test_a_file_removed_before_it_was_read_whole_is_said(tmp_path):
    folder = tmp_path / "landing"
    folder.mkdir()
    reader = Reader(folder)
    (folder / "a.jsonl").write_bytes(b"\n".join(lines(3)) + b"\n" + b'{"n": 3')
    reader.scan(now=0)
    os.remove(folder / "a.jsonl")
    reader.scan(now=1)
    assert reader.notes == [], "a listing may miss a file being renamed: wait a little"
    reader.scan(now=1 + SETTLE)
    assert reader.notes == [
        "a.jsonl went before it was read whole: its last 7 bytes were never read"
    ]
    assert reader.kinds == ["removed_unread"], "data lost: dedup_notes_total counts it"


def test_a_micro_batch_takes_no_more_than_its_budget_and_the_rest_follows(tmp_path):
    folder = tmp_path / "landing"
    folder.mkdir()
    written = lines(1000, 100)
    for part in range(4):
        block = written[part * 250 : (part + 1) * 250]
        (folder / f"s{part}.jsonl").write_bytes(b"\n".join(block) + b"\n")
    reader = Reader(folder, budget=10_000)
    taken = []
    while reader.scan():
        taken.append(len(reader.records))
    assert reader.records == written
    assert all(b - a <= 100 for a, b in zip([0, *taken], taken, strict=False))


@pytest.mark.parametrize("hidden", [".landing-1.jsonl", "_tmp.jsonl", "x.jsonl.crc"])
def test_hidden_and_bookkeeping_names_are_not_read(tmp_path, hidden):
    folder = tmp_path / "landing"
    folder.mkdir()
    (folder / hidden).write_bytes(b"\n".join(lines(2)) + b"\n")
    assert Reader(folder).scan() == 0


def test_excluded_names_are_not_read(tmp_path):
    folder = tmp_path / "landing"
    folder.mkdir()
    (folder / "traces.json.zst").write_bytes(b"partial")
    reader = Reader(folder)
    reader.reading = Reading("json", SETTLE, exclude=("traces.json.zst",))
    assert reader.scan() == 0
    shutil.rmtree(folder)


def test_a_listing_that_misses_a_file_in_a_rotation_plans_nothing_until_it_is_seen(
    tmp_path, monkeypatch
):
    """A listing taken while the Collector renames its file may see the new file and miss
    the old one: the new file then starts with the rest of a line whose start is unread."""
    from dedup_lib.live.landing import ledger

    folder = tmp_path / "landing"
    folder.mkdir()
    collector = Collector(str(folder / "traces.json"), max_bytes=14_000)
    written = lines(12, 5000)
    reader = Reader(folder)
    for line in written[:2]:
        collector.export(line)
    collector.flush()
    collector.file.write(written[2][:3000])  # half a line, as the buffer hands it over
    reader.scan(now=0)
    collector.file.write(written[2][3000:] + b"\n")  # rotates: the rest goes to a new file
    real = ledger.listed

    def missing_the_backup(folder, reading):  # type: ignore[no-untyped-def]
        return {n: s for n, s in real(folder, reading).items() if n == "traces.json"}

    monkeypatch.setattr(ledger, "listed", missing_the_backup)
    assert reader.scan(now=0) == 0
    monkeypatch.setattr(ledger, "listed", real)
    for line in written[3:]:
        collector.export(line)
    collector.close()
    reader.scan(now=0)
    assert reader.records == written
    assert reader.notes == []


def test_a_rotation_between_listing_and_reading_reads_nothing_from_the_new_file(
    tmp_path, monkeypatch
):
    """The folder listed, then the Collector rotates before the ledger reads the active
    file: its name holds the new file. Its head and its records' ends are not taken from
    the new file for the old one; the next listing plans both files."""
    from dedup_lib.live.landing import ledger

    folder = tmp_path / "landing"
    folder.mkdir()
    collector = Collector(str(folder / "traces.json"), max_bytes=14_000)
    written = [line for i in range(12) for line in lines(1, 700 + 900 * (i % 4), i)]
    for line in written[:5]:
        collector.export(line)
    collector.flush()
    reader = Reader(folder)
    stale = ledger.listed(str(folder), reader.reading)
    for line in written[5:10]:  # rotates: traces.json is a new file
        collector.export(line)
    collector.flush()
    monkeypatch.setattr(ledger, "listed", lambda folder, reading: stale)
    assert reader.scan(now=0) == 0
    monkeypatch.undo()
    for line in written[10:]:
        collector.export(line)
    collector.close()
    reader.scan(now=0)
    assert reader.records == written
    assert reader.notes == []
