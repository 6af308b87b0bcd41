"""Nothing a ``dedup-lib`` command starts is open to the network by default: every TCP socket
that listens and every UDP socket that is bound, IPv4 and IPv6, of the command and all it
starts (Spark's driver JVM, Voilà, its kernels and theirs), is on loopback (127.0.0.0/8, ::1).

Read from ``/proc`` (Linux): each process's sockets are the inodes its ``fd`` links name,
looked up in its network namespace's ``net/tcp``, ``tcp6``, ``udp`` and ``udp6``; the process
tree from each task's ``children``."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dedup_lib import sample_path
from dedup_lib.spark import free_port
from serve_kit import Served, get, serve

PROC = Path("/proc")

pytestmark = [
    pytest.mark.spark,  # each test starts Spark in a child process
    pytest.mark.skipif(not (PROC / "self" / "net" / "tcp6").exists(), reason="reads /proc (Linux)"),
]

#: /proc/net/tcp's state of a listening socket; an unconnected UDP socket shows as CLOSE (07).
LISTEN = "0A"
UDP_CONNECTED = "01"


@dataclass(frozen=True)
class Listener:
    """A socket open to whoever reaches its address: its protocol, address, port and owner."""

    protocol: str
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int
    pid: int

    @property
    def loopback(self) -> bool:
        address = self.address
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return address.is_loopback

    def __str__(self) -> str:
        return f"{self.protocol} {self.address}:{self.port} (pid {self.pid})"


def _address(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """``/proc/net``'s ``ADDR:PORT``: the address in 32-bit words of host (little-endian)
    order, the port big-endian hex."""
    text, port = field.split(":")
    raw = b"".join(bytes.fromhex(text[i : i + 8])[::-1] for i in range(0, len(text), 8))
    return ipaddress.ip_address(raw), int(port, 16)


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for children in (PROC / str(current) / "task").glob("*/children"):
            try:
                todo.extend(int(c) for c in children.read_text().split())
            except OSError:
                continue
    return found


def _inodes(pid: int) -> set[str]:
    found = set()
    try:
        for fd in (PROC / str(pid) / "fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    except OSError:
        pass
    return found


def listeners(pid: int) -> list[Listener]:
    """Every listening TCP and bound UDP socket of ``pid`` and of every process below it."""
    found = []
    for process in tree(pid):
        inodes = _inodes(process)
        for protocol in ("tcp", "tcp6", "udp", "udp6"):
            try:
                table = (PROC / str(process) / "net" / protocol).read_text().splitlines()[1:]
            except OSError:
                continue
            for row in table:
                fields = row.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if inode not in inodes:
                    continue
                if protocol.startswith("tcp") and state != LISTEN:
                    continue
                if protocol.startswith("udp") and state == UDP_CONNECTED:
                    continue
                address, port = _address(local)
                found.append(Listener(protocol, address, port, process))
    return sorted(set(found), key=str)


def assert_on_loopback(found: list[Listener]) -> None:
    print("listeners:", *map(str, found), sep="\n  ")  # the figures, with pytest -s
    assert found, "no listener found: the probe reads nothing"
    open_ = [str(f) for f in found if not f.loopback]
    assert open_ == [], f"open beyond this machine: {open_}; all: {[str(f) for f in found]}"


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    folder = tmp_path / "landing"
    folder.mkdir()
    shutil.copy(sample_path("incident.parquet"), folder / "incident.parquet")
    return folder


def _first_line(process: subprocess.Popen[str], seconds: float = 240) -> str:
    """The first line the command prints (its first micro-batch's), read on a thread."""
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        lines.extend(line for line in process.stdout if line.strip())

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + seconds
    while not lines:
        if process.poll() is not None:
            err = process.stderr.read() if process.stderr else ""
            pytest.fail(f"watch exited {process.returncode} before a micro-batch: {err[-2000:]}")
        assert time.monotonic() < deadline, f"no micro-batch in {seconds:.0f} s"
        time.sleep(0.2)
    return lines[0]


@pytest.fixture
def watching(landing: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    argv = [
        sys.executable, "-m", "dedup_lib", "watch", str(landing),
        "--out", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"),
        "--every", "0.5", "--master", "local[1]", "--metrics", f"127.0.0.1:{free_port()}",
    ]  # fmt: skip
    env = {**os.environ, "DEDUP_DRIVER_MEMORY": "1g"}
    env.pop("SPARK_REMOTE", None)
    process = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait(60)


def test_watch_listens_on_loopback_only(watching: subprocess.Popen[str]) -> None:
    """The monitor, its first micro-batch done: its metrics, and Spark's driver and block
    manager, on loopback; Spark's UI off (no listener beyond those)."""
    assert "sends judged" in _first_line(watching)
    assert_on_loopback(listeners(watching.pid))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve(sample_path("incident.parquet")) as server:
        yield server


def test_explore_listens_on_loopback_only(served: Served) -> None:
    """The page served (its kernel has run it, Spark and the explorer built): Voilà, the
    kernel and its Spark JVM (driver, block manager, UI) on loopback."""
    status, _, body = get(served.url)
    assert status == 200, served.diagnosis()
    assert "Duplicate detection window explorer" in body
    assert any("java" in p for p in served.processes()), served.diagnosis()
    assert_on_loopback(listeners(served.process.pid))
