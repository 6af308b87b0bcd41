"""What each micro-batch of the monitor held: its verdicts per minute of send time, its alerts
per minute and the latest of them, and the size of the state after it, as :class:`BatchLine`.
Each line is kept in the micro-batch's commit (JSON), so a line reads the same after a
restart; it stays small whatever the micro-batch held (the alerts themselves go to the
alerts file)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.memory import format_size
from dedup_lib.rules.policy import DUPLICATE

#: What a monitor's caller is told: each micro-batch's line, its load's counts, and notes.
Tell = tuple[
    "Callable[[BatchLine], None]", "Callable[[dict[str, int]], None]", "Callable[[str], None]"
]
#: A micro-batch's counts per minute of send time, and its alerts' per minute and kind.
MINUTE_COLUMNS = ["minute", "sends", "duplicates", "late"]
ALERT_COLUMNS = ["minute", "kind", "alerts"]
#: The share of its memory budget from which a line says how close the driver's state is.
WARN_SHARE = 0.8
#: The latest alerts a line carries.
LATEST = 100
#: The alerts' fields that hold times.
_TIMES = ("send_time", "original_send_time")
#: The stream of a micro-batch of verdicts, and of one of the resends' query, which pairs the
#: accepted copies beside the judge when the state is on the executors (numbered apart).
VERDICTS = "batch"
RESENDS = "resends"


@dataclass(frozen=True)
class StateSize:
    """The state after a micro-batch: ``keys`` held (each with its anchor), the bytes its
    indexes take in memory, and the bytes of its segments on disk; ``waiting``, the sends that
    wait for the watermark; ``budget``, the most it may take in memory (0: none given). With
    ``executors``, the state is in Spark's state stores on the executors: ``memory`` and
    ``disk`` are then what Spark's progress reports of them (RocksDB's memory, its files on the
    executors' disks), and ``keys`` and ``waiting`` what the judge's changes to its state add
    up to, when ``counted``.

    Examples
    --------
    >>> print(StateSize(2, 160, 4096, 1))
    state 2 keys, 160 B in memory, 4.0 KiB on disk; 1 waiting
    >>> import textwrap
    >>> print(textwrap.fill(str(StateSize(9_000_000, 850 << 20, 0, 0, budget=1 << 30)), 88))
    state 9,000,000 keys, 850.0 MiB in memory, 0 B on disk; 0 waiting; 83% of its memory
    budget: past it, micro-batches are refused (--state executors keeps the state on Spark's
    executors)
    >>> print(StateSize(executors=True))
    state on the executors
    >>> print(StateSize(memory=3 << 20, disk=5 << 30, executors=True))
    state on the executors, 3.0 MiB in memory, 5.0 GiB on disk
    >>> print(StateSize(2, 3 << 20, 5 << 30, 1, executors=True, counted=True))
    state on the executors, 2 keys, 3.0 MiB in memory, 5.0 GiB on disk; 1 waiting
    """

    keys: int = 0
    memory: int = 0
    disk: int = 0
    waiting: int = 0
    executors: bool = False
    budget: int = 0
    #: With ``executors``: whether ``keys`` and ``waiting`` were counted (the judge's changes
    #: to its state, summed over the micro-batches); a checkpoint that began before they were
    #: counted has not. The driver's index always counts them.
    counted: bool = False

    @property
    def known(self) -> bool:
        """bool: Whether ``keys`` and ``waiting`` are known: the driver's, or counted."""
        return self.counted or not self.executors

    def __str__(self) -> str:
        if self.executors:
            told = "state on the executors"
            if self.counted:
                told += f", {self.keys:,} keys"
            if self.memory or self.disk:
                told += f", {format_size(self.memory)} in memory, {format_size(self.disk)} on disk"
            return told + (f"; {self.waiting:,} waiting" if self.counted else "")
        told = (
            f"state {self.keys:,} keys, {format_size(self.memory)} in memory, "
            f"{format_size(self.disk)} on disk; {self.waiting:,} waiting"
        )
        if self.budget and self.memory >= WARN_SHARE * self.budget:
            told += (
                f"; {self.memory / self.budget:.0%} of its memory budget: past it, micro-batches"
                " are refused (--state executors keeps the state on Spark's executors)"
            )
        return told


def alert_parts(alerts: pa.Table) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """A micro-batch's ``alerts`` as its line holds them: the latest :data:`LATEST` (one
    dict each, as the alerts file has them), and their count per minute and kind."""
    kinds = pd.DataFrame(
        {"minute": _minute(alerts["send_time"]), "kind": alerts["kind"].to_pandas()}
    )
    alerted = kinds.groupby(["minute", "kind"], dropna=False).size().reset_index(name="alerts")
    return alerts.slice(max(0, alerts.num_rows - LATEST)).to_pylist(), alerted


