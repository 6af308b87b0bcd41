"""What each micro-batch of the monitor held, and how it reaches the caller.

On classic Spark the micro-batch functions run in the caller's process, which keeps each
:class:`BatchLine` as it is made. On Spark Connect they run in the server's Python, which
cannot reach the caller's objects: there each micro-batch writes its line (and the load its
counts) as a small JSON file in the checkpoint folder, and a :class:`Relay` in the caller's
process reads them in micro-batch order and hands them on. Client and server must see the
same folders (a local Connect server, or a shared mount), as they must for ``out`` and the
checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

#: A micro-batch's counts per minute of send time.
MINUTE_COLUMNS = ["minute", "sends", "duplicates", "late"]
#: The alerts' fields that hold times.
_TIMES = ("send_time", "original_send_time")


@dataclass
class BatchLine:
    """What one micro-batch of verdicts held: its counts per minute of send time
    (:data:`MINUTE_COLUMNS`) and its alerts (one dict each, as ``alerts`` gets them)."""

    batch: int
    minutes: pd.DataFrame
    found: list[dict[str, Any]] = field(default_factory=list)

    @property
    def judged(self) -> int:
        return int(self.minutes["sends"].sum())

    @property
    def duplicates(self) -> int:
        return int(self.minutes["duplicates"].sum())

    @property
    def late(self) -> int:
        return int(self.minutes["late"].sum())

    @property
    def alerts(self) -> int:
        return len(self.found)

    def __str__(self) -> str:
        return (
            f"batch {self.batch}: {self.judged:,} sends judged, {self.duplicates:,} "
            f"duplicates, {self.late:,} late, {self.alerts:,} alerts"
        )

    def to_json(self) -> dict[str, Any]:
        minutes = self.minutes.assign(minute=self.minutes["minute"].astype(str))
        return {"batch": self.batch, "minutes": minutes.to_dict("records"), "found": self.found}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchLine:
        minutes = pd.DataFrame(data["minutes"], columns=MINUTE_COLUMNS)
        minutes["minute"] = pd.to_datetime(minutes["minute"])
        found = [
            {k: _time(v) if k in _TIMES else v for k, v in alert.items()} for alert in data["found"]
        ]
        return cls(int(data["batch"]), minutes, found)


def _time(value: Any) -> Any:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def record(folder: str, batch_id: int, data: dict[str, Any]) -> None:
    """Write one micro-batch's ``data`` as ``folder/NNNNNNNNNN.json``, whole or not at all (a
    micro-batch done again after a crash writes its own file again)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{batch_id:010d}.json")
    partial = f"{path}.{os.getpid()}.part"
    with open(partial, "w", encoding="utf-8") as out:
        json.dump(data, out, default=str, ensure_ascii=False)
    os.replace(partial, path)


class Relay:
    """Reads the files :func:`record` writes in ``lines`` and ``loads``, each once, in
    micro-batch order: :meth:`drain` now, or every ``every`` seconds from a thread between
    :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        lines: str,
        loads: str,
        on_line: Callable[[BatchLine], None],
        on_load: Callable[[dict[str, int]], None],
        every: float = 0.25,
    ) -> None:
        self.folders = ((lines, lambda d: on_line(BatchLine.from_json(d))), (loads, on_load))
        self.every = every
        self.seen: dict[str, set[str]] = {lines: set(), loads: set()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def skip_present(self) -> None:
        """Leave out what is there now: an earlier run's micro-batches."""
        for folder, _ in self.folders:
            with contextlib.suppress(FileNotFoundError):
                self.seen[folder].update(n for n in os.listdir(folder) if n.endswith(".json"))

    def drain(self) -> None:
        for folder, take in self.folders:
            try:
                names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
            except FileNotFoundError:
                continue
            for name in names:
                if name in self.seen[folder]:
                    continue
                with open(os.path.join(folder, name), encoding="utf-8") as file:
                    data = json.load(file)
                self.seen[folder].add(name)
                take(data)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dedup-relay", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.drain()
            except Exception as failure:
                self.error = failure
                return

    def stop(self) -> None:
        """Stop reading, after what is there has been read; a failure of ``on_line`` while
        reading is raised here."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error
        self.drain()
