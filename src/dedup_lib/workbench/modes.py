"""The window explorer's caches, one per partitioning mode, some still being built in the
background: each is handed over once built, and a failure to build one is kept to be said."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

    from dedup_lib.sweep.cache import ReplayCache


@dataclass(frozen=True)
class ModeUpdate:
    """The modes whose build failed, with why, and whether any is still being built."""

    failed: list[tuple[bool, BaseException]]
    waiting: bool


class ModeCaches:
    """One :class:`ReplayCache` per partitioning mode: those built, and those being built."""

    def __init__(self, caches: dict[bool, ReplayCache]) -> None:
        self._caches = dict(caches)
        self._pending: dict[bool, Future[ReplayCache]] = {}
        self._lock = threading.Lock()

    def add(self, pending: dict[bool, Future[ReplayCache]], done: Callable[[], object]) -> None:
        """Modes being built; ``done`` is called (in the thread that built it) as each ends."""
        with self._lock:
            self._pending.update(pending)
        for future in pending.values():
            future.add_done_callback(lambda _: done())

    def wait(self, mode: bool | None = None) -> None:
        """Until ``mode`` (None: every mode) is built, or its build failed."""
        with self._lock:
            futures = [f for m, f in self._pending.items() if mode is None or m == mode]
        for future in futures:
            future.result()

    def collect(self) -> tuple[dict[bool, ReplayCache], ModeUpdate]:
        """The caches built so far, having taken over those finished since the last call."""
        with self._lock:
            ready = [m for m, f in self._pending.items() if f.done() and not f.exception()]
            for mode in ready:
                self._caches[mode] = self._pending.pop(mode).result()
            failed = [(m, f.exception()) for m, f in self._pending.items() if f.done()]
            waiting = len(self._pending) > len(failed)
            caches = dict(self._caches)
        errors = [(m, e) for m, e in failed if e is not None]
        return caches, ModeUpdate(errors, waiting)
