"""The monitor under a soak (``bench_soak.py``): ``dedup-lib watch`` in a process of its own,
serving its metrics on a free loopback port, and what it holds read from outside it (the
resident memory of its Python and its JVM from ``/proc``, its ``/metrics``, the JVM's class
histogram) or, probed, from inside it (its allocators and a tracemalloc snapshot on SIGUSR1).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

#: The metrics read at each sample (summed over their labels).
SCRAPED = (
    "process_resident_memory_bytes",
    "dedup_state_keys",
    "dedup_micro_batches_total",
    "dedup_rows_read_total",
    "dedup_waiting_sends",
    "dedup_backlog_bytes",
)
#: Runs the command line with a SIGUSR1 handler that writes what its allocators hold (Arrow's
#: pool, glibc's malloc) and, when it is tracing, a tracemalloc snapshot.
PROBED = """\
import ctypes, json, os, signal, sys, tracemalloc
_taken = [0]
class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
def _dump(signum, frame):
    import pyarrow as pa
    _taken[0] += 1
    folder = os.environ["DEDUP_SOAK_SNAPSHOTS"]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    pool = pa.default_memory_pool()
    held = {
        "arrow allocated": pool.bytes_allocated(), "arrow peak": pool.max_memory(),
        "arrow backend": pool.backend_name,
        "malloc arenas": info.arena, "malloc mapped": info.hblkhd,
        "malloc in use": info.uordblks, "malloc free held": info.fordblks,
        "traced": tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None,
    }
    with open(os.path.join(folder, f"held-{_taken[0]}.json"), "w") as out:
        json.dump(held, out)
    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot()
        snapshot.dump(os.path.join(folder, f"snapshot-{_taken[0]}.pickle"))
signal.signal(signal.SIGUSR1, _dump)
from dedup_lib.cli import main
sys.exit(main(sys.argv[1:]))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def status(pid: int) -> dict[str, int]:
    """``VmRSS``, ``RssAnon`` and ``RssFile`` of ``pid`` in bytes (empty once it is gone)."""
    found = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "RssAnon", "RssFile"):
                    found[name] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return found


def java_under(pid: int) -> list[int]:
    """The ``java`` processes under ``pid`` (its JVM: spark-submit execs it)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                    text = stat.read()
            except OSError:
                continue
            names[int(entry)] = text[text.index("(") + 1 : text.rindex(")")]
            parents[int(entry)] = int(text.rsplit(")", 1)[1].split()[1])

    def below(p: int) -> bool:
        while p > 1:
            p = parents.get(p, 0)
            if p == pid:
                return True
        return False

    return [p for p, name in names.items() if name == "java" and below(p)]


def scrape(port: int) -> dict[str, float]:
    """The metrics of :data:`SCRAPED` from ``/metrics``, each summed over its labels."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in SCRAPED:
            found[name] = found.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        if line.startswith('dedup_state_bytes{store="disk"}'):
            found["dedup_state_bytes_disk"] = float(line.rsplit(" ", 1)[1])
    return found


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def histogram(pid: int) -> dict[str, int]:
    """Bytes by class in the JVM's heap after a full collection (``jcmd GC.class_histogram``)."""
    done = subprocess.run(
        ["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True, timeout=600
    )
    found = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith(":") and parts[0][:-1].isdigit():
            found[parts[3]] = int(parts[2])
    return found


class Monitor:
    """``dedup-lib watch`` on ``landing``, in a process of its own, its output in ``log``."""

    def __init__(self, work: Path, args: argparse.Namespace) -> None:
        self.port, self.work = free_port(), work
        self.log = work / "watch.log"
        self.snapshots = work / "snapshots"
        self.snapshots.mkdir()
        env = {**os.environ, "DEDUP_SOAK_SNAPSHOTS": str(self.snapshots)}
        self.probed = bool(args.tracemalloc or args.allocators)
        if self.probed:
            traced = ["-X", f"tracemalloc={args.tracemalloc}"] if args.tracemalloc else []
            command = [sys.executable, *traced, "-c", PROBED]
        else:
            command = [str(Path(sys.executable).parent / "dedup-lib")]
        command += ["watch", str(work / "landing"), "--out", str(work / "verdicts")]
        command += ["--checkpoint", str(work / "ck"), "--alerts", str(work / "alerts.jsonl")]
        command += ["--window", args.window, "--lateness", args.lateness]
        command += ["--resend-horizon", args.resend_horizon, "--master", args.master]
        command += ["--format", "parquet", "--metrics", f"127.0.0.1:{self.port}"]
        command += ["--state", args.state]
        self.command = command
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.java: list[int] = []

    def wait_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not ready(self.port):
            self.check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the monitor not ready in {seconds:.0f} s: {self.tail()}")
            time.sleep(0.5)
        self.java = java_under(self.process.pid)

    def check(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"the monitor exited ({self.process.returncode}): {self.tail()}")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def sample(self, at: float) -> dict[str, Any]:
        self.check()
        python = status(self.process.pid)
        jvm = [status(pid) for pid in self.java]
        taken: dict[str, Any] = {
            "t": at,
            "python": python.get("VmRSS", 0),
            "python_anon": python.get("RssAnon", 0),
            "python_file": python.get("RssFile", 0),
            "jvm": sum(j.get("VmRSS", 0) for j in jvm),
            "jvm_anon": sum(j.get("RssAnon", 0) for j in jvm),
        }
        with contextlib.suppress(OSError):
            taken.update(scrape(self.port))
        taken["checkpoint"] = folder_bytes(self.work / "ck")
        return taken

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(600)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under ``folder`` (those removed while it is walked left out)."""
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total
