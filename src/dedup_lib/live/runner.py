"""The monitor's micro-batches, one after another, each planned, read, judged and committed,
so that a restart after a crash at any instant goes on where the last commit left off, with
every landed send judged once and every output written once.

A micro-batch ``N``:

1. the ledger plans what is new in the folder, its chunks are copied into the checkpoint,
   then the plan (chunks and the ledger after them) is recorded: ``plans/plan-N.json``;
2. Spark reads the chunks (:mod:`dedup_lib.live.intake.micro_batch`), the driver judges the sends
   (:mod:`dedup_lib.live.state.judge`), the verdicts and quarantined rows are written
   (``part-N.parquet``, replacing any a crashed run left), the new anchors are written
   (the state's segment ``N``) and the sends still waiting (``pending/pending-N.arrow``);
3. the commit, ``commits/commit-N.json`` (the watermark, the counts, the micro-batch's
   line with its alerts), is written: from then on ``N`` is done;
4. its alerts are appended to the alerts file, and what it replaced is removed.

A restart reads the last commit and rebuilds the state from the segments up to it; a plan
recorded after it is run again, from its own chunks.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING

import pyarrow as pa

from dedup_lib.columns import ORIGINAL_CONTENT
from dedup_lib.live.checkpoint import (
    RECORDS,
    Commit,
    Folders,
    PlanRecord,
    Settings,
    check_settings,
)
from dedup_lib.live.durable import read_arrow, read_json, remove, write_arrow
from dedup_lib.live.intake.keyed import MONITOR_COLUMNS
from dedup_lib.live.intake.micro_batch import Intake, load_micro_batch, plan_micro_batch
from dedup_lib.live.landing import ledger
from dedup_lib.live.landing.chunks import remove_chunks
from dedup_lib.live.output.labels import EntityLabels
from dedup_lib.live.output.lines import BatchLine, StateSize, Tell
from dedup_lib.live.output.sink import AlertsFile, write_part
from dedup_lib.live.output.totals import Totals
from dedup_lib.live.service.metrics import Metrics
from dedup_lib.live.state.alerts import alerts_of
from dedup_lib.live.state.budget import OVER_BUDGET, StateBudget
from dedup_lib.live.state.judge import Clock, Judged, judge
from dedup_lib.live.state.resends import Resends
from dedup_lib.live.state.store import KeyedState

if TYPE_CHECKING:
    from dedup_lib.telemetry.landing import Landing


class Runner:
    """Micro-batches of the folder ``landing`` watched with ``settings``, written to
    ``folders``; :meth:`step` runs one. A micro-batch that could take the state's memory past
    ``budget`` (default: :func:`~dedup_lib.live.state.budget.default_budget`) is refused:
    said once, and no later one is judged by this process (``refused`` says why)."""

    def __init__(
        self,
        landing: Landing,
        settings: Settings,
        folders: Folders,
        tell: Tell,
        metrics: Metrics | None = None,
        budget: StateBudget | None = None,
    ) -> None:
        self.landing, self.settings, self.folders = landing, settings, folders
        self.on_line, self.on_load, self.on_note = tell
        self.metrics = metrics
        self.budget = budget if budget is not None else StateBudget()
        #: Why a micro-batch was refused, if one was.
        self.refused: str | None = None
        #: The entities' labels in the counters.
        self.labels = metrics.labels if metrics is not None else EntityLabels()
        self.alerts = (
            AlertsFile(folders.alerts, os.path.join(folders.checkpoint, "alerts.json"))
            if folders.alerts
            else None
        )
        self.more = False
        check_settings(folders.checkpoint, settings)
        self._restore()

    def _restore(self) -> None:
        """The state the last commit left, and the plan recorded after it, if any."""
        commits = list(self.folders.records("commits"))
        last = Commit.from_json(read_json(commits[-1][1])) if commits else None
        self.batch = last.batch + 1 if last else 0
        lateness_ms = self.settings.lateness // timedelta(milliseconds=1)
        self.clock = Clock(lateness_ms, last.latest_ms if last else None)
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
        pending = self.folders.record("pending", self.batch - 1)
        self.pending = read_arrow(pending) if os.path.exists(pending) else None
        self.files, self.redo = self.folders.plans_at(self.batch)
        self.totals = last.totals if last else Totals()
        self.labels.restore(entity for entity, _ in self.totals.sends)
        if self.redo is not None:
            # Its notes were said by the process that recorded it, and never committed.
            self.totals.notes.update(self.redo.notes)
        if self.metrics is not None:
            self.metrics.restored(self.totals, self._size(self.pending), self.clock.watermark)

    def step(self) -> BatchLine | None:
        """Plan and run one micro-batch; None when nothing new has landed, or when one was
        refused (nothing judged since: the state cannot have shrunk)."""
        if self.refused is not None:
            return None
        recorded, self.redo = self.redo, None
        if recorded is None:
            recorded = self._plan()
            if recorded is None:
                return None
        return self._run(recorded)

    def settle(self) -> None:
        """Nothing to wait for: a micro-batch is judged and written when :meth:`step` returns
        (the executors' runner waits for its query here)."""

    def stop(self) -> None:
        """Nothing runs between steps (the executors' runner stops its query here)."""

    def _plan(self) -> PlanRecord | None:
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
        recorded = self.folders.record_plan(self.batch, planned)
        self.more = recorded is None or planned.more
        return recorded

    def _run(self, recorded: PlanRecord) -> BatchLine | None:
        """Micro-batch ``recorded.batch``: read, judged, written, committed; None when its
        sends could take the state past its budget."""
        started = time.monotonic()
        batch, settings = recorded.batch, self.settings
        intake = load_micro_batch(
            plan_micro_batch(
                self.landing,
                recorded.paths,
                recorded.names,
                settings.policy,
                settings.content,
                batch,
            )
        )
        sends = intake.sends.num_rows
        refusal = self.budget.refusal(batch, self._needed(sends), sends)
        if refusal is not None:
            self._refuse(recorded, refusal, sends)
            return None
        pending = self.pending if self.pending is not None else intake.sends.slice(0, 0)
        judged = judge(batch, intake.sends, pending, self.clock, self.state)
        found = self._write(batch, intake, judged)
        line = BatchLine.of(batch, judged.answered, found, self._size(judged.pending))
        counted = Totals.of(
            judged.answered, found, intake.quarantine, intake.counts, self.labels, time.time()
        )
        self.totals.add(counted)
        Commit(batch, judged.clock.latest_ms, intake.counts, line, self.totals).write(self.folders)
        self._committed(batch, recorded, judged.pending, judged.clock)
        if self.metrics is not None:
            self.metrics.committed(counted, time.monotonic() - started, line.state, self.clock)
        self.on_load(intake.counts)
        self.on_line(line)
        return line

    def _write(self, batch: int, intake: Intake, judged: Judged) -> pa.Table:
        """The verdicts, quarantined rows, alerts and the sends still waiting written; the
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
            write_arrow(self.folders.record("pending", batch), judged.pending)
            written.result()
        return found

    def _needed(self, adding: int) -> int:
        """The most memory the indexes take while ``adding`` sends' keys are put in each."""
        resends = 0 if self.resends is None else self.resends.state.memory_needed(adding)
        return self.state.memory_needed(adding) + resends

    def _refuse(self, recorded: PlanRecord, refusal: str, sends: int) -> None:
        """Micro-batch ``recorded`` refused for the budget: said and counted once, and kept
        to run again from its own chunks when a restart gives the state more room."""
        self.redo, self.refused, self.more = recorded, refusal, False
        self.on_note(refusal)
        if self.metrics is not None:
            self.metrics.noted(OVER_BUDGET)
            self.metrics.refusing(sends)

    def _size(self, pending: pa.Table | None) -> StateSize:
        waiting = 0 if pending is None else pending.num_rows
        state, limit = self.state, self.budget.limit
        memory = self._needed(0)
        return StateSize(state.keys, memory, state.disk_bytes, waiting, budget=limit)

    def _write_parts(self, batch: int, answered: pa.Table, quarantine: pa.Table) -> None:
        """The verdicts, without the monitor's own columns, and the quarantined rows."""
        drop = [c for c in (*MONITOR_COLUMNS, ORIGINAL_CONTENT) if c in answered.column_names]
        if answered.num_rows:
            write_part(self.folders.out, batch, answered.drop_columns(drop))
        if quarantine.num_rows:
            write_part(self.folders.quarantine, batch, quarantine)

    def _committed(self, batch: int, recorded: PlanRecord, pending: pa.Table, clock: Clock) -> None:
        """After the commit: what the micro-batch replaced gone."""
        self.state.release()
        if self.resends is not None:
            self.resends.state.release()
        remove_chunks(os.path.join(self.folders.chunks, f"{batch:010d}"))
        for kind in RECORDS:
            for number, path in self.folders.records(kind):
                if number < batch:
                    remove(path)
        self.files = recorded.files
        self.pending, self.clock, self.batch = pending, clock, batch + 1
