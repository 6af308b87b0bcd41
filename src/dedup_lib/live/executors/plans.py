"""The ledger's plans fed to the streaming query, each once, as in the driver's mode: the ledger
plans what is new in the landing folder, the chunks are copied into the checkpoint and the plan
is recorded (``plans/plan-N.json``); then Spark keys the plan's sends and stages them
(:mod:`~dedup_lib.live.executors.inbox`), after which the plan is the query's, and its chunks
and the records before it go.

A restart stages again the plan recorded after the last one staged, from its own chunks, and
plans the next from the ledger that plan left (docs/decisions/live-state-executors.md, the
table of crashes).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from dedup_lib.live.checkpoint import PlanRecord
from dedup_lib.live.durable import remove
from dedup_lib.live.landing import ledger
from dedup_lib.live.landing.chunks import remove_chunks

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame

    from dedup_lib.live.checkpoint import Folders
    from dedup_lib.live.executors.query import ExecutorsQuery
    from dedup_lib.live.landing.ledger import Plan, Reading, Seen


class PlanFeed:
    """The plans of the folder ``landing`` (read as ``reading``) fed to ``query``, recorded
    in ``folders``' checkpoint; ``keyed`` turns a plan into its keyed sends, a Spark frame
    (its chunks read, loaded and keyed, with
    :func:`~dedup_lib.live.executors.processor.stream_columns`), never rows in the driver;
    ``on_note`` is told what the ledger refuses or cannot read exactly, as it plans, and
    ``on_scan`` each plan of the ledger, new or not (the backlog, when bytes landed, the notes
    by kind)."""

    def __init__(
        self,
        landing: str,
        reading: Reading,
        folders: Folders,
        query: ExecutorsQuery,
        keyed: Callable[[PlanRecord], DataFrame],
        on_note: Callable[[str], None] = lambda _: None,
        on_scan: Callable[[Plan], None] = lambda _: None,
    ) -> None:
        self.landing, self.reading, self.folders = landing, reading, folders
        self.query, self.keyed, self.on_note = query, keyed, on_note
        self.on_scan = on_scan
        self.batch = query.next_plan
        self.files: dict[str, Seen]
        self.files, self.redo = folders.plans_at(self.batch)
        #: Whether the ledger left new records for the next plan.
        self.more = False

    def step(self) -> PlanRecord | None:
        """Plan one micro-batch and stage it; None when nothing new has landed."""
        recorded, self.redo = self.redo, None
        if recorded is None:
            recorded = self._plan()
            if recorded is None:
                return None
        self.query.feed(recorded.batch, self.keyed(recorded))
        self._staged(recorded)
        return recorded

    def _plan(self) -> PlanRecord | None:
        """What is new, copied into the checkpoint and recorded; None when nothing is."""
        planned = ledger.plan(self.landing, self.files, self.reading, time.time())
        self.on_scan(planned)
        for note in planned.notes:
            self.on_note(note.text)
        if not planned.chunks:
            self.files, self.more = planned.files, False
            return None
        recorded = self.folders.record_plan(self.batch, planned)
        self.more = recorded is None or planned.more
        return recorded

    def _staged(self, recorded: PlanRecord) -> None:
        """After the plan is the query's: its chunks and the records before it gone."""
        remove_chunks(os.path.join(self.folders.chunks, f"{recorded.batch:010d}"))
        for number, path in self.folders.records("plans"):
            if number < recorded.batch:
                remove(path)
        self.files, self.batch = recorded.files, recorded.batch + 1


def run_plans(
    feed: PlanFeed,
    *,
    once: bool,
    poll: float = 1.0,
    stopping: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Feed plans until ``stopping()`` says so, looking every ``poll`` seconds when nothing
    new has landed; with ``once``, until nothing is left, then wait for the query to answer
    what the last watermark made due. The number of plans staged.

    Examples
    --------
    >>> class Query:
    ...     def settle(self):
    ...         print("settled")
    >>> class Feed:  # two plans landed, then nothing
    ...     more, query, plans = False, Query(), [0, 1]
    ...     def step(self):
    ...         return self.plans.pop(0) if self.plans else None
    >>> run_plans(Feed(), once=True)
    settled
    2
    """
    staged = 0
    while not stopping():
        if feed.step() is not None:
            staged += 1
        elif not feed.more:
            if once:
                feed.query.settle()
                return staged
            sleep(poll)
    return staged
