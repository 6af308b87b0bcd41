"""Each ledger plan's keyed sends staged as one Parquet file in the checkpoint, the streaming
query's input: one file is one of Spark's micro-batches (``maxFilesPerTrigger`` 1), in row groups
the query reads as several tasks.

The ledger still decides which bytes of which landed file are finished; its plan's sends are
keyed by Spark and written here, under a temporary name, then renamed in as
``plan-N.parquet`` with a modification time after the file before it (Spark's file source takes
files in that order, by the millisecond), and ``staged.json`` records ``N``. Spark's file
source reads each path once, whatever happens after: a plan staged again after a crash between
the rename and the record is a file Spark has either read already (and skips: same path) or
not yet (and reads, once). The query deletes each file once the micro-batch that read it is
committed (:class:`~dedup_lib.live.executors.query.ExecutorsQuery`): the inbox holds the
plans not yet judged. The stream's columns are those of the first file staged
(``schema.json``); a later plan's are cast to them, missing ones null.

Each file also carries, on every row, the latest send time of the plans staged before it and
of those and itself (:data:`~dedup_lib.live.executors.processor.SEEN_BEFORE`, ``SEEN_AFTER``;
``staged.json`` records the latter): the judge learns from them the watermark its micro-batch
leaves, before Spark sets it. A plan staged again after a crash reads the same record, so its
file is the same.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import SEND_MICROS, column
from dedup_lib.live.durable import read_json, write_json
from dedup_lib.live.executors.processor import SEEN_AFTER, SEEN_BEFORE, SPLIT_BYTES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


#: The writer's options for this mode's Parquet files (the plan's pass, the inbox, the
#: verdicts): no dictionary encoding, which columns of mostly distinct values (ids, hashes,
#: times) try and give up on, at a cost that was most of the Parquet writing's time in a
#: profile of the staging. A micro-batch's verdicts are about 7 % larger without it, and
#: written in a third of the time.
WRITE_OPTIONS = {"parquet.enable.dictionary": "false"}
#: The inbox's options: row groups the query reads apart
#: (:data:`~dedup_lib.live.executors.processor.SPLIT_BYTES`).
INBOX_OPTIONS = {**WRITE_OPTIONS, "parquet.block.size": str(SPLIT_BYTES)}


@dataclass(frozen=True)
class Inbox:
    """The staged plans under ``root`` (a folder of the checkpoint).

    Examples
    --------
    >>> Inbox("/tmp/ck/executors").file(3)
    '/tmp/ck/executors/inbox/plan-0000000003.parquet'
    """

    root: str

    @property
    def folder(self) -> str:
        """The folder Spark's file source reads."""
        return os.path.join(self.root, "inbox")

    def file(self, batch: int) -> str:
        """Plan ``batch``'s file."""
        return os.path.join(self.folder, f"plan-{batch:010d}.parquet")

    @property
    def staged(self) -> int:
        """The last plan staged whole (-1: none)."""
        return int(self._record().get("plan", -1))

    @property
    def schema(self) -> T.StructType | None:
        """The stream's columns: the first staged file's (None before it)."""
        path = os.path.join(self.root, "schema.json")
        if not os.path.exists(path):
            return None
        parsed = T.StructType.fromJson(read_json(path))
        return parsed

    def stage(self, batch: int, sends: DataFrame) -> str:
        """Plan ``batch``'s keyed ``sends`` written (two Spark jobs: their latest send time,
        then the file) and put in place as one file; its path."""
        record = self._record()
        before = record.get("seen_micros")
        (latest,) = sends.agg(F.max(column(SEND_MICROS))).first() or (None,)
        after = max((t for t in (before, latest) if t is not None), default=None)
        sends = sends.withColumns(
            {SEEN_BEFORE: F.lit(before).cast("long"), SEEN_AFTER: F.lit(after).cast("long")}
        )
        schema = self.schema
        if schema is None:
            schema = sends.schema
            write_json(os.path.join(self.root, "schema.json"), json.loads(schema.json()))
        work = os.path.join(self.root, "staging", f"plan-{batch:010d}")
        part = write_one_parquet(_conformed(sends, schema), work, INBOX_OPTIONS)
        target = self.file(batch)
        os.makedirs(self.folder, exist_ok=True)
        mtime = max(time.time_ns(), int(record.get("mtime_ns", 0)) + 1_000_000)
        os.utime(part, ns=(mtime, mtime))
        os.replace(part, target)
        shutil.rmtree(work, ignore_errors=True)
        staged = {"plan": batch, "mtime_ns": mtime, "seen_micros": after}
        write_json(os.path.join(self.root, "staged.json"), staged)
        return target

    def _record(self) -> dict[str, Any]:
        path = os.path.join(self.root, "staged.json")
        return dict(read_json(path)) if os.path.exists(path) else {}


def write_one_parquet(frame: DataFrame, work: str, options: dict[str, str] | None = None) -> str:
    """``frame`` written by Spark (one job) as one Parquet file in the folder ``work``, with
    the writer's ``options``, replacing what is there: the file's path, for the caller to
    rename into place whole. (Spark writes a file for the one partition even when it holds
    no row.)"""
    frame.coalesce(1).write.options(**(options or {})).mode("overwrite").parquet(work)
    (part,) = glob.glob(os.path.join(work, "part-*.parquet"))
    return part


def _conformed(sends: DataFrame, schema: T.StructType) -> DataFrame:
    """``sends`` with exactly ``schema``'s columns, cast to its types (missing ones null)."""
    have = set(sends.columns)
    return sends.select(
        *(
            (column(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in schema.fields
        )
    )
