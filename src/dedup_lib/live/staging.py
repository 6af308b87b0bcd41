"""The first of the monitor's two queries: files as they land, loaded micro-batch by
micro-batch, and written as sends ready to judge (the staging folder) and a quarantine.

Within a micro-batch the rows are a static frame, so the load and the batch rule (a send
call whose messages do not share one key is refused whole: a window over its ``batch_id``)
run exactly as in a batch replay. A send call's messages travel together, in one file (one
SDK call, one span tree), so the batch rule sees them whole. Each micro-batch writes one file
per output, named by its id, so a micro-batch run again after a crash overwrites its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from dedup_lib.columns import column
from dedup_lib.replay.sql_rules import with_batches
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.write import one_file

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dedup_lib.rules.policy import Policies
    from dedup_lib.telemetry.landing import BatchLoad, Landing

#: Event ids given to the sends of a micro-batch without one: its id times this, plus the
#: send's position in it (by file, then as read).
_BATCH_SPAN = 10**12


def part_name(batch_id: int) -> str:
    """The file a micro-batch writes in a folder of the monitor."""
    return f"part-{batch_id:010d}.parquet"


def ready(valid: DataFrame, policy: Policies, batch_id: int) -> DataFrame:
    """The valid sends of one micro-batch with an ``event_id`` (their own, or their place in
    the micro-batch) and the batch rule's flag."""
    if "event_id" not in valid.columns:
        place = F.row_number().over(
            Window.orderBy(column(SOURCE_FILE), F.monotonically_increasing_id())
        )
        valid = valid.withColumn("event_id", F.lit(batch_id * _BATCH_SPAN) + place)
    return with_batches(valid, policy, F.monotonically_increasing_id())


@dataclass(frozen=True)
class Staging:
    """Where the first query writes: ``sends`` (ready to judge) and ``quarantine``."""

    landing: Landing
    policy: Policies
    sends: str
    quarantine: str

    def schema_source(self) -> DataFrame:
        """An empty micro-batch made ready: the staging folder's columns, before any file."""
        return ready(self.landing.valid_columns(), self.policy, 0)

    def write(self, batch: DataFrame, batch_id: int) -> BatchLoad:
        """Load one micro-batch and write its sends and quarantine; what it loaded."""
        loaded = self.landing.load(batch)
        try:
            staged = ready(loaded.valid, self.policy, batch_id)
            _save(staged, os.path.join(self.sends, part_name(batch_id)))
            if loaded.counts["quarantined"]:
                _save(loaded.quarantine, os.path.join(self.quarantine, part_name(batch_id)))
        finally:
            loaded.release()
        return loaded


def _save(frame: DataFrame, path: str) -> None:
    one_file(
        lambda target: frame.coalesce(1).write.mode("overwrite").parquet(target),
        path,
        "watch_duplicates",
    )
