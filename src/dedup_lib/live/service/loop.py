"""The monitor's micro-batch loop (:class:`Loop`), the thread that turns it for as long as the
monitor runs, and what it learns as its micro-batches commit (:class:`Progress`), bounded: a
monitor runs for weeks."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dedup_lib.live.output.lines import BatchLine
    from dedup_lib.live.service.pulse import Pulse


class Stepping(Protocol):
    """The runner's face the loop drives (:class:`dedup_lib.live.runner.Runner`,
    :class:`dedup_lib.live.executors.runner.ExecutorsRunner`)."""

    @property
    def more(self) -> bool: ...

    @property
    def refused(self) -> str | None: ...

    def step(self) -> Any: ...

    def settle(self) -> None: ...

    def stop(self) -> None: ...


#: The latest micro-batches' lines and load counts a monitor keeps: it runs for weeks, and
#: what it keeps must not grow with the micro-batches it runs.
KEPT_LINES = 100
KEPT_LOADS = 1000


class Progress:
    """What a monitor learns after it is built, as its micro-batches commit: their lines,
    their loads' counts, and what stopped it. With what the first file told
    (:class:`~dedup_lib.live.watch.Found`), the part of a :class:`~dedup_lib.live.watch.Watch`
    that changes.

    Parameters
    ----------
    on_batch : callable, optional
        Called with each micro-batch's line as it is committed.

    Attributes
    ----------
    lines : deque of BatchLine
        The latest micro-batches' lines (counts, state size, alerts), :data:`KEPT_LINES` at
        most.
    loads : deque of dict
        The latest micro-batches' counts of what each read: ``read``, ``valid``,
        ``quarantined``, ``skipped`` (:data:`KEPT_LOADS` at most).
    loaded : collections.Counter
        Those counts added up over every micro-batch this process ran, and
        ``micro_batches``, how many it ran.
    error : BaseException or None
        What stopped the monitor by itself, if it failed.
    """

    def __init__(self, on_batch: Callable[[BatchLine], None] | None = None) -> None:
        self.lines: deque[BatchLine] = deque(maxlen=KEPT_LINES)
        self.loads: deque[dict[str, int]] = deque(maxlen=KEPT_LOADS)
        self.loaded: Counter[str] = Counter()
        self.error: BaseException | None = None
        self._on_batch = on_batch

    def committed(self, line: BatchLine) -> None:
        """A micro-batch's line, kept and passed on to ``on_batch``."""
        self.lines.append(line)
        if self._on_batch is not None:
            self._on_batch(line)

    def read(self, counts: dict[str, int]) -> None:
        """A micro-batch's load counts, kept and added up."""
        self.loads.append(counts)
        self.loaded.update(counts)
        self.loaded["micro_batches"] += 1


class Loop:
    """The thread that runs a micro-batch every ``every`` seconds (sooner while files wait)
    until ``stopping`` is set (:meth:`~dedup_lib.live.watch.Watch.stop`); a failure is kept
    in ``progress``."""

    def __init__(self, runner: Stepping, pulse: Pulse, progress: Progress, every: float) -> None:
        self.runner, self.pulse, self.progress, self.every = runner, pulse, progress, every
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="dedup-watch", daemon=True)

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                started = time.monotonic()
                self.runner.step()
                self.pulse.beat()
                if not self.runner.more:
                    self.stopping.wait(max(0.0, self.every - (time.monotonic() - started)))
        except BaseException as failure:
            self.progress.error = self.pulse.error = failure
        finally:
            try:
                self.runner.stop()
            except BaseException as failure:  # the stop's own failure, unless one came first
                self.progress.error = self.progress.error or failure
                self.pulse.error = self.pulse.error or failure
            finally:
                self.pulse.stopped = True
