"""``dedup-lib watch`` run as a service manager runs it, beside a rotating Collector: killed
with SIGKILL at a random moment while lines come and started again on its checkpoint, then
stopped with SIGTERM, which finishes the micro-batch in hand and exits 0. Every send is judged
once, with the batch replay's verdict, and every alert is in the alerts file once, on a whole
line. A kill at each step of a micro-batch, one by one, is tests/live/test_runner.py's.

The systemd unit the package ships (``resources/systemd/dedup-watch.service``): valid for
``systemd-analyze verify``, hardened to an exposure of 3.0 or lower by ``systemd-analyze
security``, with what the monitor needs kept, and its ``ExecStart`` run as written (paths moved
into the test's folder) with its environment, speaking the notify protocol to a socket of the
test's own as systemd's. The sandbox itself is not run: these machines have no systemd as
PID 1."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import as_file, files
from pathlib import Path

import pandas as pd
import pytest

from collector_kit import Collector
from dedup_lib import DedupPolicy, detect_duplicates, load_telemetry, sample_path
from dedup_lib.live.service.pulse import HUNG_AFTER
from dedup_lib.memory import size_in_bytes
from dedup_lib.spark import free_port, to_pandas
from metrics_kit import scrape, summed
from prometheus_kit import Prometheus

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


#: The systemd unit the package ships.
UNIT = files("dedup_lib") / "resources" / "systemd" / "dedup-watch.service"


def moved_unit(tmp: Path, port: int = 0) -> str:
    """The shipped unit with its machine's paths moved into ``tmp``, its program this
    environment's ``dedup-lib`` and its metrics on ``port`` (0: a free one)."""
    text = UNIT.read_text()
    moves = {
        "/opt/dedup-lib/.venv/bin/dedup-lib": str(Path(sys.executable).with_name("dedup-lib")),
        "/var/lib/otelcol/servicebus": str(tmp / "landing"),
        "/var/lib/dedup-lib": str(tmp / "state"),
        "/var/cache/dedup-lib": str(tmp / "cache"),
        "127.0.0.1:9464": f"127.0.0.1:{port}",
    }
    for old, new in moves.items():
        assert old in text, f"the unit no longer names {old}: move it in the tests"
        text = text.replace(old, new)
    return text


def settings(text: str) -> dict[str, dict[str, list[str]]]:
    """A unit's settings by section, each key's values in order (a key may be given more
    than once), continuation lines joined, comments left out."""
    found: dict[str, dict[str, list[str]]] = {}
    section: dict[str, list[str]] = {}
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = found.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        section.setdefault(key.strip(), []).append(value.strip())
    return found


def service_of(unit: dict[str, dict[str, list[str]]]) -> tuple[dict[str, str], dict[str, str]]:
    """The [Service] section, each key's last value, and the environment it sets."""
    service = {key: values[-1] for key, values in unit["Service"].items()}
    pairs = [p for value in unit["Service"]["Environment"] for p in shlex.split(value)]
    return service, dict(pair.split("=", 1) for pair in pairs)


def seconds(span: str) -> float:
    """A systemd time span (``10min``, ``30s``, ``1h 30min``) in seconds."""
    scale = {"h": 3600.0, "min": 60.0, "ms": 0.001, "s": 1.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(h|min|ms|s)?", span)
    assert parts, span
    return sum(float(number) * scale[unit or "s"] for number, unit in parts)


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)


def test_the_shipped_unit_verifies(tmp_path):
    unit = tmp_path / "dedup-watch.service"
    unit.write_text(moved_unit(tmp_path))  # its program must exist
    checked = analyze("verify", str(unit))
    problems = [line for line in checked.stderr.splitlines() if "dedup-watch.service" in line]
    assert not problems, checked.stderr


