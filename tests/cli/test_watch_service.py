"""``dedup-lib watch`` run as a service manager runs it, beside a rotating Collector: killed
with SIGKILL at a random moment while lines come and started again on its checkpoint, then
stopped with SIGTERM, which finishes the micro-batch in hand and exits 0. Every send is judged
once, with the batch replay's verdict, and every alert is in the alerts file once, on a whole
line. A kill at each step of a micro-batch, one by one, is tests/live/test_runner.py's."""

from __future__ import annotations

import configparser
import gzip
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from collector_kit import Collector
from dedup_lib import DedupPolicy, detect_duplicates, load_telemetry, sample_path
from dedup_lib.spark import free_port, to_pandas
from metrics_kit import scrape, summed

COLUMNS = ["verdict", "reason", "dedup_key", "original_send_time", "original_event_id"]


def start(landing: Path, tmp: Path, port: int) -> subprocess.Popen[str]:
    argv = [
        sys.executable, "-m", "dedup_lib", "watch", str(landing),
        "--out", str(tmp / "out"), "--checkpoint", str(tmp / "ck"),
        "--alerts", str(tmp / "alerts.jsonl"), "--every", "0.5",
        "--window", "PT20S", "--partitioning", "--lateness", "PT1M", "--master", "local[2]",
        "--metrics", f"127.0.0.1:{port}",
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def lines_of(process: subprocess.Popen[str], seen: list[str]) -> threading.Thread:
    """What the command prints, kept as it comes."""

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


@pytest.mark.slow
def test_killed_and_started_again_every_send_is_judged_once(spark, tmp_path):
    rng = random.Random(11)
    with gzip.open(sample_path("incident-otlp.jsonl.gz"), "rb") as sample:
        lines = [line.rstrip(b"\n") for line in sample][:700]
    landing = tmp_path / "landing"
    landing.mkdir()
    collector = Collector(str(landing / "traces.json"), max_bytes=800_000)
    exported = 0

    def export(count: int) -> None:
        nonlocal exported
        for line in lines[exported : exported + count]:
            collector.export(line)
        exported = min(len(lines), exported + count)
        collector.flush()

    export(50)
    printed: list[str] = []
    # Started, then killed at a random moment while lines come.
    process = start(landing, tmp_path, free_port())
    reader = lines_of(process, printed)
    deadline = time.monotonic() + 180
    while not printed and process.poll() is None:
        assert time.monotonic() < deadline, "no micro-batch in three minutes"
        time.sleep(0.2)
    export(300)
    time.sleep(rng.uniform(0.2, 3.0))
    process.send_signal(signal.SIGKILL)
    process.wait(60)
    reader.join(10)
    export(len(lines))
    collector.close()
    port = free_port()
    process = start(landing, tmp_path, port)
    reader = lines_of(process, printed)
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"\n".join(lines) + b"\n")
    expected = load_expected(spark, whole)
    deadline = time.monotonic() + 300
    while not (tmp_path / "out").exists() or judged(tmp_path) < expected["due"]:
        assert time.monotonic() < deadline, f"{judged(tmp_path)} of {expected['due']} judged"
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        time.sleep(0.5)
    # A micro-batch's files land before its commit, and its counters move after the commit.
    while summed(counted := scrape(("127.0.0.1", port)), "dedup_sends_judged_total") < judged(
        tmp_path
    ):
        assert time.monotonic() < deadline, "the counters never reached the files' count"
        time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    assert process.wait(120) == 0
    reader.join(10)
    assert process.stderr is not None
    assert "stopping" in process.stderr.read()

    got = pd.read_parquet(tmp_path / "out").set_index("event_id")
    assert got.index.is_unique, "a send was judged twice"
    want = expected["verdicts"]
    assert set(got.index) == set(want.index) - expected["waiting"]
    pd.testing.assert_frame_equal(
        got[COLUMNS].sort_index(), want.loc[got.index, COLUMNS].sort_index(), check_dtype=False
    )
    text = (tmp_path / "alerts.jsonl").read_text()
    alerts = [json.loads(line) for line in text.splitlines()]  # a cut line would not parse
    assert text.endswith("\n")
    assert pd.DataFrame(alerts)[["kind", "event_id"]].value_counts().max() == 1
    rejected = (got["verdict"] == "rejected").sum()
    assert sum(a["kind"] == "rejected" for a in alerts) == rejected > 0
    # The counters, restored from the checkpoint at each start, count every send once.
    assert summed(counted, "dedup_sends_judged_total") == len(got)
    for verdict, count in got["verdict"].value_counts().items():
        assert summed(counted, "dedup_sends_judged_total", verdict=verdict) == count
    assert summed(counted, "dedup_alerts_total", kind="rejected") == rejected


