"""What the checkpoint's micro-batches counted, as :class:`Totals`: kept in each commit, so a
restart's counters go on from them and a micro-batch run again after a crash is never counted
twice. Entities are counted by their label (:class:`dedup_lib.live.output.labels.EntityLabels`)."""

from __future__ import annotations

from collections import Counter as Tally
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.telemetry.quarantine import REASON

if TYPE_CHECKING:
    from dedup_lib.live.output.labels import EntityLabels


@dataclass
class Totals:
    """Counts of micro-batches: sends by (entity, verdict), alerts by (entity, kind), quarantined
    rows by reason category, notes by kind, records that are not sends, rows read; and when
    (Unix time) an alert of each (entity, kind) was last raised, a send last judged and a
    micro-batch last committed; and ``held``, the anchors and waiting sends the micro-batches
    left in a state that does not count them itself (the state on the executors), None where
    one of them went uncounted (a checkpoint older than the count)."""

    sends: Tally[tuple[str, str]] = field(default_factory=Tally)
    alerts: Tally[tuple[str, str]] = field(default_factory=Tally)
    refused: Tally[str] = field(default_factory=Tally)
    notes: Tally[str] = field(default_factory=Tally)
    skipped: int = 0
    rows: int = 0
    batches: int = 0
    last_alert: dict[tuple[str, str], float] = field(default_factory=dict)
    judged_at: float | None = None
    committed_at: float | None = None
    held: tuple[int, int] | None = None

    def add(self, other: Totals) -> None:
        """Count ``other`` in too: its counts added, its times where they are later."""
        self.sends.update(other.sends)
        self.alerts.update(other.alerts)
        self.refused.update(other.refused)
        self.notes.update(other.notes)
        self.skipped += other.skipped
        self.rows += other.rows
        self.batches += other.batches
        self.last_alert.update(other.last_alert)
        self.judged_at = _later(self.judged_at, other.judged_at)
        self.committed_at = _later(self.committed_at, other.committed_at)
        if self.held is None or other.held is None:
            self.held = None
        else:
            self.held = (self.held[0] + other.held[0], self.held[1] + other.held[1])

    def to_json(self) -> dict[str, Any]:
        """The totals as a commit keeps them (JSON)."""
        return {
            "sends": [[*k, v] for k, v in self.sends.items()],
            "alerts": [[*k, v] for k, v in self.alerts.items()],
            "refused": self.refused,
            "notes": self.notes,
            "skipped": self.skipped,
            "rows": self.rows,
            "batches": self.batches,
            "last_alert": [[*k, v] for k, v in self.last_alert.items()],
            "judged_at": self.judged_at,
            "committed_at": self.committed_at,
            "held": None if self.held is None else list(self.held),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Totals:
        """The totals a commit kept; a checkpoint written before notes, rows and times were
        kept reads with none of them."""
        return cls(
            sends=Tally({(e, v): n for e, v, n in data["sends"]}),
            alerts=Tally({(e, k): n for e, k, n in data["alerts"]}),
            refused=Tally(data["refused"]),
            notes=Tally(data.get("notes", {})),
            skipped=int(data["skipped"]),
            rows=int(data.get("rows", 0)),
            batches=int(data["batches"]),
            last_alert={(e, k): t for e, k, t in data["last_alert"]},
            judged_at=data.get("judged_at"),
            committed_at=data.get("committed_at"),
            held=None if data.get("held") is None else (int(data["held"][0]), int(data["held"][1])),
        )

    @classmethod
    def of(
        cls,
        verdicts: pa.Table,
        alerts: pa.Table,
        refused: pa.Table,
        counts: dict[str, int],
        labels: EntityLabels,
        now: float,
    ) -> Totals:
        """One micro-batch's counts at ``now``: its ``verdicts``, ``alerts``, ``refused``
        rows and the load's ``counts`` (``skipped``, ``read``), entities by their label."""
        raised = counted_by(alerts, "kind", labels)
        return cls(
            sends=counted_by(verdicts, "verdict", labels),
            alerts=raised,
            refused=_by_reason(refused),
            skipped=counts["skipped"],
            rows=counts["read"],
            batches=1,
            last_alert=dict.fromkeys(raised, now),
            judged_at=now if verdicts.num_rows else None,
            committed_at=now,
        )


def _later(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else max(a, b)


def counted_by(table: pa.Table, by: str, labels: EntityLabels) -> Tally[tuple[str, str]]:
    """Rows of ``table`` by (entity label, ``by``): sends by verdict, alerts by kind."""
    entity = table["entity"] if "entity" in table.column_names else pa.nulls(len(table))
    pairs = pa.table({"entity": pc.fill_null(entity.cast(pa.string()), ""), by: table[by]})
    counts = pairs.group_by(["entity", by]).aggregate([([], "count_all")]).to_pylist()
    found: Tally[tuple[str, str]] = Tally()
    for row in counts:
        found[(labels.label(row["entity"]), row[by] or "")] += row["count_all"]
    return found


def _by_reason(refused: pa.Table) -> Tally[str]:
    """Each refused row's reason category, as the loader's tally names it."""
    reasons = pc.fill_null(refused[REASON], "").to_pylist() if refused.num_rows else []
    return Tally(reason.split(":", 1)[0] for reason in reasons)