def test_the_shipped_unit_is_hardened_to_an_exposure_of_3_or_lower():
    with as_file(UNIT) as unit:
        checked = analyze("security", "--offline=true", str(unit))
    assert checked.returncode == 0, checked.stderr
    overall = re.search(r"Overall exposure level for [\w.-]+: (\d+\.\d)", checked.stdout)
    assert overall is not None, checked.stdout + checked.stderr
    assert float(overall[1]) <= 3.0, checked.stdout


def test_the_shipped_unit_keeps_what_the_monitor_needs():
    unit = settings(UNIT.read_text())
    service, env = service_of(unit)
    # The monitor says READY=1 itself, once restored, and pings the watchdog from its loop:
    # no sooner than /-/healthy calls the loop hung.
    assert (service["Type"], service["NotifyAccess"]) == ("notify", "main")
    assert seconds(service["WatchdogSec"]) >= HUNG_AFTER
    # SIGTERM to the monitor alone, as the run below stops it.
    assert (service["KillMode"], service["KillSignal"]) == ("mixed", "SIGTERM")
    # Restarted on failure, until more starts than the rules page at come too fast.
    assert service["Restart"] == "on-failure"
    limits = {key: values[-1] for key, values in unit["Unit"].items()}
    burst = int(limits["StartLimitBurst"])
    assert burst > 3
    assert burst * seconds(service["RestartSec"]) < seconds(limits["StartLimitIntervalSec"])
    # The JVM's JIT and numba write code; the JVM writes in /tmp; process_* reads /proc/stat.
    assert service.get("MemoryDenyWriteExecute", "no") == "no"
    assert service["PrivateTmp"] == "yes"
    assert service.get("ProcSubset", "all") == "all"
    # The system read-only: what the monitor writes is in its state and cache folders.
    assert service["ProtectSystem"] == "strict"
    command = shlex.split(service["ExecStart"])
    writable = (f"/var/lib/{service['StateDirectory']}", f"/var/cache/{service['CacheDirectory']}")
    written = [command[command.index(o) + 1] for o in ("--out", "--checkpoint", "--alerts")]
    for path in [*written, env["DEDUP_LIB_CACHE"], service["WorkingDirectory"]]:
        assert any(path == w or path.startswith(f"{w}/") for w in writable), path
    assert command[command.index("--log-format") + 1] == "json"
    assert command[command.index("--metrics") + 1] == "127.0.0.1:9464"
    # The JVM's heap, its memory beside it (under 1 GiB) and the driver's Python (2 GiB with a
    # micro-batch of a million sends in hand), before the state's 80 bytes a key.
    heap = size_in_bytes(env["DEDUP_DRIVER_MEMORY"])
    assert size_in_bytes(service["MemoryMax"]) >= heap + 3 * 2**30


