"""systemd's end of the notify protocol, for the tests of what the monitor tells it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[socket.socket]:
    """systemd's end: a datagram socket bound in the test's folder."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as end:
        end.bind(str(tmp_path / "notify"))
        end.settimeout(5)
        yield end
