"""Where a process and all it starts listen, read from ``/proc`` (Linux): every TCP socket
that listens and every UDP socket that is bound, IPv4 and IPv6. Each process's sockets are the
inodes its ``fd`` links name, looked up in its network namespace's ``net/tcp``, ``tcp6``,
``udp`` and ``udp6``; the process tree from each task's ``children``. For the tests that a
command opens nothing to the network by default: ``tests/test_listeners.py`` (``watch``) and
``tests/cli/test_explore_server.py`` (``explore``, with Voila, its kernel and its JVM)."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

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
