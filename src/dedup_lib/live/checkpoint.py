"""The monitor's checkpoint: what it judges with (:class:`Settings`), where it writes
(:class:`Folders`), and the two records each micro-batch ``N`` leaves in it, as typed records
read and written as JSON: the plan (``plans/plan-N.json``, :class:`PlanRecord`: the chunks
and the ledger after them) and the commit (``commits/commit-N.json``, :class:`Commit`: the
clock, the counts, the micro-batch's line and the totals). A micro-batch is done once its
commit is written (:mod:`dedup_lib.live.runner`)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from dedup_lib.errors import InputError, printable
from dedup_lib.live.durable import numbered, read_json, write_json
from dedup_lib.live.landing.chunks import MovedError, remove_chunks, write_chunks
from dedup_lib.live.landing.ledger import Plan, Reading, Seen
from dedup_lib.live.output.lines import BatchLine
from dedup_lib.live.output.totals import Totals
from dedup_lib.rules.policy import DedupPolicy

if TYPE_CHECKING:
    from collections.abc import Iterator

    from dedup_lib.rules.policy import Policies

#: What a checkpoint records per micro-batch: its plan, its commit, and the sends still
#: waiting after it (each the name of a :class:`Folders` folder).
Record = Literal["plans", "commits", "pending"]
#: Each record's file name around the micro-batch's number.
RECORDS: dict[Record, tuple[str, str]] = {
    "plans": ("plan-", ".json"),
    "commits": ("commit-", ".json"),
    "pending": ("pending-", ".arrow"),
}


#: How the state on the executors lies in Spark's state stores: 4, each key's anchor (with its
#: content, for the collision alerts) and the time of its timer one value, and the resends'
#: copies in buckets, each a map and one timer (3: a copy and a timer per key; 2: anchors
#: without the content; 1: anchor and timer apart). A checkpoint laid out otherwise is refused
#: (:func:`check_settings`): Spark would not read its state.
EXECUTORS_LAYOUT = 4


@dataclass(frozen=True)
class Settings:
    """What the monitor judges with: a checkpoint belongs to one set of these."""

    policy: Policies
    lateness: timedelta
    horizon: timedelta | None
    content: list[str]
    reading: Reading
    #: Where the state is kept: ``driver`` or ``executors`` (:class:`~dedup_lib.StateOptions`).
    state: str = "driver"

    def identity(self) -> dict[str, Any]:
        """What must not change over a checkpoint's life: the rules that key and judge."""
        if isinstance(self.policy, DedupPolicy):
            rules: Any = _rule(self.policy)
        else:
            rules = {name: _rule(p) for name, p in sorted(self.policy.items())}
        return {
            "policy": rules,
            "lateness_ms": self.lateness // timedelta(milliseconds=1),
            "content": self.content,
            "resend_horizon_us": (
                None if self.horizon is None else self.horizon // timedelta(microseconds=1)
            ),
            "format": self.reading.fmt,
            "state": self.state,
            **({"executors_layout": EXECUTORS_LAYOUT} if self.state == "executors" else {}),
        }


def _rule(policy: DedupPolicy | None) -> Any:
    return None if policy is None else [policy.window_us, policy.partitioning]


@dataclass(frozen=True)
class Folders:
    """Where the monitor writes: verdicts, quarantined rows, alerts, and its checkpoint."""

    out: str
    checkpoint: str
    quarantine: str
    alerts: str | None

    @property
    def plans(self) -> str:
        return os.path.join(self.checkpoint, "plans")

    @property
    def chunks(self) -> str:
        return os.path.join(self.checkpoint, "chunks")

    @property
    def commits(self) -> str:
        return os.path.join(self.checkpoint, "commits")

    @property
    def state(self) -> str:
        return os.path.join(self.checkpoint, "state")

    @property
    def resends(self) -> str:
        return os.path.join(self.checkpoint, "resends")

    @property
    def pending(self) -> str:
        return os.path.join(self.checkpoint, "pending")

    def record(self, kind: Record, batch: int) -> str:
        """The path of micro-batch ``batch``'s record of ``kind``."""
        prefix, suffix = RECORDS[kind]
        return os.path.join(getattr(self, kind), f"{prefix}{batch:010d}{suffix}")

    def records(self, kind: Record) -> Iterator[tuple[int, str]]:
        """The records of ``kind`` in the checkpoint, by micro-batch."""
        return numbered(getattr(self, kind), *RECORDS[kind])

    def plans_at(self, batch: int) -> tuple[dict[str, Seen], PlanRecord | None]:
        """Where planning resumes at micro-batch ``batch``: the ledger after the plan before
        it (empty at the first), and ``batch``'s own plan if one was recorded and never
        committed (a restart does it again, as recorded)."""
        plans = dict(self.records("plans"))
        before, redo = plans.get(batch - 1), plans.get(batch)
        files = PlanRecord.from_json(read_json(before)).files if before else {}
        return files, PlanRecord.from_json(read_json(redo)) if redo else None

    def record_plan(self, batch: int, planned: Plan) -> PlanRecord | None:
        """Micro-batch ``batch``'s plan: its chunks copied into the checkpoint, then its
        record written; None when a file moved while it was copied (its chunks gone: plan
        again)."""
        folder = os.path.join(self.chunks, f"{batch:010d}")
        try:
            paths = write_chunks(folder, planned.chunks)
        except MovedError:
            remove_chunks(folder)
            return None
        pairs = zip(paths, planned.chunks, strict=True)
        names = {os.path.basename(path): chunk.name for path, chunk in pairs}
        kinds = [note.kind for note in planned.notes]
        recorded = PlanRecord(batch, paths, names, planned.files, kinds)
        recorded.write(self)
        return recorded


