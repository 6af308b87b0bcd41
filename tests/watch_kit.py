"""The live monitor run as a service runs it, for the tests that kill it and start it again: the
Collector's file exporter writing the OTLP sample into a landing folder, a command's lines kept
as they come, and the batch replay's verdicts every send must get once."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from collector_kit import Collector
from dedup_lib import DedupPolicy, detect_duplicates, load_telemetry, missed_resends, sample_path
from dedup_lib.spark import to_pandas
from metrics_kit import summed

#: What is compared of each send's verdict.
COLUMNS = ["verdict", "reason", "dedup_key", "original_send_time", "original_event_id"]


#: How the feed's sender sets a SessionId: apart from the PartitionKey, which the SDK refuses
#: whatever the entity's policy. With the unit's window and no partitioning the sample raises
#: no other alert (its spans carry no content to collide on): these are the alerts to count.
SESSION = b'"servicebus.message.session_id","value":{"stringValue":"'


#: The sample's lines the feed writes: about 25,000 sends in some 20 rotated files, so that a
#: kill lands in a plan's staging or a micro-batch as often as with more, for half the time.
LINES = 350


@dataclass
class Feed:
    """The Collector's file exporter writing the sample's first :data:`LINES` lines into
    ``landing``, rotating its file every 800 kB."""

    landing: Path
    lines: list[bytes] = field(default_factory=list)
    exported: int = 0

    def __post_init__(self) -> None:
        with gzip.open(sample_path("incident-otlp.jsonl.gz"), "rb") as sample:
            lines = [line.rstrip(b"\n") for line in sample][:LINES]
        self.lines = [line.replace(SESSION, SESSION + b"not-") for line in lines]
        assert self.lines != lines, "the sample no longer sets a SessionId: refuse sends anew"
        self.landing.mkdir()
        self.collector = Collector(str(self.landing / "traces.json"), max_bytes=800_000)

    def export(self, count: int) -> None:
        for line in self.lines[self.exported : self.exported + count]:
            self.collector.export(line)
        self.exported = min(len(self.lines), self.exported + count)
        self.collector.flush()


def lines_of(process: subprocess.Popen[str], seen: list[str]) -> threading.Thread:
    """What the command prints, kept as it comes."""

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


@contextlib.contextmanager
def running(
    command: list[str], errors: Path, **options: Any
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``command`` (Popen's ``options`` beside) in a process group of its own, its stderr to
    ``errors``, its stdout's lines kept as they come; what is left of it killed once the
    block ends."""
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True,
            **options,
        )  # fmt: skip
    printed: list[str] = []
    reader = lines_of(process, printed)
    try:
        yield process, printed
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(60)
        reader.join(10)


def wait_until(
    process: subprocess.Popen[str], errors: Path, done: Callable[[], bool], what: str
) -> None:
    """Until ``done()``, for at most 300 s; ``process`` must not stop meanwhile (its stderr,
    ``errors``, says why it did)."""
    deadline = time.monotonic() + 300
    while not done():
        assert process.poll() is None, errors.read_text()[-3000:]
        assert time.monotonic() < deadline, f"not {what} in 300 s: {errors.read_text()[-3000:]}"
        time.sleep(0.3)


def judged(out: Path) -> int:
    """The sends in the verdicts' files so far: the driver's mode's ``part-N.parquet``, the
    executors' ``batch-N/`` folders (a hidden one is a write in progress)."""
    try:  # a hidden folder is not walked: Spark removes its task folders while it writes
        shown = [e for e in out.iterdir() if not e.name.startswith(".")] if out.is_dir() else []
        found = [p for e in shown for p in (e.rglob("*.parquet") if e.is_dir() else [e])]
        found = [p for p in found if p.suffix == ".parquet"]
        return sum(pq.read_metadata(p).num_rows for p in found)  # the footers: polled often
    except FileNotFoundError:  # a micro-batch Spark runs again replaced its folder meanwhile
        return 0


def load_expected(spark, whole: Path, command: list[str]) -> dict:
    """The batch replay's verdicts over the lines exported, with the policy of ``command``
    (``dedup-lib watch``'s), the sends that wait for a watermark beyond the last (those
    the rules alone decide do not wait), and the resends among the others (each with the
    copy before it) by the content ``command`` compares, if it names one."""
    window = command[command.index("--window") + 1]
    lateness = pd.Timedelta(command[command.index("--lateness") + 1]).value // 1000
    policy = DedupPolicy(window, partitioning="--partitioning" in command)
    valid = load_telemetry(spark, str(whole)).valid
    replayed = detect_duplicates(valid, policy).persist()  # read again for the resends
    verdicts = to_pandas(replayed.select("event_id", "send_time", *COLUMNS)).set_index("event_id")
    micros = verdicts["send_time"].astype("datetime64[us]").astype("int64")
    watermark = (int(micros.max()) // 1000 * 1000) - lateness
    decided = (verdicts["verdict"] == "rejected") | verdicts["reason"].notna()
    waiting = set(verdicts.index[(micros > watermark) & ~decided])
    # The resends among the sends due, by the content compared (``--content``), within the
    # monitor's default horizon (an hour)
    resent: dict[Any, Any] = {}
    if "--content" in command:
        content = command[command.index("--content") + 1]
        due = replayed.where(~F.col("event_id").isin(list(waiting)))
        copies = missed_resends(due, content).where("delay <= 3600")
        pairs = to_pandas(copies.select("event_id", "previous_event_id"))
        resent = dict(pairs.itertuples(index=False, name=None))
    replayed.unpersist()
    return {"verdicts": verdicts, "waiting": waiting, "due": len(verdicts) - len(waiting),
            "resent": resent}  # fmt: skip


def assert_judged_once(out: Path, expected: dict) -> pd.DataFrame:
    """Every send due judged once, with the batch replay's verdict (``expected``, as
    :func:`load_expected` gives it); the verdicts, by event id."""
    got = pd.read_parquet(out).set_index("event_id")
    assert got.index.is_unique, "a send was judged twice"
    want = expected["verdicts"]
    assert set(got.index) == set(want.index) - expected["waiting"]
    pd.testing.assert_frame_equal(
        got[COLUMNS].sort_index(), want.loc[got.index, COLUMNS].sort_index(), check_dtype=False
    )
    return got


def assert_judged_and_alerted_once(out: Path, alerts: Path, expected: dict, counted: dict) -> None:
    """Every send due judged once, with the batch replay's verdict; every alert in the alerts
    file once, on a whole line, the resends those the batch analysis finds; the counters,
    restored from the checkpoint at the restart, count every send and every alert once."""
    got = assert_judged_once(out, expected)
    text = alerts.read_text()
    raised = [json.loads(line) for line in text.splitlines()]  # a cut line would not parse
    assert text.endswith("\n")
    assert pd.DataFrame(raised)[["kind", "event_id"]].value_counts().max() == 1
    rejected = (got["verdict"] == "rejected").sum()
    assert sum(a["kind"] == "rejected" for a in raised) == rejected > 0
    assert summed(counted, "dedup_sends_judged_total") == len(got)
    for verdict, count in got["verdict"].value_counts().items():
        assert summed(counted, "dedup_sends_judged_total", verdict=verdict) == count
    assert summed(counted, "dedup_alerts_total", kind="rejected") == rejected
    resent = {
        str(a["event_id"]): str(a["original_event_id"]) for a in raised if a["kind"] == "resend"
    }
    assert resent == {str(k): str(v) for k, v in expected["resent"].items()}
    assert summed(counted, "dedup_alerts_total", kind="resend") == len(resent)
