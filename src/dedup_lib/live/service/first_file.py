"""The monitor started on a folder where nothing has landed yet, as a service is started before
the Collector writes its first file, or after the folder's files were all rotated away.

Nothing tells the format and columns before a file does, so the monitor's runner (and the
restore of its state) waits for the first one: until then each turn of the loop looks at the
folder, the metrics say it was scanned and nothing landed (the feed-quiet alert's case), the
service manager is told the monitor is ready, and its watchdog pinged by the loop as ever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dedup_lib.errors import printable

if TYPE_CHECKING:
    from dedup_lib.live.service.loop import Stepping
    from dedup_lib.live.service.metrics import Metrics
    from dedup_lib.live.service.notify import Notifier


class FirstFile:
    """The runner's face until ``start`` returns the runner (None while nothing has landed
    in ``path``), then that runner's.

    Examples
    --------
    >>> from dedup_lib.live.service.metrics import Metrics
    >>> from dedup_lib.live.service.notify import Notifier
    >>> waiting = FirstFile(lambda: None, Metrics(60.0, 1.0), Notifier(), "landing")
    >>> waiting.step(), waiting.waiting, waiting.more
    (None, True, False)
    """

    def __init__(
        self,
        start: Callable[[], Stepping | None],
        metrics: Metrics,
        notifier: Notifier,
        path: str,
    ) -> None:
        self.start, self.metrics = start, metrics
        self.runner: Stepping | None = None
        # Nothing to restore before a file lands: ready, and so told, while the folder is quiet.
        metrics.restoring = False
        notifier.ready()
        notifier.status(f"waiting for the first file in {printable(path)}")

    @property
    def waiting(self) -> bool:
        """bool: Whether nothing has landed yet."""
        return self.runner is None

    @property
    def more(self) -> bool:
        """bool: Whether the runner has more to read at once."""
        return self.runner is not None and self.runner.more

    @property
    def refused(self) -> str | None:
        """str or None: The runner's refusal, if any."""
        return self.runner.refused if self.runner is not None else None

    def step(self) -> Any:
        """The runner's step; before it starts, a look at the folder."""
        if self.runner is None:
            self.runner = self.start()
            if self.runner is None:
                self.metrics.scanned(0, None, None)
                return None
        return self.runner.step()

    def settle(self) -> None:
        """The runner's settle, once it has started."""
        if self.runner is not None:
            self.runner.settle()

    def stop(self) -> None:
        """The runner's stop, once it has started."""
        if self.runner is not None:
            self.runner.stop()
