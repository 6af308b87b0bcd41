"""The monitor's micro-batches, one after another, each planned, read, judged and committed,
so that a restart after a crash at any instant goes on where the last commit left off, with
every landed send judged once and every output written once.

A micro-batch ``N``:

1. the ledger plans what is new in the folder, its chunks are copied into the checkpoint,
   then the plan (chunks and the ledger after them) is recorded: ``plans/plan-N.json``;
2. Spark reads the chunks (:mod:`dedup_lib.live.micro_batch`), the driver judges the sends
   (:mod:`dedup_lib.live.judge`), the verdicts and refused rows are written
   (``part-N.parquet``, replacing any a crashed run left), the new anchors are written
   (the state's segment ``N``) and the sends still waiting (``pending/pending-N.arrow``);
3. the commit, ``commits/commit-N.json`` (the watermark, the counts, the micro-batch's
   line with its alerts), is written: from then on ``N`` is done;
4. its alerts are appended to the alerts file, and what it replaced is removed.

A restart reads the last commit and rebuilds the state from the segments up to it; a plan
recorded after it is run again, from its own chunks.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dedup_lib.columns import ORIGINAL_CONTENT
from dedup_lib.errors import InputError, printable
from dedup_lib.live import ledger
from dedup_lib.live.alerts import alerts_of
from dedup_lib.live.chunks import MovedError, remove_chunks, write_chunks
from dedup_lib.live.durable import numbered, read_json, remove, replace_with, write_json
from dedup_lib.live.judge import Clock, Judged, judge
from dedup_lib.live.keyed import INTERNAL
from dedup_lib.live.labels import EntityLabels
from dedup_lib.live.lines import BatchLine, StateSize
from dedup_lib.live.metrics import Metrics
from dedup_lib.live.micro_batch import Intake, load_micro_batch
from dedup_lib.live.resends import Resends
from dedup_lib.live.sink import AlertsFile, write_part
from dedup_lib.live.state import KeyedState
from dedup_lib.live.totals import Totals
from dedup_lib.rules.policy import DedupPolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    from dedup_lib.rules.policy import Policies
    from dedup_lib.telemetry.landing import Landing


@dataclass(frozen=True)
class Settings:
    """What the monitor judges with: a checkpoint belongs to one set of these."""

    policy: Policies
    lateness: timedelta
    horizon: timedelta | None
    content: list[str]
    reading: ledger.Reading

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
        }


def _rule(policy: DedupPolicy | None) -> Any:
    return None if policy is None else [policy.window_micros, policy.partitioning]


@dataclass(frozen=True)
class Folders:
    """Where the monitor writes: verdicts, refused rows, alerts, and its checkpoint."""

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


#: What the caller is told: each micro-batch's line, its load's counts, and notes.
Tell = tuple[
    "Callable[[BatchLine], None]", "Callable[[dict[str, int]], None]", "Callable[[str], None]"
]


class Runner:
    """Micro-batches of the folder ``landing`` watched with ``settings``, written to
    ``folders``; :meth:`step` runs one."""

    def __init__(
        self,
        landing: Landing,
        settings: Settings,
        folders: Folders,
        tell: Tell,
        metrics: Metrics | None = None,
    ) -> None:
        self.landing, self.settings, self.folders = landing, settings, folders
        self.on_line, self.on_load, self.on_note = tell
        self.metrics = metrics
        #: The entities' labels in the counters.
        self.labels = metrics.labels if metrics is not None else EntityLabels()
        self.alerts = (
            AlertsFile(folders.alerts, os.path.join(folders.checkpoint, "alerts.json"))
            if folders.alerts
            else None
        )
        self.more = False
        _check_settings(folders.checkpoint, settings)
        self._restore()

    def _restore(self) -> None:
        """The state the last commit left, and the plan recorded after it, if any."""
        commits = list(numbered(self.folders.commits, "commit-", ".json"))
        last = read_json(commits[-1][1]) if commits else None
        self.batch = last["batch"] + 1 if last else 0
        lateness_ms = self.settings.lateness // timedelta(milliseconds=1)
        self.clock = Clock(lateness_ms, last["latest_ms"] if last else None)
        watermark = self.clock.watermark
        self.state = KeyedState.restore(self.folders.state, self.batch - 1, watermark)
        self.resends = (
            Resends(
                KeyedState.restore(self.folders.resends, self.batch - 1, watermark),
                self.settings.horizon,
            )
            if self.settings.horizon is not None
            else None
        )
        pending = os.path.join(self.folders.pending, f"pending-{self.batch - 1:010d}.arrow")
        self.pending = _read_arrow(pending) if os.path.exists(pending) else None
        plans = dict(numbered(self.folders.plans, "plan-", ".json"))
        self.files = _ledger(read_json(plans[self.batch - 1])) if self.batch - 1 in plans else {}
        self.redo = read_json(plans[self.batch]) if self.batch in plans else None
        self.totals = Totals.from_json(last["totals"]) if last else Totals()
        self.labels.restore(entity for entity, _ in self.totals.sends)
        if self.redo is not None:
            # Its notes were said by the process that recorded it, and never committed.
            self.totals.notes.update(self.redo.get("notes", []))
        if self.metrics is not None:
            self.metrics.restored(self.totals, self._size(self.pending), self.clock.watermark)

    def step(self) -> BatchLine | None:
        """Plan and run one micro-batch; None when nothing new has landed."""
        recorded, self.redo = self.redo, None
        if recorded is None:
            recorded = self._plan()
            if recorded is None:
                return None
        return self._run(recorded)

    def _plan(self) -> dict[str, Any] | None:
        """What is new, copied into the checkpoint and recorded; None when nothing is."""
        planned = ledger.plan(self.landing.path, self.files, self.settings.reading, time.time())
        if self.metrics is not None:
            self.metrics.scanned(*planned.backlog, planned.landed)
        for note in planned.notes:
            self.totals.notes[note.kind] += 1
            if self.metrics is not None:
                self.metrics.noted(note.kind)
            self.on_note(note.text)
        if not planned.chunks:
            self.files = planned.files
            self.more = False
            return None
        folder = os.path.join(self.folders.chunks, f"{self.batch:010d}")
        try:
            paths = write_chunks(folder, planned.chunks)
        except MovedError:
            remove_chunks(folder)
            self.more = True
            return None
        self.more = planned.more
        names = zip(paths, planned.chunks, strict=True)
        recorded = {
            "batch": self.batch,
            "paths": paths,
            "names": {os.path.basename(path): chunk.name for path, chunk in names},
            "files": {fid: vars(seen) for fid, seen in planned.files.items()},
            "notes": [note.kind for note in planned.notes],
        }
        write_json(os.path.join(self.folders.plans, f"plan-{self.batch:010d}.json"), recorded)
        return recorded

    def _run(self, recorded: dict[str, Any]) -> BatchLine:
        """Micro-batch ``recorded["batch"]``: read, judged, written, committed."""
        started = time.monotonic()
        batch, settings = int(recorded["batch"]), self.settings
        intake = load_micro_batch(
            self.landing,
            recorded["paths"],
            recorded["names"],
            settings.policy,
            settings.content,
            batch,
        )
        pending = self.pending if self.pending is not None else intake.sends.slice(0, 0)
        judged = judge(batch, intake.sends, pending, self.clock, self.state)
        found = self._write(batch, intake, judged)
        line = BatchLine.of(batch, judged.answered, found, self._size(judged.pending))
        counted = Totals.of(
            judged.answered, found, intake.quarantine, intake.counts, self.labels, time.time()
        )
        self.totals.add(counted)
        commit = {
            "batch": batch,
            "latest_ms": judged.clock.latest_ms,
            "counts": intake.counts,
            "line": line.to_json(),
            "totals": self.totals.to_json(),
        }
        write_json(os.path.join(self.folders.commits, f"commit-{batch:010d}.json"), commit)
        self._committed(batch, recorded, judged.pending, judged.clock)
        if self.metrics is not None:
            self.metrics.committed(counted, time.monotonic() - started, line.state, self.clock)
        self.on_load(intake.counts)
        self.on_line(line)
        return line

    def _write(self, batch: int, intake: Intake, judged: Judged) -> pa.Table:
        """The verdicts, refused rows, alerts and the sends still waiting written; the
        alerts. The Parquet files are written in a thread beside the alerts (pyarrow lets go
        of Python's lock)."""
        answered = judged.answered
        with ThreadPoolExecutor(1, thread_name_prefix="dedup-write") as writer:
            written = writer.submit(self._write_parts, batch, answered, intake.quarantine)
            found = alerts_of(answered)
            if self.resends is not None:
                resent = self.resends.alerts(batch, answered, judged.clock.watermark)
                found = pa.concat_tables([found, resent])
            if self.alerts is not None:
                self.alerts.append(batch, found)
            waiting = os.path.join(self.folders.pending, f"pending-{batch:010d}.arrow")
            replace_with(waiting, lambda target: _write_arrow(target, judged.pending))
            written.result()
        return found

    def _size(self, pending: pa.Table | None) -> StateSize:
        waiting = 0 if pending is None else pending.num_rows
        state = self.state
        return StateSize(state.keys, state.memory_bytes, state.disk_bytes, waiting)

    def _write_parts(self, batch: int, answered: pa.Table, quarantine: pa.Table) -> None:
        """The verdicts, without the monitor's own columns, and the refused rows."""
        drop = [c for c in (*INTERNAL, ORIGINAL_CONTENT) if c in answered.column_names]
        if answered.num_rows:
            write_part(self.folders.out, batch, answered.drop_columns(drop))
        if quarantine.num_rows:
            write_part(self.folders.quarantine, batch, quarantine)

    def _committed(
        self, batch: int, recorded: dict[str, Any], pending: pa.Table, clock: Clock
    ) -> None:
        """After the commit: what the micro-batch replaced gone."""
        self.state.release()
        if self.resends is not None:
            self.resends.state.release()
        remove_chunks(os.path.join(self.folders.chunks, f"{batch:010d}"))
        for folder, prefix, suffix in (
            (self.folders.plans, "plan-", ".json"),
            (self.folders.commits, "commit-", ".json"),
            (self.folders.pending, "pending-", ".arrow"),
        ):
            for number, path in numbered(folder, prefix, suffix):
                if number < batch:
                    remove(path)
        self.files = _ledger(recorded)
        self.pending, self.clock, self.batch = pending, clock, batch + 1


def _ledger(recorded: dict[str, Any]) -> dict[str, ledger.Seen]:
    return {
        fid: ledger.Seen(**{**seen, "said": tuple(seen["said"])})
        for fid, seen in recorded["files"].items()
    }


def _check_settings(checkpoint: str, settings: Settings) -> None:
    """The checkpoint's settings recorded at its first start; an error when they differ."""
    path = os.path.join(checkpoint, "settings.json")
    wanted = json.loads(json.dumps(settings.identity()))
    if not os.path.exists(path):
        write_json(path, wanted)
        return
    found = read_json(path)
    changed = [k for k in wanted if found.get(k) != wanted[k]]
    if changed:
        raise InputError(
            f"watch_duplicates: the checkpoint {printable(checkpoint)} was written with other "
            f"{', '.join(changed)} ({', '.join(f'{k}={found.get(k)}' for k in changed)}); its "
            "state holds what they decided: start with a new checkpoint to change them"
        )


def _write_arrow(path: str, table: pa.Table) -> None:
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _read_arrow(path: str) -> pa.Table:
    with pa.OSFile(path, "rb") as source:
        return pa.ipc.open_file(source).read_all()
