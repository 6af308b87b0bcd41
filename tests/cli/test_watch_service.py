"""``dedup-lib watch`` as systemd runs the unit the package ships
(``resources/systemd/dedup-watch.service``): valid for ``systemd-analyze verify``, hardened to
an exposure of 3.0 or lower by ``systemd-analyze security``, with what the monitor needs kept;
and its ``ExecStart`` run as written (paths moved into the test's folder) with its environment,
speaking the notify protocol to a socket of the test's own as systemd's, beside a rotating
Collector: killed with SIGKILL at a random moment while lines come (``Restart=on-failure``'s
case) and started again on its state, then stopped with SIGTERM, which finishes the micro-batch
in hand and exits 0. Every send is judged once, with the batch replay's verdict, every alert is
in the alerts file once, on a whole line, the counters count each once across the restart, and
a real Prometheus saw no false page. A kill at each step of a micro-batch, one by one, is
tests/live/test_runner.py's. The sandbox itself is not run: these machines have no systemd as
PID 1."""

from __future__ import annotations

import contextlib
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path

import pytest

from dedup_lib.live.service.pulse import HUNG_AFTER
from dedup_lib.memory import size_in_bytes
from dedup_lib.spark import free_port
from listeners_kit import assert_on_loopback, listeners
from metrics_kit import scrape, summed
from prometheus_kit import Prometheus
from watch_kit import Feed, assert_judged_and_alerted_once, judged, lines_of, load_expected

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
        "/var/tmp": str(tmp / "var-tmp"),
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
    # Spark's local folders on disk, in the private /var/tmp: not in a /tmp that may be memory.
    assert env["SPARK_LOCAL_DIRS"] == "/var/tmp"
    assert service.get("ProcSubset", "all") == "all"
    # The system read-only: what the monitor writes is in its state and cache folders.
    assert service["ProtectSystem"] == "strict"
    command = shlex.split(service["ExecStart"])
    writable = (f"/var/lib/{service['StateDirectory']}", f"/var/cache/{service['CacheDirectory']}")
    written = [command[command.index(o) + 1] for o in ("--out", "--checkpoint", "--alerts")]
    caches = (env["DEDUP_LIB_CACHE"], env["PYTHONPYCACHEPREFIX"], env["NUMBA_CACHE_DIR"])
    for path in [*written, *caches, service["WorkingDirectory"]]:
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


#: Alerts on the data, not on the monitor: none of them a false page of a restart.
DATA_ALERTS = {"DedupCollision", "DedupResendsReachConsumers", "DedupLateSends"}


@pytest.mark.slow
def test_the_units_command_killed_and_started_again_judges_every_send_once_and_pages_nobody(
    spark, tmp_path
):
    """The unit's ExecStart as systemd starts it (above), on one state: each start told that
    it takes longer while the state is restored, then ready, then alive; the first killed
    after a micro-batch, at a random moment while lines come; the second judges the rest and
    is stopped by SIGTERM with exit 0. A real Prometheus scrapes it throughout: while it is
    down and while it restores, no alert fires, and none but 'down' and 'not ready' is even
    pending (before, a restart served its last scan's time as 0: 56 years without a scan).
    Restarted, it listens on loopback only."""
    rng = random.Random(11)
    port = free_port()
    service, env = service_of(settings(moved_unit(tmp_path, port)))
    feed = Feed(tmp_path / "landing")
    # What systemd makes before it starts the command: StateDirectory=, CacheDirectory=, and
    # PrivateTmp='s /var/tmp.
    state = Path(service["WorkingDirectory"])
    state.mkdir()
    Path(env["DEDUP_LIB_CACHE"]).mkdir()
    Path(env["SPARK_LOCAL_DIRS"]).mkdir()
    (tmp_path / "prometheus").mkdir()
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{port}")
    seen: dict[str, set[str]] = {}
    try:
        feed.export(50)
        with the_unit(service, env, tmp_path / "first", prometheus, seen) as first:
            first.wait_for(lambda: "micro_batch" in events(first.printed), "a micro-batch")
            feed.export(150)
            time.sleep(rng.uniform(0.2, 6.0))  # anywhere in a turn of its loop (--every 5)
            first.process.send_signal(signal.SIGKILL)
            assert first.process.wait(60) == -signal.SIGKILL
        # Its bytecode, in the cache folder: the next start reads it, compiling nothing again.
        assert any(Path(env["PYTHONPYCACHEPREFIX"]).rglob("dedup_lib/__init__.*.pyc"))
        assert any(Path(env["NUMBA_CACHE_DIR"]).rglob("*loops.put*.nbi"))
        # Spark's local folders where the unit puts them (the killed JVM's are left there).
        assert any(Path(env["SPARK_LOCAL_DIRS"]).glob("blockmgr-*"))
        feed.export(len(feed.lines))
        feed.collector.close()
        whole = tmp_path / "whole.jsonl"
        whole.write_bytes(b"\n".join(feed.lines) + b"\n")
        # Down for a few scrapes before the restart (up: 0 before the first start, then 1, 0,
        # 1: one restart seen as such, below what DedupMonitorFlapping counts).
        for _ in range(10):
            prometheus.note_alerts(seen)
            time.sleep(0.3)
        with the_unit(service, env, tmp_path / "restarted", prometheus, seen) as restarted:
            expected = load_expected(spark, whole, shlex.split(service["ExecStart"]))
            out = state / "verdicts"
            restarted.wait_for(lambda: judged(out) >= expected["due"], "every send due judged")
            # A micro-batch's files land before its commit, and its counters move after it.
            restarted.wait_for(
                lambda: (
                    summed(scrape(("127.0.0.1", port)), "dedup_sends_judged_total") >= judged(out)
                ),
                "the counters at the files' count",
            )
            counted = scrape(("127.0.0.1", port))
            # Its metrics and Spark's driver on loopback, with SPARK_LOCAL_IP as the unit sets
            # it (the library's own defaults, without it: tests/test_listeners.py).
            assert_on_loopback(listeners(restarted.process.pid))
            restarted.stop()
    finally:
        prometheus.stop()
    first.assert_told_systemd(stopped=False)
    restarted.assert_told_systemd(stopped=True)
    assert (state / "checkpoint" / "commits").is_dir()
    assert_judged_and_alerted_once(out, state / "alerts.jsonl", expected, counted)
    monitor = {a for names in seen.values() for a in names} - DATA_ALERTS
    assert seen.get("firing", set()) - DATA_ALERTS == set(), seen
    assert monitor <= {"DedupMonitorDown", "DedupMonitorNotReady"}, seen


