"""What the monitor raises as it happens: sends the broker destroys or refuses.

A collision is a duplicate whose content differs from its original's: a different message
that reused an id, dropped by the broker and reported to its sender as sent (data loss). A
rejected send was refused by the SDK or the broker. Each alert names the entity, the key, the
send and, for a collision, the original, and says why. Resends that reached consumers again
are :mod:`dedup_lib.live.state.resends`'. A micro-batch's alerts are one Arrow table, built column
by column: a reused id can make a hundred thousand collisions in a micro-batch.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.columns import KEYED_CONTENT, ORIGINAL_CONTENT
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


#: The columns of the verdicts an alert is made of.
USED = {*FIELDS, "verdict", "reason", KEYED_CONTENT, ORIGINAL_CONTENT}


def alerts_of(answered: pa.Table) -> pa.Table:
    """The alerts in one micro-batch of verdicts (with content, if compared), in
    :data:`FIELDS`: rejected sends, then collisions."""
    answered = answered.select([c for c in answered.column_names if c in USED])
    verdict = answered["verdict"]
    rejected = answered.filter(pc.fill_null(pc.equal(verdict, REJECTED), False))
    parts = [alert_table(rejected, REJECTED, _joined("refused: ", rejected["reason"]))]
    if KEYED_CONTENT in answered.column_names:
        mine, theirs = answered[KEYED_CONTENT], answered[ORIGINAL_CONTENT]
        same = pc.fill_null(pc.equal(mine, theirs), False)
        both_none = pc.and_(pc.is_null(mine), pc.is_null(theirs))
        differs = pc.and_(pc.equal(verdict, DUPLICATE), pc.invert(pc.or_(same, both_none)))
        collided = answered.filter(pc.fill_null(differs, False))
        why = _joined(
            "a different message (content ",
            _said(collided[KEYED_CONTENT]),
            ", original's ",
            _said(collided[ORIGINAL_CONTENT]),
            ") reused the key within the window: dropped, reported to its sender as sent",
        )
        parts.append(alert_table(collided, COLLISION, why))
    return pa.concat_tables(parts)


def alert_table(rows: pa.Table, kind: str, why: pa.ChunkedArray | pa.Array) -> pa.Table:
    """``rows`` (verdicts) as alerts of ``kind``, each with its ``why``."""
    count = rows.num_rows

    def text(name: str) -> pa.Array | pa.ChunkedArray:
        if name not in rows.column_names:
            return pa.nulls(count, pa.string())
        return rows[name].cast(pa.string())

    ids = rows.schema.field("event_id").type

    def ident(name: str) -> pa.Array | pa.ChunkedArray:
        if name not in rows.column_names:
            return pa.nulls(count, ids)
        return rows[name].cast(ids)

    def time(name: str) -> pa.Array | pa.ChunkedArray:
        if name not in rows.column_names:
            return pa.nulls(count, pa.timestamp("us", tz="UTC"))
        return rows[name].cast(pa.timestamp("us", tz="UTC"))

    return pa.table(
        {
            "kind": pa.array([kind] * count, pa.string()),
            "entity": text("entity"),
            "dedup_key": text("dedup_key"),
            "message_id": text("message_id"),
            "send_time": time("send_time"),
            "event_id": ident("event_id"),
            "original_send_time": time("original_send_time"),
            "original_event_id": ident("original_event_id"),
            "why": why,
        }
    )


def _said(values: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.fill_null(values.cast(pa.string()), "none")


def _joined(*parts: str | pa.ChunkedArray) -> pa.ChunkedArray:
    """Texts joined element by element (a text given once is the same on every row)."""
    return pc.binary_join_element_wise(*parts, "")
