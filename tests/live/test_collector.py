"""The OpenTelemetry Collector's rotating files, watched as they are written: the shipped OTLP
sample exported line by line through the file exporter's buffer and rotation (collector_kit),
configured as docs/guide/live.md configures it, while ``watch_duplicates`` runs. Lines end up
cut by rotations between two files, and the active file ends with half a line while the
monitor looks (the exporter is held there). Every send must be judged once, with the batch
replay's verdict over the sample itself."""

from __future__ import annotations

import gzip
import re
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from collector_kit import Collector
from dedup_lib import DedupPolicy, detect_duplicates, load_telemetry, sample_path
from dedup_lib.live.options import ReadOptions, WatchOptions
from dedup_lib.live.watch import watch_duplicates
from dedup_lib.spark import to_pandas

COLUMNS = ["verdict", "reason", "dedup_key", "original_send_time", "original_event_id"]
POLICY = DedupPolicy("PT10M")


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "live.md"


def guide_exporter() -> dict:
    """The file exporter's settings in the guide's Collector configuration."""
    block = re.search(r"```yaml\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert block is not None, "the guide gives a Collector configuration"
    (exporter,) = yaml.safe_load(block[1])["exporters"].values()
    return exporter


class Feed(threading.Thread):
    """The exporter as the guide configures it: a line every few milliseconds, a flush every
    ``flush_interval``; twice it stops for a second with half a line at the end of the active
    file."""

    def __init__(self, lines: list[bytes], path: Path, exporter: dict) -> None:
        super().__init__(daemon=True)
        self.lines = lines
        rotation = exporter["rotation"]
        self.collector = Collector(
            str(path), rotation["max_megabytes"] << 20, rotation["max_backups"]
        )
        self.every = float(exporter["flush_interval"].removesuffix("s"))
        self.held = 0
        self.failure: BaseException | None = None
        real = self.collector.file.write

        def write(data: bytes) -> None:
            real(data)
            if self.held < 2 and not data.endswith(b"\n") and len(data) > 1000:
                self.held += 1
                time.sleep(1.2)  # half a line on disk while the monitor scans

        self.collector.file.write = write  # type: ignore[method-assign]

    def run(self) -> None:
        try:
            flushed = time.monotonic()
            for line in self.lines:
                self.collector.export(line)
                if time.monotonic() - flushed > self.every:
                    self.collector.flush()
                    flushed = time.monotonic()
                time.sleep(0.005)
            self.collector.close()
        except BaseException as failure:
            self.failure = failure


@pytest.mark.slow
def test_a_rotating_collector_is_read_once_while_it_writes(spark, tmp_path):
    with gzip.open(sample_path("incident-otlp.jsonl.gz"), "rb") as sample:
        lines = [line.rstrip(b"\n") for line in sample]
    whole = tmp_path / "sample" / "traces.jsonl"
    whole.parent.mkdir()
    whole.write_bytes(b"\n".join(lines) + b"\n")
    landing = tmp_path / "landing"
    landing.mkdir()
    exporter = guide_exporter()
    assert exporter["format"] == "json"
    assert "compression" not in exporter
    feed = Feed(lines, landing / Path(exporter["path"]).name, exporter)
    feed.collector.export(lines[0])
    feed.collector.flush()
    feed.lines = lines[1:]
    folders = {"out": str(tmp_path / "out"), "checkpoint": str(tmp_path / "ck")}
    notes: list[str] = []
    feed.start()
    every = WatchOptions(reading=ReadOptions(trigger=0.3))
    watch = watch_duplicates(
        spark, str(landing), POLICY, "PT1M", options=every, on_note=notes.append, **folders
    )
    expected = load_telemetry(spark, str(whole)).counts()
    try:
        feed.join(120)
        assert not feed.is_alive()
        assert feed.failure is None, feed.failure
        deadline = time.monotonic() + 120
        while sum(c["read"] for c in watch.loads) < expected["read"]:
            assert time.monotonic() < deadline, (watch.loads, expected)
            assert watch.active, watch.error
            time.sleep(0.3)
    finally:
        watch.stop()

    files = sorted(p.name for p in landing.iterdir())
    assert len(files) > 3, "the exporter rotated its file"
    cut = [n for n in files if not (landing / n).read_bytes().endswith(b"\n")]
    assert cut, "some backup ends inside a line"
    assert feed.held == 2
    assert notes == []
    read = {k: sum(c[k] for c in watch.loads) for k in expected}
    assert read == expected, "every record read once, none cut"

    got = pd.read_parquet(folders["out"]).set_index("event_id")
    assert got.index.is_unique, "a send was judged twice"
    assert (got["verdict"] != "late").all()
    valid = load_telemetry(spark, str(whole)).valid
    result = detect_duplicates(valid, POLICY).select("event_id", "send_time", *COLUMNS)
    want = to_pandas(result).set_index("event_id")
    micros = want["send_time"].astype("datetime64[us]").astype("int64")
    watermark = (int(micros.max()) // 1000 - 60_000) * 1000  # the last, in whole ms, minus PT1M
    decided = (want["verdict"] == "rejected") | want["reason"].notna()  # these wait for nothing
    assert set(want.index) - set(got.index) == set(want.index[(micros > watermark) & ~decided])
    pd.testing.assert_frame_equal(
        got[COLUMNS].sort_index(), want.loc[got.index, COLUMNS].sort_index(), check_dtype=False
    )
