"""What the monitor raises as it happens: sends the broker destroys or refuses.

A collision is a duplicate whose content differs from its original's: a different message
that reused an id, dropped by the broker and reported to its sender as sent (data loss). A
rejected send was refused by the SDK or the broker. Each alert names the entity, the key, the
send and, for a collision, the original, and says why. Resends that reached consumers again
are :mod:`dedup_lib.live.resends`'.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.live.judge import ORIGINAL_CONTENT
from dedup_lib.live.keyed import CONTENT
from dedup_lib.rules.policy import DUPLICATE, REJECTED

COLLISION = "collision"
#: An alert's fields, in order.
FIELDS = (
    "kind",
    "entity",
    "dedup_key",
    "message_id",
    "send_time",
    "event_id",
    "original_send_time",
    "original_event_id",
    "why",
)


def alerts_of(answered: pa.Table) -> list[dict[str, Any]]:
    """The alerts in one micro-batch of verdicts (with content, if compared): one dict each,
    with :data:`FIELDS`."""
    verdict = answered["verdict"]
    rejected = answered.filter(pc.fill_null(pc.equal(verdict, REJECTED), False))
    found = [
        _alert(row, REJECTED, f"refused: {row['reason']}")
        for row in rejected.select(_needed(rejected)).to_pylist()
    ]
    if CONTENT in answered.column_names:
        same = pc.fill_null(pc.equal(answered[CONTENT], answered[ORIGINAL_CONTENT]), False)
        both_none = pc.and_(pc.is_null(answered[CONTENT]), pc.is_null(answered[ORIGINAL_CONTENT]))
        differs = pc.and_(pc.equal(verdict, DUPLICATE), pc.invert(pc.or_(same, both_none)))
        collided = answered.filter(pc.fill_null(differs, False))
        for row in collided.select(_needed(collided)).to_pylist():
            why = (
                f"a different message (content {_text(row[CONTENT])}, original's "
                f"{_text(row[ORIGINAL_CONTENT])}) reused the key within the window: dropped, "
                "reported to its sender as sent"
            )
            found.append(_alert(row, COLLISION, why))
    return found


def _needed(table: pa.Table) -> list[str]:
    wanted = {*FIELDS, "reason", CONTENT, ORIGINAL_CONTENT}
    return [c for c in table.column_names if c in wanted]


def _text(value: Any) -> str:
    return "none" if value is None else str(value)


def _alert(row: dict[str, Any], kind: str, why: str) -> dict[str, Any]:
    alert = {name: row.get(name) for name in FIELDS}
    alert.update(kind=kind, why=why)
    for name in ("entity", "message_id"):
        if alert[name] is not None:
            alert[name] = str(alert[name])
    return alert
