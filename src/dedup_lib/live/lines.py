"""What each micro-batch of the monitor held: its counts per minute of send time, its alerts,
and the size of the state after it, as :class:`BatchLine`. Each line is kept in the
micro-batch's commit (JSON), so a line reads the same after a restart."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

#: A micro-batch's counts per minute of send time.
MINUTE_COLUMNS = ["minute", "sends", "duplicates", "late"]
#: The alerts' fields that hold times.
_TIMES = ("send_time", "original_send_time")


@dataclass(frozen=True)
class StateSize:
    """The state after a micro-batch: ``keys`` held (each with its anchor), the bytes its
    index takes in memory, and the bytes of its segments on disk; ``waiting``, the sends that
    wait for the watermark."""

    keys: int = 0
    memory: int = 0
    disk: int = 0
    waiting: int = 0

    def __str__(self) -> str:
        return (
            f"state {self.keys:,} keys, {_size(self.memory)} in memory, {_size(self.disk)} "
            f"on disk; {self.waiting:,} waiting"
        )


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    raise AssertionError


@dataclass
class BatchLine:
    """What one micro-batch of verdicts held: its counts per minute of send time
    (:data:`MINUTE_COLUMNS`), its alerts (one dict each, as ``alerts`` gets them) and the
    state after it."""

    batch: int
    minutes: pd.DataFrame
    found: list[dict[str, Any]] = field(default_factory=list)
    state: StateSize = field(default_factory=StateSize)

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
            f"duplicates, {self.late:,} late, {self.alerts:,} alerts; {self.state}"
        )

    def to_json(self) -> dict[str, Any]:
        minutes = self.minutes.assign(minute=self.minutes["minute"].astype(str))
        return {
            "batch": self.batch,
            "minutes": minutes.to_dict("records"),
            "found": self.found,
            "state": vars(self.state),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchLine:
        minutes = pd.DataFrame(data["minutes"], columns=MINUTE_COLUMNS)
        minutes["minute"] = pd.to_datetime(minutes["minute"])
        found = [
            {k: _time(v) if k in _TIMES else v for k, v in alert.items()} for alert in data["found"]
        ]
        return cls(int(data["batch"]), minutes, found, StateSize(**data.get("state", {})))


def _time(value: Any) -> Any:
    return datetime.fromisoformat(value) if isinstance(value, str) else value
