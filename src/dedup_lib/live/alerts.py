"""What the monitor raises as it happens: sends the broker destroys or refuses.

A collision is a duplicate whose content differs from its original's: a different message
that reused an id, dropped by the broker and reported to its sender as sent (data loss). A
rejected send was refused by the SDK or the broker. Each alert names the entity, the key, the
send and, for a collision, the original, and says why. Resends that reached consumers again
are :mod:`dedup_lib.live.resends`'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from dedup_lib.columns import column
from dedup_lib.live.keyed import CONTENT, ORIGINAL_CONTENT
from dedup_lib.rules.policy import DUPLICATE, REJECTED

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

COLLISION = "collision"


def alerts_of(result: DataFrame, content: bool) -> DataFrame:
    """The alerts in one micro-batch of verdicts: ``kind``, ``entity``, ``dedup_key``,
    ``message_id``, ``send_time``, ``event_id``, ``original_send_time``,
    ``original_event_id`` and ``why``."""
    rejected = column("verdict") == REJECTED
    kinds: list[tuple[Column, str, Column]] = [
        (rejected, REJECTED, F.concat(F.lit("refused: "), column("reason")))
    ]
    if content:
        differs = (column("verdict") == DUPLICATE) & ~column(CONTENT).eqNullSafe(
            column(ORIGINAL_CONTENT)
        )
        why = F.concat(
            F.lit("a different message (content "),
            F.coalesce(column(CONTENT), F.lit("none")),
            F.lit(", original's "),
            F.coalesce(column(ORIGINAL_CONTENT), F.lit("none")),
            F.lit(") reused the key within the window: dropped, reported to its sender as sent"),
        )
        kinds.append((differs, COLLISION, why))
    kind = F.when(kinds[0][0], F.lit(kinds[0][1]))
    reason = F.when(kinds[0][0], kinds[0][2])
    for test, name, text in kinds[1:]:
        kind = kind.when(test, F.lit(name))
        reason = reason.when(test, text)
    entity = column("entity") if "entity" in result.columns else F.lit(None).cast("string")
    return result.where(kind.isNotNull()).select(
        kind.alias("kind"),
        entity.cast("string").alias("entity"),
        column("dedup_key"),
        column("message_id").cast("string").alias("message_id"),
        column("send_time"),
        column("event_id"),
        column("original_send_time"),
        column("original_event_id"),
        reason.alias("why"),
    )
