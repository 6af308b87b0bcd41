"""The monitor as systemd and an on-call team see it, on a real monitor: while a restore runs,
/-/ready answers 503, no time reads 0 and systemd is told the start takes longer; then
READY=1, and WATCHDOG=1 after each turn of the loop, from the loop itself: when the loop
blocks the pings stop and /-/healthy says so; a file removed before it was read whole is
counted in ``dedup_notes_total``."""

from __future__ import annotations

import gzip
import re
import shutil
import socket
import threading
import time
from pathlib import Path

from dedup_lib import DedupPolicy, sample_path
from dedup_lib.live.options import ReadOptions, ServeOptions, WatchOptions
from dedup_lib.live.runner import Runner
from dedup_lib.live.service import pulse as service
from dedup_lib.live.service.pulse import Pulse
from dedup_lib.live.state.store import KeyedState
from dedup_lib.live.watch import watch_duplicates
from dedup_lib.spark import free_port
from metrics_kit import probe, scrape, summed
from prometheus_kit import Prometheus


def get(port: int, path: str) -> tuple[int, str]:
    """The status and body, its newline cut, of a path the monitor serves."""
    status, body = probe(port, path)
    return status, body.strip()


class Manager:
    """systemd's side of the notify protocol: a datagram socket of the test's own."""

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / "notify.sock")
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(self.path)
        self.socket.settimeout(0.2)
        self.heard: list[tuple[float, str]] = []

    def listen(self, seconds: float) -> list[str]:
        """What was sent within ``seconds`` from now."""
        heard: list[str] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                heard.append(self.socket.recv(4096).decode())
            except TimeoutError:
                continue
        return heard

    def until(self, wanted: str, seconds: float = 120) -> list[str]:
        """Everything sent until ``wanted`` (a message that starts so)."""
        heard: list[str] = []
        deadline = time.monotonic() + seconds
        while not any(m.startswith(wanted) for m in heard):
            assert time.monotonic() < deadline, f"no {wanted} in {heard}"
            heard += self.listen(0.2)
        return heard


