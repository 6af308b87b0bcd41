"""The monitor's counters and gauges, for Prometheus (and whatever scrapes its text format):
exposed by ``prometheus-client`` at ``/metrics``, in a registry of the monitor's own.

The counters count every micro-batch the checkpoint holds, once: they are kept in each
commit (:class:`Totals`) and a restart starts from them, so a micro-batch run again after a
crash is never counted twice. Labels are bounded: ``entity`` (the entity's name; past
:data:`ENTITIES` names, ``(other)``), ``verdict``, ``kind`` and the quarantine's reason
category; never a MessageId or anything else a sender chooses freely.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from dedup_lib.errors import InputError
from dedup_lib.telemetry.quarantine import REASON

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from dedup_lib.live.judge import Clock
    from dedup_lib.live.lines import StateSize

#: Entity names a label takes at most; the rest are counted as ``(other)``.
ENTITIES = 200
OTHER = "(other)"
#: The verdicts and alert kinds a label takes.
VERDICTS = ("accepted", "duplicate", "rejected", "late")
KINDS = ("collision", "resend", "rejected")
#: A micro-batch's duration buckets (seconds): an idle trigger's to a burst's.
DURATIONS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass
class Totals:
    """What the checkpoint's micro-batches counted: sends by (entity, verdict), alerts by
    (entity, kind), refused rows by reason category, records that are not sends."""

    sends: Tally[tuple[str, str]] = field(default_factory=Tally)
    alerts: Tally[tuple[str, str]] = field(default_factory=Tally)
    refused: Tally[str] = field(default_factory=Tally)
    skipped: int = 0
    batches: int = 0
    #: When an alert of each (entity, kind) was last raised (Unix time).
    last_alert: dict[tuple[str, str], float] = field(default_factory=dict)

    def add(self, other: Totals) -> None:
        self.sends.update(other.sends)
        self.alerts.update(other.alerts)
        self.refused.update(other.refused)
        self.skipped += other.skipped
        self.batches += other.batches
        self.last_alert.update(other.last_alert)

    def to_json(self) -> dict[str, Any]:
        return {
            "sends": [[*k, v] for k, v in self.sends.items()],
            "alerts": [[*k, v] for k, v in self.alerts.items()],
            "refused": self.refused,
            "skipped": self.skipped,
            "batches": self.batches,
            "last_alert": [[*k, v] for k, v in self.last_alert.items()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Totals:
        return cls(
            sends=Tally({(e, v): n for e, v, n in data["sends"]}),
            alerts=Tally({(e, k): n for e, k, n in data["alerts"]}),
            refused=Tally(data["refused"]),
            skipped=int(data["skipped"]),
            batches=int(data["batches"]),
            last_alert={(e, k): t for e, k, t in data["last_alert"]},
        )

    @classmethod
    def of(
        cls, verdicts: pa.Table, alerts: pa.Table, refused: pa.Table, skipped: int, names: set[str]
    ) -> Totals:
        """One micro-batch's counts; ``names``, the entity labels given so far (grown here,
        up to :data:`ENTITIES`)."""
        raised = _counted(alerts, "kind", names)
        now = time.time()
        return cls(
            sends=_counted(verdicts, "verdict", names),
            alerts=raised,
            refused=_by_reason(refused),
            skipped=skipped,
            batches=1,
            last_alert=dict.fromkeys(raised, now),
        )


def _counted(table: pa.Table, by: str, names: set[str]) -> Tally[tuple[str, str]]:
    entity = table["entity"] if "entity" in table.column_names else pa.nulls(len(table))
    pairs = pa.table({"entity": pc.fill_null(entity.cast(pa.string()), ""), by: table[by]})
    counts = pairs.group_by(["entity", by]).aggregate([([], "count_all")]).to_pylist()
    found: Tally[tuple[str, str]] = Tally()
    for row in counts:
        label = row["entity"]
        if label not in names:
            if len(names) >= ENTITIES:
                label = OTHER
            else:
                names.add(label)
        found[(label, row[by] or "")] += row["count_all"]
    return found


def _by_reason(refused: pa.Table) -> Tally[str]:
    # Each reason's category, as the loader's tally names it.
    reasons = pc.fill_null(refused[REASON], "").to_pylist() if refused.num_rows else []
    return Tally(reason.split(":", 1)[0] for reason in reasons)


class Metrics:
    """The counters and gauges of one monitor, in a registry of its own."""

    def __init__(self, lateness_s: float) -> None:
        self.registry = CollectorRegistry()
        self.names: set[str] = set()
        self.server: WSGIServer | None = None
        self._define(lateness_s)
        self.watermark: float | None = None
        self.waiting_since: float | None = None

    def _define(self, lateness_s: float) -> None:
        r = self.registry
        self.sends = Counter(
            "dedup_sends_judged", "Sends judged, by entity and verdict (late included)",
            ["entity", "verdict"], registry=r,
        )  # fmt: skip
        self.alerts = Counter(
            "dedup_alerts", "Alerts raised, by entity and kind (collision, resend, rejected)",
            ["entity", "kind"], registry=r,
        )  # fmt: skip
        self.refused = Counter(
            "dedup_quarantined_rows", "Rows the load refused, by reason category", ["reason"],
            registry=r,
        )  # fmt: skip
        self.skipped = Counter("dedup_records_skipped", "Records that are not sends", registry=r)
        self.batches = Counter("dedup_micro_batches", "Micro-batches committed", registry=r)
        self.duration = Histogram(
            "dedup_micro_batch_duration_seconds", "How long each micro-batch took",
            buckets=DURATIONS, registry=r,
        )  # fmt: skip
        self.last_batch = Gauge(
            "dedup_last_micro_batch_timestamp_seconds",
            "When the last micro-batch was committed (Unix time)", registry=r,
        )  # fmt: skip
        self.last_scan = Gauge(
            "dedup_last_scan_timestamp_seconds",
            "When the folder was last looked at, new files or not (Unix time)", registry=r,
        )  # fmt: skip
        self.state_keys = Gauge("dedup_state_keys", "Keys held, each with its anchor", registry=r)
        self.state_bytes = Gauge(
            "dedup_state_bytes", "The state's size, in memory and on disk", ["store"], registry=r
        )
        self.waiting = Gauge("dedup_waiting_sends", "Sends waiting for the watermark", registry=r)
        self.last_alert = Gauge(
            "dedup_last_alert_timestamp_seconds",
            "When an alert of this entity and kind was last raised (Unix time)",
            ["entity", "kind"], registry=r,
        )  # fmt: skip
        self.backlog = Gauge(
            "dedup_backlog_bytes", "Bytes landed in the folder and not read yet", registry=r
        )
        Gauge("dedup_lateness_seconds", "The lateness the monitor waits", registry=r).set(
            lateness_s
        )
        Gauge(
            "dedup_watermark_seconds", "The watermark (Unix time; 0 before the first send)",
            registry=r,
        ).set_function(lambda: self.watermark or 0.0)  # fmt: skip
        Gauge(
            "dedup_watermark_lag_seconds", "How far the watermark trails the wall clock",
            registry=r,
        ).set_function(lambda: _since(self.watermark))  # fmt: skip
        Gauge(
            "dedup_backlog_age_seconds",
            "How long the oldest bytes not read yet have waited (0: none wait)", registry=r,
        ).set_function(lambda: _since(self.waiting_since))  # fmt: skip

    def count(self, totals: Totals) -> None:
        """Add ``totals`` to the counters. A new entity's series start at 0, every verdict
        and kind, so that a rate over them sees its first sends."""
        for entity in {e for e, _ in totals.sends} - self.names:
            for verdict in VERDICTS:
                self.sends.labels(entity=entity, verdict=verdict)
            for kind in KINDS:
                self.alerts.labels(entity=entity, kind=kind)
        for (entity, kind), at in totals.last_alert.items():
            self.last_alert.labels(entity=entity, kind=kind).set(at)
        for (entity, verdict), n in totals.sends.items():
            self.sends.labels(entity=entity, verdict=verdict).inc(n)
        for (entity, kind), n in totals.alerts.items():
            self.alerts.labels(entity=entity, kind=kind).inc(n)
        for reason, n in totals.refused.items():
            self.refused.labels(reason=reason).inc(n)
        self.skipped.inc(totals.skipped)
        self.batches.inc(totals.batches)
        self.names.update(entity for entity, _ in totals.sends)

    def restored(self, totals: Totals, size: StateSize, watermark: int | None) -> None:
        """What a checkpoint counted before this process started."""
        self.count(totals)
        self._state(size, watermark)

    def scanned(self, backlog: int, since: float | None) -> None:
        """The folder looked at: what waits in it to be read, since when."""
        self.last_scan.set(time.time())
        self.backlog.set(backlog)
        self.waiting_since = since

    def committed(self, totals: Totals, seconds: float, size: StateSize, clock: Clock) -> None:
        """A micro-batch committed: its counts, how long it took, the state it left."""
        self.count(totals)
        self.duration.observe(seconds)
        self.last_batch.set(time.time())
        self._state(size, clock.watermark)

    def _state(self, size: StateSize, watermark: int | None) -> None:
        self.state_keys.set(size.keys)
        self.state_bytes.labels(store="memory").set(size.memory)
        self.state_bytes.labels(store="disk").set(size.disk)
        self.waiting.set(size.waiting)
        self.watermark = None if watermark is None else watermark / 1e6

    def serve(self, address: str) -> tuple[str, int]:
        """Serve ``/metrics`` at ``address`` (``HOST:PORT``; port 0: any free one); the
        address it listens at."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise InputError(f"metrics: expected HOST:PORT, as 127.0.0.1:9464, got {address!r}")
        server, _ = start_http_server(int(port), addr=host.strip("[]"), registry=self.registry)
        self.server = server
        return host, server.server_port

    def table(self) -> pd.DataFrame:
        """Each counter's and gauge's value, as ``/metrics`` has it (without the histogram's
        buckets and the ``_created`` times): ``metric``, ``labels``, ``value``."""
        rows = [
            {
                "metric": sample.name,
                "labels": ", ".join(f"{k}={v}" for k, v in sorted(sample.labels.items())),
                "value": sample.value,
            }
            for family in self.registry.collect()
            for sample in family.samples
            if not sample.name.endswith(("_created", "_bucket"))
        ]
        return pd.DataFrame(rows, columns=["metric", "labels", "value"])

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _since(moment: float | None) -> float:
    return 0.0 if moment is None else time.time() - moment
