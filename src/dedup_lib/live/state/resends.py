"""Resends that reached consumers again, as they happen: a send accepted although the same
content was accepted on its entity shortly before (within a horizon the user chooses). Its
MessageId differed (a retry that made a new one), or the window had closed: the broker could
not catch it.

Each accepted send with content is paired with the copy accepted before it: one of its own
micro-batch, or the last of earlier ones, which a :class:`~dedup_lib.live.state.store.KeyedState`
holds by (entity, content) for the horizon. So the work follows the accepted sends, not the
contents held.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.columns import C0, C1, KEYED_CONTENT, SEND_MICROS
from dedup_lib.live.state.alerts import alert_table
from dedup_lib.live.state.judge import replay_order
from dedup_lib.live.state.store import ANCHOR, CLOSES, STORED_K0, STORED_K1, KeyedState
from dedup_lib.rules.policy import ACCEPTED

RESEND = "resend"
_UTC = pa.timestamp("us", tz="UTC")
#: The columns a resend's alert is made of.
_NEEDED = (C0, C1, SEND_MICROS, "event_id", "message_id", "entity", "dedup_key", "send_time")


def resend_alerts(
    resent: pa.Table,
    original_micros: pa.Array | pa.ChunkedArray,
    original_event_id: pa.Array | pa.ChunkedArray,
    original_message_id: pa.Array | pa.ChunkedArray,
) -> pa.Table:
    """The sends ``resent`` (verdicts' columns, with :data:`~dedup_lib.columns.SEND_MICROS`)
    as resend alerts, each paired with the copy accepted before it: its time (microseconds),
    event id and MessageId.

    Examples
    --------
    >>> sends = pa.table({"entity": ["orders"], "message_id": ["b"], "event_id": [2],
    ...     "send_time": pa.array([90_000_000], pa.timestamp("us", tz="UTC")),
    ...     SEND_MICROS: [90_000_000]})
    >>> found = resend_alerts(sends, pa.array([30_000_000]), pa.array([1]), pa.array(["a"]))
    >>> found["why"][0].as_py()
    'the same content was accepted 60.000 s before (MessageId a): it reached consumers again'
    """
    resent = resent.append_column("original_send_time", pc.cast(original_micros, _UTC))
    resent = resent.append_column("original_event_id", original_event_id)
    seconds = pc.divide(
        pc.subtract(resent[SEND_MICROS], original_micros).cast(pa.float64()), 1e6
    ).to_pylist()
    why = pc.binary_join_element_wise(
        "the same content was accepted ",
        pa.array([f"{s:,.3f}" for s in seconds], pa.string()),
        " s before (MessageId ",
        pc.fill_null(pc.cast(original_message_id, pa.string()), "none"),
        "): it reached consumers again",
        "",
    )
    return alert_table(resent, RESEND, why)


class Resends:
    """The last accepted copy of each content within ``horizon``, kept in ``state``."""

    def __init__(self, state: KeyedState, horizon: timedelta) -> None:
        self.state = state
        self.horizon = horizon // timedelta(microseconds=1)

    def alerts(self, batch: int, answered: pa.Table, watermark: int | None) -> pa.Table:
        """The resends among micro-batch ``batch``'s verdicts, as alerts; each content's
        last copy kept, and those beyond the horizon of ``watermark`` let go."""
        accepted = pc.and_(
            pc.equal(answered["verdict"], ACCEPTED), pc.is_valid(answered[KEYED_CONTENT])
        )
        sends = answered.select([c for c in _NEEDED if c in answered.column_names])
        sends = sends.filter(pc.fill_null(accepted, False))
        order = replay_order(
            sends[C0].to_numpy(),
            sends[C1].to_numpy(),
            sends[SEND_MICROS].to_numpy(),
            sends["event_id"],
        )
        sends = sends.take(pa.array(order))
        found = self._paired(sends)
        if sends.num_rows:
            self._keep(batch, sends)
        if watermark is not None:
            self.state.expire(watermark)
        return found

    def _paired(self, sends: pa.Table) -> pa.Table:
        """Each send whose copy before it (in its micro-batch, else kept) is within the
        horizon, as an alert."""
        keys = np.column_stack([sends[C0].to_numpy(), sends[C1].to_numpy()])
        times = sends[SEND_MICROS].to_numpy()
        first = np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)][: len(keys)]
        held = self.state.find(keys)
        schema = pa.schema([sends.schema.field("event_id"), ("message_id", pa.string())])
        kept = self.state.rows(held.ref[first & held.held], schema)
        before = np.arange(len(keys)) - 1
        earlier = np.where(first, held.anchor, times[np.maximum(before, 0)])
        has = np.where(first, held.held & (held.anchor <= times), True)
        hits = np.flatnonzero(has & (times - earlier <= self.horizon))
        # The copy before: a row of ``sends`` (before it), or a kept one (after them).
        place = np.where(first, len(sends) + np.cumsum(first & held.held) - 1, before)[hits]
        copies = pa.concat_tables([sends.select(schema.names).cast(schema), kept])
        previous = copies.take(pa.array(place))
        return resend_alerts(
            sends.take(pa.array(hits)),
            pa.array(earlier[hits], pa.int64()),
            previous["event_id"],
            previous["message_id"],
        )

    def _keep(self, batch: int, sends: pa.Table) -> None:
        """Each content's last accepted copy, for the micro-batches to come."""
        keys = np.column_stack([sends[C0].to_numpy(), sends[C1].to_numpy()])
        last = np.flatnonzero(np.r_[(keys[1:] != keys[:-1]).any(axis=1), True])
        taken = sends.take(pa.array(last))
        held = self.state.find(keys[last])
        newer = ~held.held | (held.anchor <= taken[SEND_MICROS].to_numpy())
        taken = taken.filter(pa.array(newer))
        anchors = {
            STORED_K0: taken[C0],
            STORED_K1: taken[C1],
            ANCHOR: taken[SEND_MICROS],
            CLOSES: pc.add(taken[SEND_MICROS], self.horizon),
            "event_id": taken["event_id"],
            "message_id": taken["message_id"].cast(pa.string()),
        }
        self.state.set_anchors(batch, pa.table(anchors))