def block_steps(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """Two events: once the first is set, the monitor's next micro-batch blocks, as a hung
    loop does, until the second is."""
    step, blocked, unblocked = Runner.step, threading.Event(), threading.Event()

    def step_unless_blocked(runner):
        if blocked.is_set():
            unblocked.wait(60)
        return step(runner)

    monkeypatch.setattr(Runner, "step", step_unless_blocked)
    return blocked, unblocked


def first_run(spark, folders: dict[str, str]) -> Path:
    landing = Path(folders.pop("landing"))
    landing.mkdir()
    shutil.copy(sample_path("incident.parquet"), landing)
    watch_duplicates(spark, landing, DedupPolicy("PT10M"), once=True, **folders)
    return landing


def every(trigger: float, metrics: str) -> WatchOptions:
    """A micro-batch every ``trigger`` seconds, metrics served at ``metrics``."""
    return WatchOptions(reading=ReadOptions(trigger=trigger), serving=ServeOptions(metrics))


def test_restoring_then_ready_then_a_watchdog_ping_per_turn_until_the_loop_blocks(
    spark, tmp_path, monkeypatch
):
    folders = {"landing": str(tmp_path / "landing"), "out": str(tmp_path / "out"),
               "checkpoint": str(tmp_path / "ck")}  # fmt: skip
    landing = first_run(spark, folders)
    manager = Manager(tmp_path)
    monkeypatch.setenv("NOTIFY_SOCKET", manager.path)
    monkeypatch.setattr(service, "RESTORE_GRANT", 0.6)
    monkeypatch.setattr(service, "HUNG_AFTER", 2.0)
    restore, released = KeyedState.restore, threading.Event()

    def slow_restore(*args, **kwargs):
        released.wait(60)
        return restore(*args, **kwargs)

    monkeypatch.setattr(KeyedState, "restore", slow_restore)
    blocked, unblocked = block_steps(monkeypatch)
    port = free_port()
    started: dict = {}

    def start() -> None:
        started["watch"] = watch_duplicates(
            spark, landing, DedupPolicy("PT10M"), options=every(0.1, f"127.0.0.1:{port}"),
            **folders,
        )  # fmt: skip

    starting = threading.Thread(target=start)
    starting.start()
    try:
        # Restoring: extended, not ready, and no time at 0.
        heard = manager.until("EXTEND_TIMEOUT_USEC=")
        assert heard[0] == "STATUS=restoring the state from the checkpoint"
        heard += manager.until("EXTEND_TIMEOUT_USEC=")
        assert heard.count("EXTEND_TIMEOUT_USEC=600000") >= 2, "told again while it runs"
        assert get(port, "/-/ready") == (503, "restoring the state from the checkpoint")
        assert get(port, "/-/healthy")[0] == 200
        samples = scrape(("127.0.0.1", port))
        assert summed(samples, "dedup_restoring") == 1
        times = {n: v for (n, _), v in samples.items() if n.endswith("_timestamp_seconds")}
        assert times == {}, "absent until restored, never 0"
        released.set()
        assert "READY=1" in manager.until("READY=1")
        starting.join(60)
        restored = scrape(("127.0.0.1", port))
        assert summed(restored, "dedup_last_micro_batch_timestamp_seconds") > 1.7e9
        assert summed(restored, "dedup_last_judged_timestamp_seconds") > 1.7e9
        # Turning: a ping a turn, ready.
        pings = manager.listen(1.5)
        assert pings.count("WATCHDOG=1") >= 3, pings
        assert get(port, "/-/ready") == (200, "ready")
        # Blocked: the pings stop, /-/healthy and /-/ready say so.
        blocked.set()
        manager.listen(0.5)
        assert manager.listen(3.0) == [], "a blocked loop sends no ping"
        status, why = get(port, "/-/healthy")
        assert status == 503
        assert why.startswith("the micro-batch loop has not turned for")
        assert get(port, "/-/ready")[0] == 503
        unblocked.set()
        blocked.clear()
        assert "WATCHDOG=1" in manager.until("WATCHDOG=1", seconds=10)
        started.pop("watch").stop()
        assert "STOPPING=1" in manager.until("STOPPING=1", seconds=10)
    finally:
        released.set()
        unblocked.set()
        starting.join(60)
        if "watch" in started:
            started["watch"].stop()
        manager.socket.close()


def test_a_failed_loop_is_unhealthy_saying_why():
    pulse = Pulse(every=1.0)
    assert pulse.health() == (True, "running")
    pulse.error = RuntimeError("disk full\nmore")
    assert pulse.health() == (False, "the micro-batch loop failed: RuntimeError: disk full")
    pulse.error, pulse.stopped = None, True
    assert pulse.health() == (False, "the micro-batch loop has stopped")


def test_a_long_restore_is_healthy_and_the_loop_s_clock_starts_after_it(monkeypatch):
    monkeypatch.setattr(service, "HUNG_AFTER", 0.03)
    pulse = Pulse(every=0.0)
    with service.restoring(pulse):
        time.sleep(0.05)
        assert pulse.health() == (True, "restoring the state from the checkpoint")
    assert pulse.health() == (True, "running"), "the restore's time is no hang"
    time.sleep(0.05)
    assert pulse.health()[0] is False


def test_a_file_removed_before_it_was_read_whole_is_counted_as_data_lost(spark, tmp_path):
    with gzip.open(sample_path("incident-otlp.jsonl.gz"), "rb") as sample:
        lines = [line.rstrip(b"\n") for line in sample][:40]
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "traces.json").write_bytes(b"\n".join(lines[:20]) + b"\n")
    port = free_port()
    watch = watch_duplicates(
        spark, landing, DedupPolicy("PT10M"), out=tmp_path / "out", checkpoint=tmp_path / "ck",
        options=WatchOptions(
            reading=ReadOptions(format="otlp", trigger=0.2, settle="PT3S"),
            serving=ServeOptions(metrics=f"127.0.0.1:{port}"),
        ),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not watch.lines:
            assert time.monotonic() < deadline, watch.error
            time.sleep(0.2)
        # A line whose end never comes, then the file goes: its bytes are never read.
        with open(landing / "traces.json", "ab") as file:
            file.write(lines[20][:100])
        time.sleep(1.0)
        (landing / "traces.json").unlink()
        while summed(scrape(("127.0.0.1", port)), "dedup_notes_total", kind="removed_unread") < 1:
            assert time.monotonic() < deadline, (watch.error, scrape(("127.0.0.1", port)))
            time.sleep(0.3)
        samples = scrape(("127.0.0.1", port))
        assert summed(samples, "dedup_notes_total", kind="removed_unread") == 1
        assert summed(samples, "dedup_notes_total") == 1
    finally:
        watch.stop()


#: The alerts about the sends, not the monitor.
def scaled_rules(folder: Path, names: set[str]) -> Path:
    """The shipped rules, with ``names``' thresholds of minutes scaled to seconds: what a
    real Prometheus does over minutes, in a test's seconds."""
    import yaml

    from prometheus_kit import RULES

    groups = yaml.safe_load(RULES.read_text())
    for group in groups["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") in names:
                rule["expr"] = re.sub(r">\s*\d+(\.\d+)?\b", "> 2", str(rule["expr"]))
                rule["for"] = "1s"
    path = folder / "scaled-rules.yml"
    path.write_text(yaml.safe_dump(groups))
    return path


def test_a_hung_loop_pages_as_stalled_in_a_real_prometheus(spark, tmp_path, monkeypatch):
    folders = {"landing": str(tmp_path / "landing"), "out": str(tmp_path / "out"),
               "checkpoint": str(tmp_path / "ck")}  # fmt: skip
    landing = first_run(spark, folders)
    blocked, unblocked = block_steps(monkeypatch)
    watch = watch_duplicates(
        spark, landing, DedupPolicy("PT10M"), options=every(0.2, "127.0.0.1:0"), **folders
    )
    host, port = watch.metrics_address
    (tmp_path / "prometheus").mkdir()
    rules = scaled_rules(tmp_path, {"DedupMonitorStalled", "DedupMonitorNotReady"})
    prometheus = Prometheus(tmp_path / "prometheus", f"{host}:{port}", rules)
    seen: dict[str, set[str]] = {}
    try:
        deadline, live_for = time.monotonic() + 60, time.monotonic() + 5
        while prometheus.up() != 1 or time.monotonic() < live_for:
            assert time.monotonic() < deadline, "never scraped"
            prometheus.note_alerts(seen)
            time.sleep(0.3)
        assert "DedupMonitorStalled" not in seen.get("firing", set()), "a live loop"
        blocked.set()
        while "DedupMonitorStalled" not in seen.get("firing", set()):
            assert time.monotonic() < deadline, seen
            prometheus.note_alerts(seen)
            time.sleep(0.3)
    finally:
        unblocked.set()
        prometheus.stop()
        watch.stop()
    names = {a for names in seen.values() for a in names}
    assert "DedupMonitorDown" not in names, "it answers: it is not down, it is stalled"
