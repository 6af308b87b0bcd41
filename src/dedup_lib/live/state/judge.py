"""One micro-batch of keyed sends judged in the driver, against the anchors the state holds.

A send is judged once the watermark (the latest send time seen, in whole milliseconds, minus
the lateness) reaches its time: then every send of its key up to the watermark is there, and
the sends of each key go in replay order (time, then ``event_id``, missing ones last), each
against the key's anchor, as :func:`dedup_lib.detect_duplicates` walks them (docs/rules.md,
sections 1 and 8). A send that lands behind the watermark it meets is ``late``: answered at
once, with that watermark, and kept out of the history. Sends decided by the rules alone
(rejected, without MessageId, detection off) are answered at once. The rest wait, as the
pending sends, for a later watermark.

The walk reads only the columns it needs, in the order it sorts them; the sends' other
columns are taken once, into the answered rows and the pending ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.columns import DECIDED, K0, K1, KEYED_CONTENT, ORIGINAL_CONTENT, SEND_MICROS, WINDOW
from dedup_lib.live.state.store import ANCHOR, CLOSES, STORED_K0, STORED_K1
from dedup_lib.replay.walk import NO_ANCHOR, walk_keys
from dedup_lib.rules.policy import ACCEPTED, DUPLICATE

if TYPE_CHECKING:
    from dedup_lib.live.state.store import KeyedState

LATE = "late"
_UTC = pa.timestamp("us", tz="UTC")
#: What a send's verdict is, as a small number while the walk runs.
_RULES, _LATE, _ACCEPTED, _DUPLICATE = 0, 1, 2, 3


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
    """Judge micro-batch ``batch``: ``sends`` (keyed, :mod:`dedup_lib.live.intake.keyed`) landed
    now, ``pending`` waited from before. The state's anchors are read, set and expired."""
    if pending.schema != sends.schema:
        pending = pending.cast(sends.schema)
    rows = pa.concat_tables([pending, sends])
    landed = np.r_[np.zeros(pending.num_rows, np.bool_), np.ones(sends.num_rows, np.bool_)]
    times = _longs(rows[SEND_MICROS])
    known = ~_nulls(rows[SEND_MICROS])
    before = clock.watermark
    late = landed & known & (times <= before) if before is not None else np.zeros_like(landed)
    clock = clock.advanced(times[landed & known])
    decided = _flags(rows[DECIDED])
    due = ~late & ~decided & known
    due &= times <= clock.watermark if clock.watermark is not None else False
    code = np.where(late, _LATE, _RULES)
    walked = _walk(batch, rows, np.flatnonzero(due), state, clock.watermark)
    code[walked.rows] = walked.code
    if clock.watermark is not None:
        state.expire(clock.watermark)
    answer = late | (landed & decided) | due
    answered = _answered(rows, answer, code, walked, before)
    return Judged(answered, rows.filter(pa.array(~answer & ~late & ~decided)), clock)


@dataclass(frozen=True)
class _Walked:
    """The due sends' answers: their ``rows``, their verdict ``code``, and each duplicate's
    original: a row of the micro-batch (``local``, -1 if none) or an anchor of the state
    (``stored``: the anchor's row in ``held``), with its time."""

    rows: np.ndarray
    code: np.ndarray
    local: np.ndarray
    stored: np.ndarray
    original_time: np.ndarray
    held: pa.Table


def _walk(
    batch: int, rows: pa.Table, due: np.ndarray, state: KeyedState, watermark: int | None
) -> _Walked:
    """The due sends in replay order, each accepted or a duplicate of its key's anchor; the
    keys' last anchors set in the state."""
    k0, k1 = _longs(rows[K0])[due], _longs(rows[K1])[due]
    times, windows = _longs(rows[SEND_MICROS])[due], _longs(rows[WINDOW])[due]
    order = replay_order(k0, k1, times, rows["event_id"].take(pa.array(due)))
    k0, k1, times, windows, due = k0[order], k1[order], times[order], windows[order], due[order]
    keys = np.column_stack([k0, k1])
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)][: len(keys)])
    found = state.find(keys[starts])
    accepted = np.zeros(len(due), dtype=np.bool_)
    anchor = np.full(len(due), -1, dtype=np.int64)
    closes = np.where(found.held, found.closes, NO_ANCHOR)
    walk_keys(starts, times, windows, accepted, closes=closes, anchor=anchor)
    key_of = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(due)]))
    stored = ~accepted & (anchor < 0)
    held = state.rows(found.ref[key_of[stored]], _payload_schema(rows))
    original_time = np.where(stored, found.anchor[key_of], times[np.maximum(anchor, 0)])
    local = np.where(anchor >= 0, due[np.maximum(anchor, 0)], -1)
    place = np.full(len(due), -1, dtype=np.int64)
    place[stored] = np.arange(int(stored.sum()))
    _set_anchors(batch, rows, due, accepted, starts, state, watermark)
    code = np.where(accepted, _ACCEPTED, _DUPLICATE)
    return _Walked(due, code, local, place, original_time, held)