@dataclass
class Started:
    """The unit's command running: its process, what it printed on stdout (each line as it
    comes) and on stderr (a file), the notify messages heard; the Prometheus scraping it."""

    process: subprocess.Popen[str]
    printed: list[str]
    heard: list[str]
    errors: Path
    prometheus: Prometheus
    seen: dict[str, set[str]]

    def wait_for(self, done: Callable[[], bool], what: str, seconds: float = 300) -> None:
        """Until ``done()``, it has pinged the watchdog and Prometheus scraped it up, noting
        Prometheus's alerts; the monitor must not stop meanwhile."""
        deadline = time.monotonic() + seconds
        while not (done() and "WATCHDOG=1" in self.heard and self.prometheus.up() == 1):
            assert self.process.poll() is None, self.errors.read_text()[-3000:]
            assert time.monotonic() < deadline, (
                f"not {what} in {seconds:.0f} s: {self.printed}, {self.heard}, "
                f"up {self.prometheus.up()}"
            )
            self.prometheus.note_alerts(self.seen)
            time.sleep(0.3)

    def stop(self) -> None:
        """A few scrapes and evaluations of a ready monitor, then stopped as systemd stops it:
        KillMode=mixed, SIGTERM to the monitor alone (the rest killed once it exits)."""
        for _ in range(6):
            self.prometheus.note_alerts(self.seen)
            time.sleep(0.5)
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(120) == 0

    def assert_told_systemd(self, *, stopped: bool) -> None:
        """Told that the start takes longer while the state is restored, then ready, then
        alive; a JSON object a line on stdout and stderr; if ``stopped``, that it stops and
        why, its summary its last line."""
        heard = self.heard
        extended = next(i for i, m in enumerate(heard) if m.startswith("EXTEND_TIMEOUT_USEC="))
        assert extended < heard.index("READY=1") < heard.index("WATCHDOG=1"), heard
        errors = self.errors.read_text()
        assert "step" in events(errors.splitlines())
        assert "micro_batch" in events(self.printed)
        if stopped:
            assert heard[-1] == "STOPPING=1", heard
            assert events(self.printed)[-1] == "summary"
            assert "stopping" in errors


@contextmanager
def the_unit(
    service: dict[str, str],
    env: dict[str, str],
    folder: Path,
    prometheus: Prometheus,
    seen: dict[str, set[str]],
) -> Iterator[Started]:
    """The unit's ExecStart started as systemd starts it, in a process group of its own (its
    cgroup), with a notify socket in ``folder``; what is left of it killed once it exits or
    the test fails (a failed check leaves no monitor running)."""
    folder.mkdir()
    with notify_socket(folder) as (address, heard):
        with (folder / "stderr").open("w") as errors:
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
                stderr=errors,
                text=True,
                start_new_session=True,
            )
        printed: list[str] = []
        reader = lines_of(process, printed)
        try:
            yield Started(process, printed, heard, folder / "stderr", prometheus, seen)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(60)
            reader.join(10)
            time.sleep(0.5)  # the last notify messages heard
