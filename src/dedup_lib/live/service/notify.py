"""systemd's notify protocol (``sd_notify``): datagrams such as ``READY=1`` and
``WATCHDOG=1`` sent to the socket ``$NOTIFY_SOCKET`` names (a leading ``@``: Linux's abstract
namespace). Without that variable (not started by systemd with ``Type=notify``) every call
does nothing. systemd's ``vsock:`` addresses (a service in a virtual machine) are not spoken.

Written here rather than taken from PyPI: the protocol is one ``sendto`` per message, and the
packages that speak it are unmaintained or asynchronous only.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping


class Notifier:
    """The service manager, as ``$NOTIFY_SOCKET`` and ``$WATCHDOG_USEC`` name it when this
    process starts.

    Parameters
    ----------
    environ : Mapping[str, str], optional
        Where ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID`` are read, once;
        default ``os.environ``.

    Examples
    --------
    Outside systemd, nothing is sent:

    >>> notifier = Notifier(environ={})
    >>> notifier.ready(), notifier.watchdog_interval()
    (False, None)
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.address = env.get("NOTIFY_SOCKET") or None
        usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        # As sd_watchdog_enabled: 0 is no watchdog; another process's is not this one's.
        mine = not pid or pid == str(os.getpid())
        self.interval = int(usec) / 1e6 if usec.isdigit() and int(usec) and mine else None

    def send(self, *fields: str) -> bool:
        """Send ``fields`` (``NAME=value``) in one datagram; False when there is no socket or
        it cannot be reached (a notification is never worth a failure)."""
        if self.address is None:
            return False
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto("\n".join(fields).encode(), target)
            return True
        return False

    def ready(self) -> bool:
        """The service has started: its state is restored."""
        return self.send("READY=1")

    def watchdog(self) -> bool:
        """The service is alive: its loop ended a turn."""
        return self.send("WATCHDOG=1")

    def extend(self, seconds: float) -> bool:
        """Starting takes ``seconds`` more from now."""
        return self.send(f"EXTEND_TIMEOUT_USEC={int(seconds * 1e6)}")

    def status(self, text: str) -> bool:
        """What the service does now, for ``systemctl status``."""
        return self.send(f"STATUS={' '.join(text.split())}")

    def stopping(self) -> bool:
        """The service is stopping."""
        return self.send("STOPPING=1")

    def watchdog_interval(self) -> float | None:
        """Seconds within which systemd expects :meth:`watchdog` (``WatchdogSec=``), or None."""
        return self.interval
