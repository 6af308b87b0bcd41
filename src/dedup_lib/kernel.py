"""The replay kernel: one pass over sends sorted by (entity, key, time), in Arrow batches.

It runs inside Spark's Python workers through ``mapInArrow``, so it depends on pyarrow and
numpy only (the engine ships it to a remote cluster by value). Its state between batches is
one anchor, never a whole key's sends, so a hot key costs time, not memory.

Per group of sends with one key, every send before the head's window ends is a duplicate of
the head, decided in bulk; only the sends after the first expiry walk the anchor chain one
by one (SPEC section 1: the window is anchored on the accepted original).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

VERDICT_CODES = pa.array(["accepted", "duplicate"], pa.string())


@dataclass(frozen=True)
class Columns:
    """Where the kernel finds its inputs, by name."""

    key: str
    send_time: str
    event_id: str
    verdict: str
    entity: str | None
    #: Per-row window in microseconds, when entities differ; else the pass's single window.
    window: str | None = None


@dataclass
class _Anchor:
    entity: Any
    key: Any
    micros: int
    send_time: Any
    event_id: Any


def _same(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Element-wise equality where two nulls are equal."""
    eq = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
    return np.asarray(eq | both_null, dtype=bool)


def replay_batches(
    batches: Iterator[pa.RecordBatch], window_micros: int, cols: Columns
) -> Iterator[pa.RecordBatch]:
    """Fill ``verdict`` where it is null and add the original's time and id, batch by batch."""
    carry: _Anchor | None = None
    for batch in batches:
        out, carry = _replay_batch(batch, window_micros, cols, carry)
        yield out


def _replay_batch(
    batch: pa.RecordBatch, window: int, cols: Columns, carry: _Anchor | None
) -> tuple[pa.RecordBatch, _Anchor | None]:
    n = batch.num_rows
    key = batch.column(cols.key)
    ent = batch.column(cols.entity) if cols.entity else pa.nulls(n, pa.string())
    send_time = batch.column(cols.send_time)
    event_id = batch.column(cols.event_id)
    verdict_in = batch.column(cols.verdict)
    if n == 0:
        return _assemble(batch, verdict_in, send_time, event_id, cols), carry

    eligible = pc.is_null(verdict_in).to_numpy(zero_copy_only=False).astype(bool)
    w: int | np.ndarray = window
    if cols.window is not None:
        w = pc.fill_null(batch.column(cols.window), 0).to_numpy(zero_copy_only=False)
    t = pc.fill_null(pc.cast(send_time, pa.int64()), 0).to_numpy(zero_copy_only=False)
    same = np.zeros(n, dtype=bool)
    if n > 1:
        same[1:] = (
            _same(key.slice(1), key.slice(0, n - 1))
            & _same(ent.slice(1), ent.slice(0, n - 1))
            & eligible[1:]
            & eligible[:-1]
        )
    continues = (
        carry is not None
        and bool(eligible[0])
        and key[0].as_py() == carry.key
        and ent[0].as_py() == carry.entity
    )

    # Reference 0 is the carried anchor; reference i + 1 is row i of this batch.
    arange = np.arange(n)
    start = np.maximum.accumulate(np.where(same, 0, arange))
    head_ref = start + 1
    head_t = t[start]
    if continues:
        assert carry is not None
        first_group = start == 0
        head_ref[first_group] = 0
        head_t[first_group] = carry.micros
    is_head = eligible & ~same
    if continues:
        is_head[0] = False

    duplicate = eligible & ~is_head & (t < head_t + w)
    orig_ref = np.where(duplicate, head_ref, -1)
    tails = np.flatnonzero(eligible & ~is_head & ~duplicate)
    if tails.size:
        group_of = head_ref[tails].tolist()
        times = t[tails].tolist()
        rows = tails.tolist()
        spans = np.broadcast_to(w, (n,))[tails].tolist()
        current_group, anchor_ref, anchor_t = -1, -1, 0
        for i, g, ti, span in zip(rows, group_of, times, spans, strict=True):
            if g != current_group or ti >= anchor_t + span:
                current_group, anchor_ref, anchor_t = g, i + 1, ti
            else:
                duplicate[i] = True
                orig_ref[i] = anchor_ref

    last = n - 1
    if eligible[last]:
        ref = int(orig_ref[last]) if duplicate[last] else last + 1
        if ref == 0:
            assert carry is not None
            new_carry: _Anchor | None = _Anchor(
                ent[last].as_py(),
                key[last].as_py(),
                carry.micros,
                carry.send_time,
                carry.event_id,
            )
        else:
            new_carry = _Anchor(
                ent[last].as_py(),
                key[last].as_py(),
                int(t[ref - 1]),
                send_time[ref - 1],
                event_id[ref - 1],
            )
    else:
        new_carry = None

    verdict = pc.if_else(
        pa.array(eligible), pc.take(VERDICT_CODES, pa.array(duplicate.astype(np.int8))), verdict_in
    )
    indices = pa.array(orig_ref, mask=orig_ref < 0)
    ext_time = _with_carry(send_time, carry.send_time if carry else None)
    ext_id = _with_carry(event_id, carry.event_id if carry else None)
    return (
        _assemble(batch, verdict, pc.take(ext_time, indices), pc.take(ext_id, indices), cols),
        new_carry,
    )


