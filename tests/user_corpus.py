"""Telemetry shaped as analysts have it, for running every notebook on it.

The samples carry what no real telemetry has (the generator's ground truth) and what few have
(a content hash, entity settings, a kept export). Each input here lacks some of that, or is
small, narrow or long, as an analyst's own data is; ``write_user_corpus`` writes them all,
with the notebook parameters each needs, from the shipped samples (deterministic, no Spark).
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dedup_lib import sample_path

#: The generator's columns: ground truth and content.
TRUTH = ("sender", "logical_id", "attempt", "cause")
CONTENT = ("payload_hash",)


@dataclass(frozen=True)
class UserInput:
    """One input: its name, path, the parameters every notebook gets (``INPUT`` and, where
    needed, ``FORMAT``/``MAPPING``/``CONTENT``), and what it lacks."""

    name: str
    path: Path
    parameters: dict[str, Any] = field(default_factory=dict)
    ground_truth: bool = False
    content: bool = False

    def notebook_parameters(self) -> dict[str, Any]:
        return {"INPUT": str(self.path), **self.parameters}


def _incident() -> pd.DataFrame:
    return pd.read_parquet(sample_path("incident.parquet"))


def _day(hours: int) -> pd.DataFrame:
    day = pd.read_parquet(sample_path("day.parquet"))
    times = pd.to_datetime(day["send_time"], utc=True, errors="coerce", format="ISO8601")
    return day[times < times.min().floor("D") + pd.Timedelta(hours=hours)]


def _write_csv(table: pd.DataFrame, path: Path) -> Path:
    table.to_csv(path, index=False, date_format="%Y-%m-%dT%H:%M:%S.%fZ")
    return path


def write_user_corpus(folder: Path) -> list[UserInput]:
    """Every input, written under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    incident = _incident()
    inputs = [
        UserInput(
            "minimal",
            _write_csv(incident[["message_id", "send_time"]].head(3_000), folder / "minimal.csv"),
        ),
        _day_without_truth(folder),
        _otlp(folder),
        _app_insights(folder),
        _azure_csv_with_mapping(incident, folder),
        _one_entity(incident, folder),
        _a_week(folder),
        _no_resend(folder),
    ]
    return inputs


def _day_without_truth(folder: Path) -> UserInput:
    """Four hours of the day sample, without the generator's columns."""
    day = _day(4).drop(columns=[*TRUTH, *CONTENT])
    path = folder / "day-without-truth.parquet"
    day.to_parquet(path, index=False, coerce_timestamps="us")
    return UserInput("day without truth or content", path)


def _otlp(folder: Path) -> UserInput:
    """The first half hour or so of the incident's traces (the Collector's OTLP JSON Lines:
    each line a batch of spans, so whole lines keep whole traces)."""
    with gzip.open(sample_path("incident-otlp.jsonl.gz"), "rt") as source:
        lines = source.read().splitlines()[:150]
    path = folder / "traces.jsonl.gz"
    with gzip.open(path, "wt") as out:
        out.write("\n".join(lines) + "\n")
    return UserInput("otlp", path)


def _app_insights(folder: Path) -> UserInput:
    """The first rows of the portal's CSV export of Application Insights dependencies."""
    sample = sample_path("incident-app-insights.csv.gz")
    with gzip.open(sample, "rt", encoding="utf-8-sig", newline="") as source:
        rows = list(csv.reader(source))[:7_000]
    path = folder / "dependencies.csv"
    with path.open("w", encoding="utf-8-sig", newline="") as out:  # with a BOM, as the portal
        csv.writer(out).writerows(rows)
    return UserInput("app-insights", path)


def _azure_csv_with_mapping(incident: pd.DataFrame, folder: Path) -> UserInput:
    """The Azure SDK's names, and two of the analyst's own, mapped."""
    table = incident.head(5_000).rename(
        columns={
            "message_id": "MessageId",
            "send_time": "EnqueuedTimeUtc",
            "partition_key": "PartitionKey",
            "session_id": "SessionId",
            "entity": "Queue",
            "payload_hash": "BodyHash",
        }
    )[["MessageId", "EnqueuedTimeUtc", "PartitionKey", "SessionId", "Queue", "BodyHash"]]
    path = _write_csv(table, folder / "azure-names.csv")
    mapping = {"Queue": "entity", "BodyHash": "payload_hash"}
    return UserInput("Azure SDK names and a mapping", path, {"MAPPING": mapping}, content=True)


def _one_entity(incident: pd.DataFrame, folder: Path) -> UserInput:
    """300 sends of one entity, resends among them."""
    payments = incident[incident["entity"] == "payments"].head(300)
    path = folder / "one-entity.parquet"
    payments.drop(columns=list(TRUTH)).to_parquet(path, index=False, coerce_timestamps="us")
    return UserInput("one entity with 300 sends", path, content=True)


def _a_week(folder: Path) -> UserInput:
    """An hour of the day sample on each of seven days, the ids made per day."""
    hour = _day(1).drop(columns=[*TRUTH])
    times = pd.to_datetime(hour["send_time"], utc=True, errors="coerce", format="ISO8601")
    days = []
    for n in range(7):
        copy = hour.assign(send_time=times + pd.Timedelta(days=n))
        copy["message_id"] = copy["message_id"].map(
            lambda m, n=n: None if m is None else f"{n}-{m}"
        )
        copy["event_id"] = copy["event_id"] + n * 10_000_000
        days.append(copy.dropna(subset=["send_time"]))
    path = folder / "a-week.parquet"
    pd.concat(days).to_parquet(path, index=False, coerce_timestamps="us")
    return UserInput("a week", path, content=True)


def _no_resend(folder: Path) -> UserInput:
    """400 sends of one entity, each id once: nothing for the broker to drop."""
    times = pd.date_range("2026-11-03T08:00:00Z", periods=400, freq="7s")
    table = pd.DataFrame(
        {
            "message_id": [f"audit-{n:05d}" for n in range(400)],
            "send_time": times,
            "entity": "audit",
            "payload_hash": [f"{n:016x}" for n in range(400)],
        }
    )
    path = _write_csv(table, folder / "no-resend.csv")
    with gzip.open(folder / "no-resend.csv.gz", "wt") as out:
        out.write(path.read_text())
    path.unlink()
    return UserInput("an entity without any resend", folder / "no-resend.csv.gz", content=True)
