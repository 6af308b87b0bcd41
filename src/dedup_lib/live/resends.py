"""Resends that reached consumers again, as they happen: a send accepted although the same
content was accepted on its entity shortly before (within a horizon the user chooses). Its
MessageId differed (a retry that made a new one), or the window had closed: the broker could
not catch it.

Accepted sends come out of the monitor in send-time order across micro-batches (each is
judged once the watermark passes it), so each micro-batch compares its accepted sends with
the last accepted send of each content before it: a small table kept in the checkpoint, one
file per micro-batch (a micro-batch done again after a crash reads the one before it and
overwrites its own), holding only contents accepted within the horizon.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import column
from dedup_lib.live.keyed import CONTENT
from dedup_lib.rules.policy import ACCEPTED

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

RESEND = "resend"
_KEPT = ["entity", CONTENT, "send_time", "event_id", "message_id"]


def _store(folder: str, batch_id: int) -> str:
    return os.path.join(folder, f"{batch_id:010d}")


def _before(folder: str, batch_id: int) -> str | None:
    """The table the latest micro-batch before ``batch_id`` left, if any."""
    if not os.path.isdir(folder):
        return None
    done = sorted(n for n in os.listdir(folder) if n.isdigit() and int(n) < batch_id)
    return os.path.join(folder, done[-1]) if done else None


def accepted_content() -> Column:
    """Whether a verdict is an accepted send with content: what this module compares."""
    return (column("verdict") == ACCEPTED) & column(CONTENT).isNotNull()


def resend_alerts(
    result: DataFrame, folder: str, batch_id: int, horizon: timedelta, latest: int
) -> DataFrame:
    """The alerts for the resends in one micro-batch of verdicts (``result`` with the content
    column), in :func:`dedup_lib.live.alerts.alerts_of`'s columns; the table of last
    accepted contents for the next micro-batch written to ``folder``. ``latest`` is the time
    of the micro-batch's latest :func:`accepted_content` send (microseconds since the epoch,
    counted with its verdicts): the table keeps what is within the horizon of it. A
    micro-batch without such a send has no resend and writes no table (the next reads the
    one before)."""
    spark = result.sparkSession
    entity = column("entity") if "entity" in result.columns else F.lit(None)
    accepted = result.where(accepted_content())
    now = accepted.select(
        entity.cast("string").alias("entity"),
        column(CONTENT),
        column("send_time"),
        column("event_id"),
        column("message_id").cast("string").alias("message_id"),
        column("dedup_key"),
        F.lit(True).alias("__new"),
    )
    previous = _before(folder, batch_id)
    both = now
    if previous is not None:
        kept = T.StructType([now.schema[name] for name in _KEPT])
        old = spark.read.schema(kept).parquet(previous)
        old = old.select(
            *_KEPT, F.lit(None).cast("string").alias("dedup_key"), F.lit(False).alias("__new")
        )
        both = old.unionByName(now)
    order = Window.partitionBy("entity", CONTENT).orderBy("send_time", "event_id")
    paired = both.select(
        "*",
        F.lag("send_time").over(order).alias("__prev_time"),
        F.lag("event_id").over(order).alias("__prev_id"),
        F.lag("message_id").over(order).alias("__prev_message"),
        F.row_number().over(order.orderBy(F.desc("send_time"), F.desc("event_id"))).alias("__n"),
    )
    _keep(paired, folder, batch_id, horizon / timedelta(seconds=1), latest)
    since = F.unix_micros(column("send_time")) - F.unix_micros(column("__prev_time"))
    within = since <= F.lit(int(horizon / timedelta(microseconds=1)))
    again = column("__new") & column("__prev_time").isNotNull() & within
    why = F.concat(
        F.lit("the same content was accepted "),
        F.format_number(since / F.lit(1e6), 3),
        F.lit(" s before (MessageId "),
        F.coalesce(column("__prev_message"), F.lit("none")),
        F.lit("): it reached consumers again"),
    )
    return paired.where(again).select(
        F.lit(RESEND).alias("kind"),
        column("entity"),
        column("dedup_key"),
        column("message_id"),
        column("send_time"),
        column("event_id"),
        column("__prev_time").alias("original_send_time"),
        column("__prev_id").alias("original_event_id"),
        why.alias("why"),
    )


def _keep(paired: DataFrame, folder: str, batch_id: int, horizon_s: float, latest: int) -> None:
    """The last accepted send of each content, where it is within the horizon of the latest
    send seen, for the next micro-batch. Accepted sends come in send-time order across
    micro-batches, so ``latest`` is the latest of the table's too."""
    cutoff = F.timestamp_micros(F.lit(latest)) - F.make_dt_interval(secs=F.lit(horizon_s))
    last = paired.where((column("__n") == 1) & (column("send_time") >= cutoff))
    target = _store(folder, batch_id)
    shutil.rmtree(target, ignore_errors=True)
    last.select(*_KEPT).write.parquet(target)
