"""The monitor as a service manager sees it: systemd's notify protocol
(:mod:`dedup_lib.live.service.notify`) told when the state is restored (``READY=1``, with
``EXTEND_TIMEOUT_USEC`` while a large restore runs) and after each turn of the micro-batch
loop (``WATCHDOG=1``, from the loop itself, so a loop that hangs stops the pings and systemd
restarts it); and the answer of ``/-/healthy``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dedup_lib.errors import printable
from dedup_lib.live.service.exposition import Answer
from dedup_lib.live.service.notify import Notifier

#: How long a restore is granted at a time: told again every third of it while it runs.
RESTORE_GRANT = 90.0
#: A loop that has not ended a turn for this long, or twenty scan intervals if longer, is
#: hung (a micro-batch of a million sends takes well under a minute).
HUNG_AFTER = 600.0


class Pulse:
    """The micro-batch loop's turns: each ends with :meth:`beat`; ``every``, the seconds
    between scans."""

    def __init__(self, every: float, notifier: Notifier | None = None) -> None:
        self.every = every
        self.notifier = notifier or Notifier()
        self.last = time.monotonic()
        self.error: BaseException | None = None
        self.stopped = False
        #: A restore runs: the loop has not started, and that is no hang.
        self.restoring = False

    def beat(self) -> None:
        """A turn of the loop ended: the folder was scanned (and any micro-batch run)."""
        self.last = time.monotonic()
        self.notifier.watchdog()

    def health(self) -> Answer:
        """``/-/healthy``: the loop has not failed or stopped, and it turns."""
        if self.error is not None:
            first = str(self.error).splitlines()[0] if str(self.error) else ""
            return False, printable(
                f"the micro-batch loop failed: {type(self.error).__name__}: {first}"
            )
        if self.stopped:
            return False, "the micro-batch loop has stopped"
        if self.restoring:
            return True, "restoring the state from the checkpoint"
        idle = time.monotonic() - self.last
        if idle > max(HUNG_AFTER, 20 * self.every):
            return False, f"the micro-batch loop has not turned for {idle:.0f} s"
        return True, "running"


@contextmanager
def restoring(pulse: Pulse) -> Iterator[None]:
    """While inside, the service manager is told every so often that the start takes longer
    (``EXTEND_TIMEOUT_USEC``), so a day's state restores without a start timeout, and the
    pulse is healthy however long it takes; then ``READY=1``, the loop's clock from now."""
    notifier, done = pulse.notifier, threading.Event()

    def extend() -> None:
        while True:
            notifier.extend(RESTORE_GRANT)
            if done.wait(RESTORE_GRANT / 3):
                return

    notifier.status("restoring the state from the checkpoint")
    ticker = threading.Thread(target=extend, name="dedup-restoring", daemon=True)
    pulse.restoring = True
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        pulse.restoring, pulse.last = False, time.monotonic()
    notifier.ready()
    notifier.status("watching")