def judged(tmp: Path) -> int:
    return sum(
        pd.read_parquet(p, columns=["event_id"]).shape[0] for p in (tmp / "out").glob("*.parquet")
    )


def load_expected(spark, whole: Path) -> dict:
    """The batch replay's verdicts over the lines exported, and the sends that wait for a
    watermark beyond the last (those the rules alone decide do not wait)."""
    valid = load_telemetry(spark, str(whole)).valid
    policy = DedupPolicy("PT20S", partitioning=True)
    result = detect_duplicates(valid, policy).select("event_id", "send_time", *COLUMNS)
    verdicts = to_pandas(result).set_index("event_id")
    micros = verdicts["send_time"].astype("datetime64[us]").astype("int64")
    watermark = (int(micros.max()) // 1000 - 60_000) * 1000
    decided = (verdicts["verdict"] == "rejected") | verdicts["reason"].notna()
    waiting = set(verdicts.index[(micros > watermark) & ~decided])
    return {"verdicts": verdicts, "waiting": waiting, "due": len(verdicts) - len(waiting)}


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "live.md"


def guide_unit(tmp: Path) -> tuple[str, list[str], dict[str, str]]:
    """The guide's systemd unit with its paths moved into ``tmp``: the unit's text, its
    ExecStart as a command line, and its environment."""
    block = re.search(r"```ini\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert block is not None, "the guide gives a systemd unit"
    text = block[1]
    moves = {
        "/opt/dedup-lib/.venv/bin/dedup-lib": str(Path(sys.executable).with_name("dedup-lib")),
        "/var/lib/otelcol/servicebus": str(tmp / "landing"),
        "/var/lib/dedup-lib": str(tmp / "state"),
        "127.0.0.1:9464": "127.0.0.1:0",
    }
    for old, new in moves.items():
        text = text.replace(old, new)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("User="))
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(text.replace("\\\n", " "))
    service = unit["Service"]
    env = dict(pair.split("=", 1) for pair in shlex.split(service["Environment"]))
    assert service["KillSignal"] == "SIGTERM"
    return text, shlex.split(service["ExecStart"]), env


@pytest.mark.slow
@pytest.mark.spark
def test_the_guides_systemd_unit_runs_as_written_and_stops_on_sigterm(tmp_path):
    text, command, env = guide_unit(tmp_path)
    analyze = shutil.which("systemd-analyze")
    if analyze is not None:
        unit = tmp_path / "dedup-watch.service"
        unit.write_text(text)
        checked = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
        problems = [line for line in checked.stderr.splitlines() if "dedup-watch.service" in line]
        assert not problems, checked.stderr
    landing = tmp_path / "landing"
    landing.mkdir()
    with gzip.open(sample_path("incident-otlp.jsonl.gz"), "rb") as sample:
        (landing / "traces.json").write_bytes(sample.read())
    process = subprocess.Popen(
        command,
        env={
            **os.environ,
            **env,
            "DEDUP_LIB_CACHE": os.environ.get("DEDUP_LIB_CACHE", env["DEDUP_LIB_CACHE"]),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed: list[str] = []
    reader = lines_of(process, printed)
    deadline = time.monotonic() + 180
    while not any("sends judged" in line for line in printed):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, printed
        time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    assert process.wait(120) == 0
    reader.join(10)
    assert (tmp_path / "state" / "verdicts").is_dir()
    assert (tmp_path / "state" / "checkpoint" / "commits").is_dir()