@contextmanager
def notify_socket(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """systemd's end of the notify protocol: a socket's path, and the messages heard on it."""
    heard: list[str] = []
    path = str(folder / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as end:
        end.bind(path)
        end.settimeout(0.2)
        done = threading.Event()

        def listen() -> None:
            while not done.is_set():
                try:
                    heard.append(end.recv(4096).decode())
                except TimeoutError:
                    continue

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        try:
            yield path, heard
        finally:
            done.set()
            listener.join(10)


def events(printed: list[str]) -> list[str]:
    """The events of ``--log-format json``'s lines: each line one JSON object."""
    return [json.loads(line)["event"] for line in printed]


#: The data's own alerts: the sample's resends are real (a burst judged in seconds).
DATA_ALERTS = {"DedupCollision", "DedupResendsReachConsumers", "DedupLateSends"}


@pytest.mark.slow
@pytest.mark.spark
def test_the_shipped_units_command_runs_as_written_restarts_and_pages_nobody(tmp_path):
    """Started as systemd starts the unit's ExecStart, twice on one state (a restart):
    each time told that the start takes longer while the state is restored, then ready, then
    alive; stopped by SIGTERM with exit 0. A real Prometheus scrapes it throughout: while it
    is down and while it restores, no alert fires, and none but 'down' and 'not ready' is even
    pending (before, a restart served its last scan's time as 0: 56 years without a scan)."""
    port = free_port()
    service, env = service_of(settings(moved_unit(tmp_path, port)))
    landing = tmp_path / "landing"
    landing.mkdir()
    with gzip.open(sample_path("incident-otlp.jsonl.gz"), "rb") as sample:
        (landing / "traces.json").write_bytes(sample.read())
    # What systemd makes before it starts the command: StateDirectory=, CacheDirectory=.
    Path(service["WorkingDirectory"]).mkdir()
    Path(env["DEDUP_LIB_CACHE"]).mkdir()
    (tmp_path / "prometheus").mkdir()
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}")
    seen: dict[str, set[str]] = {}
    try:
        for run in ("first", "restarted"):
            (tmp_path / run).mkdir()
            with notify_socket(tmp_path / run) as (address, heard):
                printed, stderr = run_the_unit(
                    service, env, (address, heard), prometheus, seen, first=run == "first"
                )
            assert "step" in events(stderr)
            assert events(printed)[-1] == "summary"
            extended = next(i for i, m in enumerate(heard) if m.startswith("EXTEND_TIMEOUT_USEC="))
            assert extended < heard.index("READY=1") < heard.index("WATCHDOG=1"), (run, heard)
            assert heard[-1] == "STOPPING=1"
            stopped = time.monotonic()
            # Down for a few scrapes before the restart (up: 0 before the first start, then
            # 1, 0, 1: one restart seen as such, below what DedupMonitorFlapping counts).
            while run == "first" and time.monotonic() < stopped + 3:
                prometheus.note_alerts(seen)
                time.sleep(0.3)
    finally:
        prometheus.stop()
    assert (tmp_path / "state" / "verdicts").is_dir()
    assert (tmp_path / "state" / "checkpoint" / "commits").is_dir()
    monitor = {a for names in seen.values() for a in names} - DATA_ALERTS
    assert seen.get("firing", set()) - DATA_ALERTS == set(), seen
    assert monitor <= {"DedupMonitorDown", "DedupMonitorNotReady"}, seen


def run_the_unit(
    service: dict[str, str],
    env: dict[str, str],
    notify: tuple[str, list[str]],
    prometheus: Prometheus,
    seen: dict[str, set[str]],
    *,
    first: bool,
) -> tuple[list[str], list[str]]:
    """The unit's ExecStart run until its state is restored (a first start also judges a
    micro-batch: a restart finds nothing new), it has pinged the watchdog and been scraped
    ready a few times, then stopped as systemd stops it; what it printed on stdout and
    stderr."""
    address, heard = notify
    process = subprocess.Popen(
        shlex.split(service["ExecStart"]),
        cwd=service["WorkingDirectory"],
        env={
            **os.environ,
            **env,
            # The run's own cache, where it has one (the replay's kernel built once).
            "DEDUP_LIB_CACHE": os.environ.get("DEDUP_LIB_CACHE", env["DEDUP_LIB_CACHE"]),
            # As systemd sets them for Type=notify and WatchdogSec=.
            "NOTIFY_SOCKET": address,
            "WATCHDOG_USEC": str(int(seconds(service["WatchdogSec"]) * 1e6)),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    printed: list[str] = []
    reader = lines_of(process, printed)
    try:
        deadline = time.monotonic() + 180
        while (
            (first and "micro_batch" not in events(printed))
            or "WATCHDOG=1" not in heard
            or prometheus.up() != 1
        ):
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, printed
            prometheus.note_alerts(seen)
            time.sleep(0.3)
        for _ in range(6):  # a few scrapes and evaluations of a ready monitor
            prometheus.note_alerts(seen)
            time.sleep(0.5)
        # KillMode=mixed: SIGTERM to the monitor alone, SIGKILL to what is left once it exits.
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        reader.join(10)
        time.sleep(0.5)
    finally:  # a failed check leaves no monitor running
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(60)
    assert process.stderr is not None
    return printed, process.stderr.read().splitlines()