@dataclass(frozen=True)
class PlanRecord:
    """A micro-batch's plan as recorded before Spark reads it: its chunks' ``paths`` in the
    checkpoint, the landed file each came from (``names``, by the chunk's file name), the
    ledger after it (``files``) and the kinds of the notes its planning said."""

    batch: int
    paths: list[str]
    names: dict[str, str]
    files: dict[str, Seen]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlanRecord:
        """The record :meth:`to_json` wrote."""
        files = {
            fid: Seen(**{**seen, "said": tuple(seen["said"])})
            for fid, seen in data["files"].items()
        }
        return cls(int(data["batch"]), data["paths"], data["names"], files, data.get("notes", []))

    def write(self, folders: Folders) -> None:
        """The record in ``folders``' plans, whole or not at all."""
        write_json(folders.record("plans", self.batch), self.to_json())


@dataclass(frozen=True)
class Commit:
    """A micro-batch's commit: the latest send time seen after it (the clock), the rows its
    load counted, its line and the checkpoint's totals."""

    batch: int
    latest_ms: int | None
    counts: dict[str, int]
    line: BatchLine
    totals: Totals

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values."""
        return {
            "batch": self.batch,
            "latest_ms": self.latest_ms,
            "counts": self.counts,
            "line": self.line.to_json(),
            "totals": self.totals.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Commit:
        """The record :meth:`to_json` wrote."""
        return cls(
            int(data["batch"]),
            data["latest_ms"],
            data["counts"],
            BatchLine.from_json(data["line"]),
            Totals.from_json(data["totals"]),
        )

    def write(self, folders: Folders) -> None:
        """The record in ``folders``' commits, whole or not at all: the micro-batch is done."""
        write_json(folders.record("commits", self.batch), self.to_json())


def check_settings(checkpoint: str, settings: Settings) -> None:
    """The checkpoint's settings recorded at its first start; an error when they differ."""
    path = os.path.join(checkpoint, "settings.json")
    wanted = json.loads(json.dumps(settings.identity()))
    if not os.path.exists(path):
        write_json(path, wanted)
        return
    found = {"state": "driver", **read_json(path)}  # a checkpoint from before the modes
    if found["state"] != wanted["state"]:
        kept = printable(str(found["state"]))
        raise InputError(
            f"watch_duplicates: the checkpoint {printable(checkpoint)} was started with "
            f"--state {kept}, and its state is kept where that mode keeps it, which "
            f"--state {wanted['state']} does not read: go on with --state {kept}, or start "
            "a new checkpoint"
        )
    if "executors_layout" in wanted and found.get("executors_layout", 1) != EXECUTORS_LAYOUT:
        raise InputError(
            f"watch_duplicates: the checkpoint {printable(checkpoint)} holds the state on the "
            "executors as an earlier version of dedup-lib laid it out in Spark's state "
            "stores, which this version does not read: "
            "start a new checkpoint and verdicts folder (the monitor then judges every file "
            "the folder holds), or finish this one with the version that wrote it"
        )
    changed = [k for k in wanted if found.get(k) != wanted[k]]
    if changed:
        raise InputError(
            f"watch_duplicates: the checkpoint {printable(checkpoint)} was written with other "
            f"{', '.join(changed)} ({', '.join(f'{k}={found.get(k)}' for k in changed)}); its "
            "state holds what they decided: start with a new checkpoint to change them"
        )
