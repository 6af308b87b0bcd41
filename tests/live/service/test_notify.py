"""systemd's notify protocol spoken to a socket of the test's own, as systemd binds it: a
datagram socket named by ``NOTIFY_SOCKET``, a path or (``@``) a name in the abstract
namespace; each message one datagram from this process; nothing sent, and nothing raised,
without the variable or the socket; the watchdog's interval only when it is this process's."""

from __future__ import annotations

import os
import socket
import struct
import threading
import uuid

import pytest

from dedup_lib.live.service.notify import Notifier


def heard(end: socket.socket, count: int) -> list[str]:
    return [end.recv(4096).decode() for _ in range(count)]


def test_each_message_is_one_datagram_to_the_socket_named(manager, monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", manager.getsockname())
    notifier = Notifier()
    assert notifier.extend(90)
    assert notifier.status("restoring\nthe   state")
    assert notifier.ready()
    assert notifier.watchdog()
    assert notifier.extend(0.25)
    assert notifier.stopping()
    assert heard(manager, 6) == [
        "EXTEND_TIMEOUT_USEC=90000000",
        "STATUS=restoring the state",  # a newline would start another field
        "READY=1",
        "WATCHDOG=1",
        "EXTEND_TIMEOUT_USEC=250000",
        "STOPPING=1",
    ]


def test_fields_sent_together_are_one_datagram(manager):
    notifier = Notifier(environ={"NOTIFY_SOCKET": manager.getsockname()})
    assert notifier.send("READY=1", "STATUS=watching")
    assert heard(manager, 1) == ["READY=1\nSTATUS=watching"]


def test_an_at_sign_names_the_abstract_namespace():
    name = f"dedup-lib-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as end:
        end.bind("\0" + name)
        end.settimeout(5)
        notifier = Notifier(environ={"NOTIFY_SOCKET": "@" + name})
        assert notifier.ready()
        assert notifier.watchdog()
        assert heard(end, 2) == ["READY=1", "WATCHDOG=1"]


def test_the_sender_is_this_process_from_any_thread(manager):
    """``NotifyAccess=main``: systemd takes a message only from the main process, which it
    knows by the datagram's credentials; the monitor pings from its loop's thread."""
    manager.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    notifier = Notifier(environ={"NOTIFY_SOCKET": manager.getsockname()})
    pinging = threading.Thread(target=notifier.watchdog)
    pinging.start()
    pinging.join()
    size = struct.calcsize("3i")
    message, ancillary, _, _ = manager.recvmsg(4096, socket.CMSG_SPACE(size))
    assert message == b"WATCHDOG=1"
    [(level, kind, data)] = ancillary
    assert (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS)
    pid, uid, _ = struct.unpack("3i", data[:size])
    assert (pid, uid) == (os.getpid(), os.getuid())


def test_without_the_variable_nothing_is_sent(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    notifier = Notifier()
    assert notifier.address is None
    calls = (notifier.ready, notifier.watchdog, notifier.stopping)
    assert not any(call() for call in calls)
    assert not notifier.extend(90)
    assert not notifier.status("watching")
    assert not Notifier(environ={"NOTIFY_SOCKET": ""}).ready()


@pytest.mark.parametrize("address", ["missing", "@dedup-lib-test-nobody-binds-this"])
def test_a_socket_nobody_listens_on_is_not_a_failure(tmp_path, address):
    if address == "missing":
        address = str(tmp_path / "gone")
    assert not Notifier(environ={"NOTIFY_SOCKET": address}).ready()


@pytest.mark.parametrize(
    ("usec", "pid", "interval"),
    [
        ("600000000", None, 600.0),
        ("600000000", "self", 600.0),
        ("600000000", "other", None),  # a parent's watchdog, inherited
        ("1500000", "self", 1.5),
        ("0", None, None),
        ("", None, None),
        ("ten minutes", None, None),
        (None, "self", None),
    ],
)
def test_the_watchdog_interval_is_this_processs_only(usec, pid, interval):
    environ = {"NOTIFY_SOCKET": "/run/systemd/notify"}
    if usec is not None:
        environ["WATCHDOG_USEC"] = usec
    if pid is not None:
        environ["WATCHDOG_PID"] = str(os.getpid() if pid == "self" else os.getppid())
    assert Notifier(environ=environ).watchdog_interval() == interval


def test_the_environment_is_read_when_made(manager, monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", manager.getsockname())
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    notifier = Notifier()
    monkeypatch.delenv("NOTIFY_SOCKET")
    monkeypatch.delenv("WATCHDOG_USEC")
    assert notifier.watchdog_interval() == 30.0
    assert notifier.ready()
    assert heard(manager, 1) == ["READY=1"]