def replay_order(
    k0: np.ndarray, k1: np.ndarray, times: np.ndarray, event_ids: pa.ChunkedArray | pa.Array
) -> np.ndarray:
    """The order of sends by key, then time, then event id (missing ones last), as the
    batch replay walks them."""
    # Most keys are sent once: sorted by the key's first half alone, only the runs of one
    # first half (one key sent again, or two keys that share it) are sorted on.
    order = np.argsort(k0, kind="stable")
    if len(order) < 2:
        return order
    first = k0[order]
    repeated = first[1:] == first[:-1]
    in_run = np.r_[False, repeated] | np.r_[repeated, False]
    rows = order[in_run]
    by: tuple[np.ndarray, ...]
    if pa.types.is_integer(event_ids.type):
        ids = event_ids.take(pa.array(rows))
        by = (_longs(ids), _nulls(ids), times[rows], k1[rows], k0[rows])
    else:
        ranks = pc.rank(event_ids, sort_keys="ascending").to_numpy()  # missing ids last
        by = (ranks[rows], times[rows], k1[rows], k0[rows])
    order[in_run] = rows[np.lexsort(by)]
    return order


def _payload_schema(rows: pa.Table) -> pa.Schema:
    """What the state keeps of an anchor beyond its times: event id and content."""
    names = ["event_id", *([KEYED_CONTENT] if KEYED_CONTENT in rows.column_names else [])]
    return pa.schema([rows.schema.field(n) for n in names])


def _set_anchors(
    batch: int,
    rows: pa.Table,
    due: np.ndarray,
    accepted: np.ndarray,
    starts: np.ndarray,
    state: KeyedState,
    watermark: int | None,
) -> None:
    """Each key's last accepted send (``due`` in walk order) becomes its anchor, unless its
    window has closed by the watermark already (the state would only expire it)."""
    ends = np.r_[starts[1:], len(due)] - 1
    walked = np.flatnonzero(accepted)
    at = np.searchsorted(walked, ends, side="right") - 1
    last = walked[np.maximum(at, 0)] if len(walked) else np.zeros(0, dtype=np.int64)
    last = last[(at >= 0) & (last >= starts)] if len(walked) else last
    taken = due[last]
    times = _longs(rows[SEND_MICROS])[taken]
    closes = times + _longs(rows[WINDOW])[taken]
    if watermark is not None:
        taken, times, closes = (a[closes > watermark] for a in (taken, times, closes))
    index = pa.array(taken)
    columns = {
        STORED_K0: rows[K0].take(index),
        STORED_K1: rows[K1].take(index),
        ANCHOR: pa.array(times, pa.int64()),
        CLOSES: pa.array(closes, pa.int64()),
        **{name: rows[name].take(index) for name in _payload_schema(rows).names},
    }
    state.set_anchors(batch, pa.table(columns))


def _answered(
    rows: pa.Table, answer: np.ndarray, code: np.ndarray, walked: _Walked, missed: int | None
) -> pa.Table:
    """The answered rows with the verdict's columns: ``verdict`` (the walk's, ``late``, else
    the rules'), ``original_send_time``, ``original_event_id``, ``missed_watermark``."""
    picked = np.flatnonzero(answer)
    table = rows.take(pa.array(picked))
    codes = code[picked]
    names = np.array([None, LATE, ACCEPTED, DUPLICATE], dtype=object)
    rules = table["verdict"].combine_chunks()
    verdict = pc.if_else(pa.array(codes == _RULES), rules, pa.array(names[codes], pa.string()))
    table = table.set_column(table.schema.get_field_index("verdict"), "verdict", verdict)
    position = np.full(len(rows), -1, dtype=np.int64)
    position[picked] = np.arange(len(picked))
    at = position[walked.rows]
    time = np.zeros(len(picked), dtype=np.int64)
    time[at] = walked.original_time
    has = np.zeros(len(picked), dtype=np.bool_)
    has[at] = walked.code == _DUPLICATE
    table = table.append_column(
        "original_send_time", pa.array(time, pa.int64(), mask=~has).cast(_UTC)
    )
    for name, target in (("event_id", "original_event_id"), (KEYED_CONTENT, ORIGINAL_CONTENT)):
        if name in rows.column_names:
            table = table.append_column(target, _originals(rows, name, walked, at, len(picked)))
    late = codes == _LATE
    watermark = pa.array(np.full(len(picked), missed or 0, dtype=np.int64), mask=~late)
    return table.append_column("missed_watermark", watermark.cast(_UTC))


def _originals(rows: pa.Table, name: str, walked: _Walked, at: np.ndarray, size: int) -> pa.Array:
    """Each answered row's original's ``name``: from a row of the micro-batch, or from the
    state's anchor; null where there is none."""
    source = pa.concat_arrays(
        [rows[name].combine_chunks(), walked.held[name].combine_chunks().cast(rows[name].type)]
    )
    place = np.full(size, -1, dtype=np.int64)
    place[at] = np.where(walked.stored >= 0, len(rows) + walked.stored, walked.local)
    place[at[walked.code != _DUPLICATE]] = -1
    return source.take(pa.array(place, mask=place < 0))


def _longs(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(values, 0).to_numpy(), dtype=np.int64)


def _nulls(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.is_null(values).to_numpy(zero_copy_only=False), dtype=np.bool_)


def _flags(values: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), np.bool_)