def _with_carry(values: pa.Array, carried: pa.Scalar | None) -> pa.Array:
    head = pa.array([carried.as_py() if carried is not None else None], values.type)
    return pa.concat_arrays([head, values])


def _assemble(
    batch: pa.RecordBatch,
    verdict: pa.Array,
    original_time: pa.Array,
    original_id: pa.Array,
    cols: Columns,
) -> pa.RecordBatch:
    arrays = [
        verdict if name == cols.verdict else batch.column(name) for name in batch.schema.names
    ]
    return pa.RecordBatch.from_arrays(
        [*arrays, original_time, original_id],
        names=[*batch.schema.names, "original_send_time", "original_event_id"],
    )


def count_cache_batches(
    batches: Iterator[pa.RecordBatch], capacity: int, cols: Columns
) -> Iterator[pa.RecordBatch]:
    """Judge sends against a cache of the last ``capacity`` accepted ids per entity (as
    ActiveMQ Artemis does), not a time window; sends arrive sorted by (entity, time).

    The cache holds ids, not sends: memory is ``capacity`` entries whatever the traffic.
    """
    entity: Any = object()
    held: dict[Any, tuple[int, Any]] = {}
    order: deque[Any] = deque()
    for batch in batches:
        n = batch.num_rows
        keys = batch.column(cols.key).to_pylist()
        ents = batch.column(cols.entity).to_pylist() if cols.entity else [None] * n
        eligible = pc.is_null(batch.column(cols.verdict)).to_numpy(zero_copy_only=False)
        send_time = batch.column(cols.send_time)
        times = pc.cast(send_time, pa.int64()).to_pylist()
        ids = batch.column(cols.event_id).to_pylist()
        duplicate = np.zeros(n, dtype=bool)
        original_time: list[Any] = [None] * n
        original_id: list[Any] = [None] * n
        for i in range(n):
            if ents[i] != entity:
                entity = ents[i]
                held.clear()
                order.clear()
            if not eligible[i]:
                continue
            key = keys[i]
            if key in held:
                duplicate[i] = True
                original_time[i], original_id[i] = held[key]
                continue
            held[key] = (times[i], ids[i])
            order.append(key)
            if len(order) > capacity:
                del held[order.popleft()]
        verdict = pc.if_else(
            pa.array(eligible),
            pc.take(VERDICT_CODES, pa.array(duplicate.astype(np.int8))),
            batch.column(cols.verdict),
        )
        yield _assemble(
            batch,
            verdict,
            pa.array(original_time, pa.int64()).cast(send_time.type),
            pa.array(original_id, batch.column(cols.event_id).type),
            cols,
        )