@dataclass
class BatchLine:
    """What one micro-batch of verdicts held: its counts per minute of send time
    (:data:`MINUTE_COLUMNS`), its alerts per minute and kind (:data:`ALERT_COLUMNS`) with
    the latest :data:`LATEST` of them (one dict each, as the alerts file has them), and
    the state after it. Its ``stream`` is :data:`VERDICTS`, or :data:`RESENDS` for a
    micro-batch of the resends' query (with the state on the executors), which judges no
    send: its line holds the resends that reached consumers again, and no minutes.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from datetime import datetime, timezone
    >>> sent = datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc)
    >>> resent = pa.table({"kind": ["resend"], "send_time": [sent], "message_id": ["m-2"]})
    >>> print(BatchLine.of_resends(3, resent, StateSize(executors=True)))
    resends 3: 1 resends reached consumers again; state on the executors
    """

    batch: int
    minutes: pd.DataFrame
    found: list[dict[str, Any]] = field(default_factory=list)
    state: StateSize = field(default_factory=StateSize)
    alerted: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ALERT_COLUMNS))
    stream: str = VERDICTS

    @classmethod
    def of(cls, batch: int, verdicts: pa.Table, alerts: pa.Table, state: StateSize) -> BatchLine:
        """The line of micro-batch ``batch``: its ``verdicts``, its ``alerts``, ``state``."""
        minutes = _per_minute(
            verdicts["send_time"],
            duplicates=pc.equal(verdicts["verdict"], DUPLICATE),
            late=pc.equal(verdicts["verdict"], "late"),
        )
        latest, alerted = alert_parts(alerts)
        return cls(batch, minutes, latest, state, alerted)

    @classmethod
    def of_resends(cls, batch: int, alerts: pa.Table, state: StateSize) -> BatchLine:
        """The line of the resends' micro-batch ``batch``: its ``alerts``, ``state``."""
        latest, alerted = alert_parts(alerts)
        minutes = pd.DataFrame(columns=MINUTE_COLUMNS).astype(
            {"minute": "datetime64[ns, UTC]", **{c: "int64" for c in MINUTE_COLUMNS[1:]}}
        )
        return cls(batch, minutes, latest, state, alerted, RESENDS)

    def with_alerts(self, alerts: pa.Table) -> BatchLine:
        """This line with ``alerts`` (the micro-batch's) in place of its own."""
        latest, alerted = alert_parts(alerts)
        return dataclasses.replace(self, found=latest, alerted=alerted)

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
        return int(self.alerted["alerts"].sum())

    @property
    def said(self) -> str:
        """str: What the line tells after its micro-batch's name: its counts (or, of the
        resends' query, its resends) and the state."""
        if self.stream == RESENDS:
            return f"{self.alerts:,} resends reached consumers again; {self.state}"
        return (
            f"{self.judged:,} sends judged, {self.duplicates:,} duplicates, {self.late:,} late, "
            f"{self.alerts:,} alerts; {self.state}"
        )

    def __str__(self) -> str:
        return f"{self.stream} {self.batch}: {self.said}"

    def to_json(self) -> dict[str, Any]:
        minutes = self.minutes.assign(minute=self.minutes["minute"].astype(str))
        alerted = self.alerted.assign(minute=self.alerted["minute"].astype(str))
        return {
            "batch": self.batch,
            "minutes": minutes.to_dict("records"),
            "alerted": alerted.to_dict("records"),
            "found": self.found,
            "state": vars(self.state),
            "stream": self.stream,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchLine:
        minutes = pd.DataFrame(data["minutes"], columns=MINUTE_COLUMNS)
        minutes["minute"] = pd.to_datetime(minutes["minute"])
        alerted = pd.DataFrame(data.get("alerted", []), columns=ALERT_COLUMNS)
        alerted["minute"] = pd.to_datetime(alerted["minute"])
        found = [
            {k: _time(v) if k in _TIMES else v for k, v in alert.items()} for alert in data["found"]
        ]
        state = StateSize(**data["state"])
        return cls(int(data["batch"]), minutes, found, state, alerted, data.get("stream", VERDICTS))


def _minute(times: pa.ChunkedArray) -> pd.Series:
    minutes: pd.Series = times.to_pandas().dt.floor("min")
    return minutes


def _per_minute(times: pa.ChunkedArray, **counted: pa.ChunkedArray) -> pd.DataFrame:
    """Sends per minute of ``times``, and how many of them each of ``counted`` flags."""
    frame = pd.DataFrame(
        {
            "minute": _minute(times),
            "sends": 1,
            **{
                k: pc.fill_null(v, False).to_numpy(zero_copy_only=False) for k, v in counted.items()
            },
        }
    )
    counts = frame.groupby("minute", dropna=False).sum().reset_index()
    return counts.astype({c: "int64" for c in MINUTE_COLUMNS[1:]})[MINUTE_COLUMNS]


def _time(value: Any) -> Any:
    return datetime.fromisoformat(value) if isinstance(value, str) else value
