"""One micro-batch of keyed sends judged in the driver, against the anchors the state holds.

A send is judged once the watermark (the latest send time seen, in whole milliseconds, minus
the lateness) reaches its time: then every send of its key up to the watermark is there, and
the sends of each key go in replay order (time, then ``event_id``, missing ones last), each
against the key's anchor, as :func:`dedup_lib.detect_duplicates` walks them (docs/rules.md,
sections 1 and 8). A send that lands behind the watermark it meets is ``late``: answered at
once, with that watermark, and kept out of the history. Sends decided by the rules alone
(rejected, without MessageId, detection off) are answered at once. The rest wait, as the
pending sends, for a later watermark.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.live.keyed import CONTENT, DECIDED, K0, K1, TIME, WINDOW
from dedup_lib.live.state import ANCHOR, CLOSES
from dedup_lib.live.state import K0 as S0
from dedup_lib.live.state import K1 as S1
from dedup_lib.rules.policy import ACCEPTED, DUPLICATE

if TYPE_CHECKING:
    from dedup_lib.live.state import KeyedState

LATE = "late"
#: The original's content, beside the send's, for the collision alerts (not written).
ORIGINAL_CONTENT = "__dedup_original_content"
_UTC = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Clock:
    """The watermark: the latest send time seen, in whole milliseconds, minus ``lateness``
    (milliseconds); none before the first send."""

    lateness_ms: int
    latest_ms: int | None = None

    @property
    def watermark(self) -> int | None:
        """The watermark in microseconds since the epoch."""
        if self.latest_ms is None:
            return None
        return (self.latest_ms - self.lateness_ms) * 1000

    def advanced(self, micros: np.ndarray) -> Clock:
        """The clock after seeing sends at ``micros``."""
        if not len(micros):
            return self
        latest = int(micros.max()) // 1000
        if self.latest_ms is not None:
            latest = max(latest, self.latest_ms)
        return replace(self, latest_ms=latest)


@dataclass(frozen=True)
class Judged:
    """What one micro-batch answered (the sends' columns and the verdict's, with
    :data:`ORIGINAL_CONTENT` where content is compared), what still waits, and the clock."""

    answered: pa.Table
    pending: pa.Table
    clock: Clock


def judge(
    batch: int,
    sends: pa.Table,
    pending: pa.Table,
    clock: Clock,
    state: KeyedState,
) -> Judged:
    """Judge micro-batch ``batch``: ``sends`` (keyed, :mod:`dedup_lib.live.keyed`) landed
    now, ``pending`` waited from before. The state's anchors are read, set and expired."""
    times = sends[TIME]
    before = clock.watermark
    late = _at_or_before(times, before)
    clock = clock.advanced(times.drop_null().to_numpy())
    decided = pc.fill_null(sends[DECIDED], False)
    if pending.schema != sends.schema:
        pending = pending.cast(sends.schema)
    waiting = pa.concat_tables([pending, sends.filter(pc.invert(pc.or_(late, decided)))])
    due = _at_or_before(waiting[TIME], clock.watermark)
    walked = _walk(batch, waiting.filter(due), state, clock.watermark)
    if clock.watermark is not None:
        state.expire(clock.watermark)
    answered = pa.concat_tables(
        [
            _answered(sends.filter(late), verdict=LATE, missed=before),
            _answered(sends.filter(pc.and_(pc.invert(late), decided))),
            walked,
        ]
    )
    return Judged(answered, waiting.filter(pc.invert(due)), clock)


def _at_or_before(times: pa.ChunkedArray, watermark: int | None) -> pa.ChunkedArray:
    """Whether each time is at or before ``watermark`` (never, before there is one)."""
    if watermark is None:
        return pa.chunked_array([pa.array(np.zeros(len(times), dtype=np.bool_))])
    return pc.fill_null(pc.less_equal(times, watermark), False)


def _walk(batch: int, due: pa.Table, state: KeyedState, watermark: int | None) -> pa.Table:
    """The due sends in replay order, each accepted or a duplicate of its key's anchor; the
    keys' last anchors set in the state."""
    # Missing event ids sort last (Arrow's default), as the batch replay orders them.
    by = [(K0, "ascending"), (K1, "ascending"), (TIME, "ascending"), ("event_id", "ascending")]
    order = pc.sort_indices(due, sort_keys=by)
    due = due.take(order)
    keys = np.column_stack([due[K0].to_numpy(), due[K1].to_numpy()])
    times, windows = due[TIME].to_numpy(), due[WINDOW].to_numpy()
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)][: len(keys)])
    found = state.find(keys[starts])
    accepted = np.zeros(len(due), dtype=np.bool_)
    anchor = np.full(len(due), -1, dtype=np.int64)
    _walk_kernel()(starts, found.held, found.closes, times, windows, accepted, anchor)
    key_of = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(due)]))
    stored = ~accepted & (anchor < 0)
    held = state.rows(found.ref[key_of[stored]], _payload_schema(due))
    original = _originals(due, anchor, stored, held)
    original_time = np.where(stored, found.anchor[key_of], times[np.maximum(anchor, 0)])
    has_original = ~accepted
    answered = _answered(
        due,
        verdict=pa.array(np.where(accepted, ACCEPTED, DUPLICATE)),
        original_time=pa.array(original_time, pa.int64(), mask=~has_original),
        original=original,
    )
    _set_anchors(batch, due, accepted, starts, state, watermark)
    return answered


