"""Nothing a ``dedup-lib`` command starts is open to the network by default: every TCP socket
that listens and every UDP socket that is bound, IPv4 and IPv6, of the command and all it
starts (Spark's driver JVM, Voilà, its kernels and theirs), is on loopback (127.0.0.0/8, ::1).

Read from ``/proc`` (Linux): each process's sockets are the inodes its ``fd`` links name,
looked up in its network namespace's ``net/tcp``, ``tcp6``, ``udp`` and ``udp6``; the process
tree from each task's ``children``. And the options that ask otherwise (``--driver-host``,
``--spark-ui``), as the commands pass them on."""

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
from dedup_lib.cli import parser, terminal
from dedup_lib.spark import free_port
from serve_kit import Served, get, serve

PROC = Path("/proc")

reads_proc = pytest.mark.skipif(
    not (PROC / "self" / "net" / "tcp6").exists(), reason="reads /proc (Linux)"
)

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


def _first_line(process: subprocess.Popen[str], err: Path, seconds: float = 240) -> str:
    """The first line the command prints (its first micro-batch's), read on a thread."""
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        lines.extend(line for line in process.stdout if line.strip())

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + seconds
    while not lines:
        if process.poll() is not None:
            said = err.read_text(errors="replace")[-2000:]
            pytest.fail(f"watch exited {process.returncode} before a micro-batch: {said}")
        assert time.monotonic() < deadline, f"no micro-batch in {seconds:.0f} s: {err.read_text()}"
        time.sleep(0.2)
    return lines[0]


@pytest.fixture(
    params=[["--master", "local[1]"], ["--remote", "local[1]"]], ids=["classic", "connect"]
)
def watching(
    request: pytest.FixtureRequest, landing: Path, tmp_path: Path
) -> Iterator[subprocess.Popen[str]]:
    """``watch`` on classic Spark, and on a local Spark Connect server it starts."""
    argv = [
        sys.executable, "-m", "dedup_lib", "watch", str(landing),
        "--out", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"),
        "--every", "0.5", *request.param, "--metrics", f"127.0.0.1:{free_port()}",
    ]  # fmt: skip
    env = {**os.environ, "DEDUP_DRIVER_MEMORY": "1g"}
    env.pop("SPARK_REMOTE", None)
    with (tmp_path / "stderr.log").open("w") as err:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait(60)


@pytest.mark.spark  # starts Spark in a child process
@reads_proc
def test_watch_listens_on_loopback_only(watching: subprocess.Popen[str], tmp_path: Path) -> None:
    """The monitor, its first micro-batch done: its metrics, Spark's driver and block
    manager, and the local Connect server, on loopback (no UI: the next test's)."""
    assert "sends judged" in _first_line(watching, tmp_path / "stderr.log")
    assert_on_loopback(listeners(watching.pid))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve(sample_path("incident.parquet")) as server:
        yield server


@pytest.mark.spark  # starts Spark in a child process
@reads_proc
def test_explore_listens_on_loopback_only(served: Served) -> None:
    """The page served (its kernel has run it, Spark and the explorer built): Voilà, the
    kernel and its Spark JVM (driver, block manager, UI) on loopback."""
    status, _, body = get(served.url)
    assert status == 200, served.diagnosis()
    assert "Duplicate detection window explorer" in body
    assert any("java" in p for p in served.processes()), served.diagnosis()
    assert_on_loopback(listeners(served.process.pid))


@pytest.mark.parametrize(
    ("given", "wanted"),
    [("127.0.0.1:4040", "127.0.0.1:4040"), ("[::1]:0", "[::1]:0"), (" OFF ", "off")],
)
def test_spark_ui_takes_an_address_with_its_port_or_off(given: str, wanted: str) -> None:
    args = parser().parse_args(["simulate", "in.parquet", "--spark-ui", given])
    assert args.spark_ui == wanted


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--spark-ui", "4040"),
        ("--spark-ui", "0.0.0.0"),
        ("--spark-ui", "host:65536"),
        ("--spark-ui", "a b:4040"),
        ("--driver-host", "a b"),
        ("--driver-host", ""),
    ],
)
def test_a_bad_address_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(["simulate", "in.parquet", option, value])
    assert stop.value.code == 2
    assert option in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "ui"),
    [
        (["simulate", "in.parquet"], None),
        (["watch", "in", "--out", "o", "--checkpoint", "c"], "off"),
        (
            ["watch", "in", "--out", "o", "--checkpoint", "c", "--spark-ui", "127.0.0.1:0"],
            "127.0.0.1:0",
        ),
        (["simulate", "in.parquet", "--spark-ui", "off"], "off"),
    ],
)
def test_the_commands_pass_where_spark_listens(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], ui: str | None
) -> None:
    """Spark's UI on loopback (get_spark's default) but for watch, which has none unless
    ``--spark-ui`` asks; ``--driver-host`` as given."""
    given: dict[str, object] = {}
    monkeypatch.setattr(terminal, "get_spark", lambda *a, **kw: given.update(kw) or object())
    args = parser().parse_args([*argv, "--driver-host", "10.0.0.5"])
    args.spark = None
    terminal.start_spark(args, ui=args.command != "watch")
    assert given["ui"] == ui
    assert given["driver_host"] == "10.0.0.5"
