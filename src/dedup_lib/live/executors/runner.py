"""The monitor's micro-batches with the state on the executors, as ``watch --state executors``
runs them: each :meth:`ExecutorsRunner.step` plans what is new in the landing folder and stages
it for the streaming query (:mod:`~dedup_lib.live.executors.plans`,
:mod:`~dedup_lib.live.executors.staging`); the query judges it in Spark's state store and
writes the verdicts of each of its micro-batches (:mod:`~dedup_lib.live.executors.query`),
after which that micro-batch's line (:class:`~dedup_lib.live.output.lines.BatchLine`) is
counted by Spark from the verdicts written and told, and its counts recorded
(:mod:`~dedup_lib.live.executors.counts`).

It has the driver's runner's face (:class:`dedup_lib.live.runner.Runner`: ``step``,
``more``, ``settle``, ``stop``), so the watch's loop runs either.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter as Tally
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from dedup_lib.columns import C0
from dedup_lib.live.checkpoint import check_settings
from dedup_lib.live.executors import counts
from dedup_lib.live.executors.plans import PlanFeed
from dedup_lib.live.executors.query import ExecutorsQuery, forget_folders
from dedup_lib.live.executors.resends import ResendsQuery, copies_writer, found_alerts
from dedup_lib.live.executors.staging import PlanIntake
from dedup_lib.live.output.labels import EntityLabels
from dedup_lib.live.output.lines import BatchLine, StateSize, Tell
from dedup_lib.live.output.sink import AlertsFile
from dedup_lib.live.output.totals import Totals, counted_by
from dedup_lib.live.state.judge import Clock

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dedup_lib.live.checkpoint import Folders, PlanRecord, Settings
    from dedup_lib.live.landing.ledger import Plan
    from dedup_lib.live.service.metrics import Metrics
    from dedup_lib.telemetry.landing import Landing


class ExecutorsRunner:
    """Micro-batches of the folder ``landing`` watched with ``settings`` (whose ``state`` is
    ``executors``), written to ``folders``, Spark's query triggered every ``trigger``; the
    state, Spark's, under ``<checkpoint>/executors``. ``metrics``, when given, counts as the
    driver's mode counts, from the records of :mod:`~dedup_lib.live.executors.counts`."""

    #: The last micro-batch of the resends' query whose alerts were counted.
    resends_counted: int
    #: The judge's anchors and waiting sends after the last micro-batch counted, as its
    #: records add them up; None for a checkpoint that began before they were counted.
    held: tuple[int, int] | None

    def __init__(
        self,
        spark: SparkSession,
        landing: Landing,
        settings: Settings,
        folders: Folders,
        tell: Tell,
        trigger: str = "1 second",
        metrics: Metrics | None = None,
    ) -> None:
        check_settings(folders.checkpoint, settings)
        self.on_line, self.on_load, on_note = tell
        self.root = root = os.path.join(folders.checkpoint, "executors")
        self.metrics = metrics
        self.labels = metrics.labels if metrics is not None else EntityLabels()
        self.lateness_ms = settings.lateness // timedelta(milliseconds=1)
        #: Never set: the state store spills to disk (the driver's runner's face).
        self.refused: str | None = None
        #: Notes said since the last plan's loads were recorded, by kind.
        self.notes: Tally[str] = Tally()
        self.counted = self._restore()
        self.alerts = (
            AlertsFile(folders.alerts, os.path.join(root, "alerts.json"))
            if folders.alerts
            else None
        )
        #: The resends' query, started with the judge's (:meth:`_pair_resends`), when a
        #: horizon is set; the alerts file is appended by one thread at a time.
        self.horizon, self.trigger = settings.horizon, trigger
        self.resends: ResendsQuery | None = None
        self.appending = threading.Lock()
        copies = (
            copies_writer(os.path.join(root, "resends", "inbox"))
            if settings.horizon is not None
            else None
        )
        self.query = ExecutorsQuery(
            spark, root, folders.out, settings.lateness, trigger=trigger,
            on_written=self._told, content=settings.content, copies=copies,
        )  # fmt: skip
        self.intake = PlanIntake(
            landing, settings.policy, settings.content, root, folders.quarantine
        )
        self.feed = PlanFeed(
            landing.path, settings.reading, folders, self.query, self._keyed, on_note,
            self._scanned,
        )  # fmt: skip

    @property
    def more(self) -> bool:
        """bool: Whether the ledger left records for the next plan."""
        return self.feed.more

    def step(self) -> PlanRecord | None:
        """Plan what is new and stage it for the query; None when nothing new has landed.

        Raises
        ------
        BaseException
            What stopped the query, if it failed.
        """
        self.query.check()
        self._count_written()
        self._pair_resends()
        self._measure()
        recorded = self.feed.step()
        if recorded is not None:
            self.on_load(dict(self.intake.counts))
        return recorded

    def settle(self) -> None:
        """Wait until the query has judged every plan staged, and what their watermark made
        due."""
        self.query.settle()
        self.query.check()
        self._count_written()
        if self._pair_resends() is not None:
            assert self.resends is not None
            self.resends.settle()
            self._pair_resends()
        self._measure()

    def stop(self) -> None:
        """Stop the queries between two of their micro-batches; what they wrote before they
        stopped counted and alerted now, not at the next start (on Spark Connect, the judge's
        last micro-batches; the resends the second query found). Copies it had not yet paired
        wait in its inbox for the next start. A query's failure is raised after that count,
        the judge's before the resends' query's: what either wrote is not left to the next
        start, and one failure does not hide the other's query's stop."""
        failures: list[BaseException] = []
        for query in (self.query, self.resends):
            if query is not None:
                try:
                    query.stop()
                except BaseException as failure:  # raised after the count, below
                    failures.append(failure)
        try:
            self._count_written()
            if self.resends is not None:
                self._pair_resends()
        finally:
            if failures:
                raise failures[0]

    def _pair_resends(self) -> ResendsQuery | None:
        """The resends' query, started once the judge's stream has columns with the
        content's hashes; the resends it wrote since the last look alerted, told in a line,
        counted and recorded (:data:`~dedup_lib.live.executors.counts.RESENDS`), once each."""
        schema = self.query.inbox.schema
        if self.resends is None:
            if self.horizon is None or schema is None or C0 not in schema.names:
                return None
            self.resends = ResendsQuery(
                self.query.spark, self.root, schema, self.horizon, self.query.lateness,
                trigger=self.trigger,
            )  # fmt: skip
        self.resends.check()
        for batch, folder in self.resends.written():
            found = found_alerts(self.query.spark, folder)
            with self.appending:
                if self.alerts is not None:
                    self.alerts.append(batch, found, stream="resends")
            if found.num_rows:
                self.on_line(BatchLine.of_resends(batch, found, self._state_size()))
            raised = counted_by(found, "kind", self.labels)
            counted = Totals(alerts=raised, last_alert=dict.fromkeys(raised, time.time()))
            counts.record(self.root, counts.RESENDS, batch, counted)
            if self.metrics is not None and batch > self.resends_counted:
                self.metrics.alerted(counted)
            self.resends_counted = max(self.resends_counted, batch)
        self.resends.forget(self.resends_counted)
        return self.resends

    def _restore(self) -> int:
        """The counters as the records left them; the last micro-batch counted."""
        _, loads = counts.latest(self.root, counts.LOADS)
        counted, verdicts = counts.latest(self.root, counts.VERDICTS)
        self.resends_counted, resent = counts.latest(self.root, counts.RESENDS)
        self.held = verdicts.held
        loads.add(verdicts)
        loads.add(resent)
        self.labels.restore(entity for entity, _ in loads.sends)
        if self.metrics is not None:
            self.metrics.restored(loads, self._sized(0, 0), None)
        return counted

    def _scanned(self, planned: Plan) -> None:
        """A look at the folder: its backlog and notes told to the metrics."""
        for note in planned.notes:
            self.notes[note.kind] += 1
            if self.metrics is not None:
                self.metrics.noted(note.kind)
        if self.metrics is not None:
            self.metrics.scanned(*planned.backlog, planned.landed)

    def _keyed(self, recorded: PlanRecord) -> DataFrame:
        """Plan ``recorded``'s keyed sends (:class:`PlanIntake`), its loads recorded before it
        is staged and counted."""
        sends = self.intake(recorded)
        assert self.intake.quarantined is not None
        loads = counts.loads_of(self.intake.counts, self.intake.quarantined, self.notes)
        counts.record(self.root, counts.LOADS, recorded.batch, loads)
        self.notes.clear()
        if self.metrics is not None:
            self.metrics.loaded(loads)
        return sends

    def _count_written(self) -> None:
        """On Spark Connect, whose server writes the verdicts without telling this process:
        each micro-batch written since the last counted, counted as if told."""
        if not self.query.told:
            for batch, folder, seconds in self.query.written(self.counted):
                self._told(batch, folder, seconds)

    def _told(self, batch: int, folder: str, seconds: float) -> None:
        """Micro-batch ``batch``'s verdicts in ``folder``, judged and written in ``seconds``:
        counted and recorded, counted by the metrics unless a record of it had been (a
        micro-batch Spark runs again after a restart), and its line told when it answered
        anything."""
        spark, now = self.query.spark, time.time()
        raised = counts.raised(spark, self.query.alert_folder(batch))
        line, counted = counts.counted_batch(spark, batch, folder, self.labels, now, raised)
        if self.alerts is not None:
            with self.appending:
                self.alerts.append(batch, raised)
        self.held = counts.record(self.root, counts.VERDICTS, batch, counted).held
        forget_folders(self.query.alerts, batch)
        size = self._state_size()
        if self.metrics is not None and batch > self.counted:
            clock = Clock(self.lateness_ms, self._latest_ms())
            self.metrics.committed(counted, seconds, size, clock)
        self.counted = max(self.counted, batch)
        if line is not None:
            self.on_line(replace(line, state=size))

    def _measure(self) -> None:
        """The state stores' size told to the metrics, as Spark last reported it."""
        if self.metrics is not None:
            self.metrics.sized(self._state_size())

    def _state_size(self) -> StateSize:
        """The state stores' bytes, the judge's and the resends', as Spark last reported them,
        and the judge's anchors and waiting sends."""
        stores = [self.query.store_bytes()]
        if self.resends is not None:
            stores.append(self.resends.store_bytes())
        memory, disk = (sum(figures) for figures in zip(*stores, strict=True))
        return self._sized(memory, disk)

    def _sized(self, memory: int, disk: int) -> StateSize:
        """The state of ``memory`` and ``disk`` bytes, holding what the records counted."""
        keys, waiting = self.held or (0, 0)
        return StateSize(keys, memory, disk, waiting, executors=True, counted=self.held is not None)

    def _latest_ms(self) -> int | None:
        """The latest send time the watermark of the last finished micro-batch stands for."""
        mark = self.query.watermark_ms()
        return None if mark is None or mark <= 0 else mark + self.lateness_ms