def _payload_schema(due: pa.Table) -> pa.Schema:
    """What the state keeps of an anchor beyond its times: event id and content."""
    names = ["event_id", *([CONTENT] if CONTENT in due.column_names else [])]
    return pa.schema([due.schema.field(n) for n in names])


def _originals(
    due: pa.Table, anchor: np.ndarray, stored: np.ndarray, held: pa.Table
) -> dict[str, pa.Array]:
    """Each duplicate's original's event id and content: a send of this micro-batch (its
    row in ``due``) or an anchor of the state (its row in ``held``)."""
    place = np.full(len(due), -1, dtype=np.int64)
    place[anchor >= 0] = anchor[anchor >= 0]
    place[stored] = len(due) + np.arange(int(stored.sum()))
    index = pa.array(place, mask=place < 0)
    return {
        name: pa.concat_arrays(
            [due[name].combine_chunks(), held[name].combine_chunks().cast(due[name].type)]
        ).take(index)
        for name in held.column_names
    }


def _set_anchors(
    batch: int,
    due: pa.Table,
    accepted: np.ndarray,
    starts: np.ndarray,
    state: KeyedState,
    watermark: int | None,
) -> None:
    """Each key's last accepted send becomes its anchor, unless its window has closed by
    the watermark already (the state would only expire it)."""
    ends = np.r_[starts[1:], len(due)] - 1
    rows = np.flatnonzero(accepted)
    last = rows[np.searchsorted(rows, ends, side="right") - 1] if len(rows) else rows
    last = last[(last >= starts) & (last <= ends)] if len(rows) else last
    times = due[TIME].to_numpy()[last]
    closes = times + due[WINDOW].to_numpy()[last]
    if watermark is not None:
        last, times, closes = (a[closes > watermark] for a in (last, times, closes))
    taken = due.take(pa.array(last))
    columns = {
        S0: taken[K0],
        S1: taken[K1],
        ANCHOR: pa.array(times, pa.int64()),
        CLOSES: pa.array(closes, pa.int64()),
        **{name: taken[name] for name in _payload_schema(due).names},
    }
    state.set_anchors(batch, pa.table(columns))


def _answered(
    sends: pa.Table,
    verdict: str | pa.Array | None = None,
    missed: int | None = None,
    original_time: pa.Array | None = None,
    original: dict[str, pa.Array] | None = None,
) -> pa.Table:
    """``sends`` with the verdict's columns: ``verdict`` (given, else the rules'),
    ``original_send_time``, ``original_event_id``, ``missed_watermark``."""
    rows = sends.num_rows
    table = sends
    if verdict is not None:
        given = pa.array([verdict] * rows, pa.string()) if isinstance(verdict, str) else verdict
        table = table.set_column(table.schema.get_field_index("verdict"), "verdict", given)
    original = original or {}
    none_time = pa.nulls(rows, pa.int64())
    times = none_time if original_time is None else original_time
    table = table.append_column("original_send_time", times.cast(_UTC))
    event_id = sends.schema.field("event_id").type
    table = table.append_column(
        "original_event_id", original.get("event_id", pa.nulls(rows, event_id))
    )
    missed_at = pa.array([missed] * rows, pa.int64()) if missed is not None else none_time
    table = table.append_column("missed_watermark", missed_at.cast(_UTC))
    if CONTENT in sends.column_names:
        table = table.append_column(
            ORIGINAL_CONTENT,
            original.get(CONTENT, pa.nulls(rows, sends.schema.field(CONTENT).type)),
        )
    return table


@cache
def compile_in_background() -> threading.Thread:
    """The walk compiled in a thread of its own, once per process: started when a monitor
    starts, so its first micro-batch finds it compiled."""
    thread = threading.Thread(target=_walk_kernel, name="dedup-walk-compile", daemon=True)
    thread.start()
    return thread


@cache
def _walk_kernel() -> Any:
    """The walk of each key's due sends, compiled by numba once per process."""
    from numba import njit

    @njit(nogil=True)
    def walk(
        starts: Any, held: Any, closes: Any, times: Any, windows: Any, accepted: Any, anchor: Any
    ) -> None:
        rows = len(times)
        for key in range(len(starts)):
            stop = starts[key + 1] if key + 1 < len(starts) else rows
            first = not held[key]
            end = closes[key]
            current = -1
            for row in range(starts[key], stop):
                if first or times[row] >= end:
                    accepted[row] = True
                    end = times[row] + windows[row]
                    current = row
                    first = False
                else:
                    anchor[row] = current

    return walk
