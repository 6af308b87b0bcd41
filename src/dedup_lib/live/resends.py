"""Resends that reached consumers again, as they happen: a send accepted although the same
content was accepted on its entity shortly before (within a horizon the user chooses). Its
MessageId differed (a retry that made a new one), or the window had closed: the broker could
not catch it.

Each accepted send with content is paired with the copy accepted before it: one of its own
micro-batch, or the last of earlier ones, which a :class:`~dedup_lib.live.state.KeyedState`
holds by (entity, content) for the horizon. So the work follows the accepted sends, not the
contents held.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.live.keyed import C0, C1, CONTENT, TIME
from dedup_lib.live.state import ANCHOR, CLOSES, K0, K1, KeyedState
from dedup_lib.rules.policy import ACCEPTED

RESEND = "resend"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: What an alert shows of a resend.
_SHOWN = ("entity", "dedup_key", "message_id", "send_time", "event_id")


class Resends:
    """The last accepted copy of each content within ``horizon``, kept in ``folder``."""

    def __init__(self, state: KeyedState, horizon: timedelta) -> None:
        self.state = state
        self.horizon = int(horizon.total_seconds() * 1_000_000)

    def alerts(self, batch: int, answered: pa.Table, watermark: int | None) -> list[dict[str, Any]]:
        """The resends among micro-batch ``batch``'s verdicts; the last copies kept, and
        those beyond the horizon of ``watermark`` let go."""
        accepted = pc.and_(pc.equal(answered["verdict"], ACCEPTED), pc.is_valid(answered[CONTENT]))
        sends = answered.filter(pc.fill_null(accepted, False))
        found: list[dict[str, Any]] = []
        if sends.num_rows:
            by = [
                (C0, "ascending"),
                (C1, "ascending"),
                (TIME, "ascending"),
                ("event_id", "ascending"),
            ]
            sends = sends.take(pc.sort_indices(sends, sort_keys=by))
            found = self._paired(sends)
            self._keep(batch, sends)
        if watermark is not None:
            self.state.expire(watermark)
        return found

    def _paired(self, sends: pa.Table) -> list[dict[str, Any]]:
        """Each send whose copy before it (in its micro-batch, else kept) is within the
        horizon."""
        keys = np.column_stack([sends[C0].to_numpy(), sends[C1].to_numpy()])
        times = sends[TIME].to_numpy()
        first = np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)][: len(keys)]
        held = self.state.find(keys)
        schema = pa.schema([sends.schema.field("event_id"), ("message_id", pa.string())])
        kept = self.state.rows(held.ref[held.held], schema)
        at_kept = np.cumsum(held.held) - 1
        before = np.r_[-1, np.arange(len(keys) - 1)]
        earlier = np.where(first, held.anchor, times[np.maximum(before, 0)])
        has = np.where(first, held.held & (held.anchor <= times), True)
        since = times - earlier
        hits = np.flatnonzero(has & (since <= self.horizon))
        rows = sends.select([c for c in _SHOWN if c in sends.column_names])
        found = []
        for i in hits.tolist():
            row = rows.slice(i, 1).to_pylist()[0]
            if first[i]:
                prev = kept.slice(int(at_kept[i]), 1).to_pylist()[0]
            else:
                prev = rows.slice(i - 1, 1).to_pylist()[0]
            found.append(_alert(row, prev, int(earlier[i]), int(since[i])))
        return found

    def _keep(self, batch: int, sends: pa.Table) -> None:
        """Each content's last accepted copy, for the micro-batches to come."""
        keys = np.column_stack([sends[C0].to_numpy(), sends[C1].to_numpy()])
        last = np.flatnonzero(np.r_[(keys[1:] != keys[:-1]).any(axis=1), True])
        taken = sends.take(pa.array(last))
        held = self.state.find(keys[last])
        times = taken[TIME].to_numpy()
        newer = ~held.held | (held.anchor <= times)
        taken = taken.filter(pa.array(newer))
        self.state.set_anchors(
            batch,
            pa.table(
                {
                    K0: taken[C0],
                    K1: taken[C1],
                    ANCHOR: taken[TIME],
                    CLOSES: pc.add(taken[TIME], self.horizon),
                    "event_id": taken["event_id"],
                    "message_id": taken["message_id"].cast(pa.string()),
                }
            ),
        )


def _alert(row: dict[str, Any], prev: dict[str, Any], at: int, since: int) -> dict[str, Any]:
    message = prev.get("message_id")
    return {
        "kind": RESEND,
        "entity": _text(row.get("entity")),
        "dedup_key": row["dedup_key"],
        "message_id": _text(row.get("message_id")),
        "send_time": row["send_time"],
        "event_id": row["event_id"],
        "original_send_time": _EPOCH + timedelta(microseconds=at),
        "original_event_id": prev["event_id"],
        "why": (
            f"the same content was accepted {since / 1e6:,.3f} s before (MessageId "
            f"{'none' if message is None else message}): "
            "it reached consumers again"
        ),
    }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
