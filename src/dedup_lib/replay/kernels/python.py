"""The Python replay kernel: one pass over sends sorted by (entity, key, time), in Arrow batches.

The engine runs it where the JVM kernel (:mod:`dedup_lib.replay.kernels.jvm`, the same pass in
Java) cannot be built or loaded, and always for :func:`count_caches`.

It runs inside Spark's Python workers as a scalar iterator Arrow UDF over the few columns it
needs (what tells the keys apart, time, event id, whether Spark SQL already decided the send),
so the other columns never leave the JVM. A key is told apart by two values of any comparable
type: the key and the entity, or, as the engine passes them, two 64-bit hashes of both. It
depends on pyarrow, numpy and the walk only (the engine ships both to a remote cluster by
value). Its state between batches is one anchor, never a whole key's sends, so a hot key
costs time, not memory.

Per group of sends with one key, every send before the head's window ends is a duplicate of
the head, decided in bulk; only the sends after the first expiry walk the anchor chain one
by one, by the library's one walk (:mod:`dedup_lib.replay.walk`, shipped by value with the
kernel; docs/rules.md, section 1: the window is anchored on the accepted original).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.replay.walk import walk_loop

#: Field names of the struct the kernel returns per send: the original's time and event id for
#: duplicates; the struct is null for sends it accepted or did not judge.
ORIGINAL_FIELDS = ("original_send_time", "original_event_id")


@dataclass(frozen=True)
class Inputs:
    """One batch of the kernel's arguments, in the order the engine passes them."""

    key: pa.Array
    entity: pa.Array
    send_time: pa.Array
    event_id: pa.Array
    decided: pa.Array
    window: pa.Array | None

    @classmethod
    def unpack(cls, arrays: tuple[pa.Array, ...], has_entity: bool, has_window: bool) -> Inputs:
        """``arrays`` is (key, [entity], send_time, event_id, decided, [window]); ``key`` and
        ``entity`` only need to be equal for the sends of one key and differ between keys."""
        values = list(arrays)
        key = values.pop(0)
        entity = values.pop(0) if has_entity else pa.nulls(len(key), pa.string())
        send_time, event_id, decided = values[0], values[1], values[2]
        return cls(key, entity, send_time, event_id, decided, values[3] if has_window else None)


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
    if a.null_count == 0 and b.null_count == 0:
        return np.asarray(eq, dtype=bool)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
    return np.asarray(eq | both_null, dtype=bool)


def _originals(time: pa.Array, event_id: pa.Array) -> pa.StructArray:
    """The answer per send: the struct itself is null where there is no original (every
    original has a time), which Spark stores and reads faster than a struct of two nulls
    (docs/decisions/replay-kernel.md)."""
    return pa.StructArray.from_arrays(
        [time, event_id], names=list(ORIGINAL_FIELDS), mask=pc.is_null(time)
    )


def find_originals(
    batches: Iterator[tuple[pa.Array, ...]],
    window_us: int,
    has_window: bool = False,
) -> Iterator[pa.StructArray]:
    """Per send, its original's time and event id when it is a duplicate, else null.

    Each batch is (key, entity, send_time, event_id, decided, [window]). ``window_us`` is
    the window of every send, unless ``has_window``: then the last argument holds each send's
    window in microseconds (entities with different settings).
    """
    anchor: _Anchor | None = None
    for arrays in batches:
        inputs = Inputs.unpack(arrays, True, has_window)
        time, event_id, anchor = _replay_batch(inputs, window_us, anchor)
        yield _originals(time, event_id)


def _replay_batch(
    x: Inputs, window: int, anchor: _Anchor | None
) -> tuple[pa.Array, pa.Array, _Anchor | None]:
    """One batch of sends in key and time order: each send's original (time, event id, or
    nulls), and the anchor the next batch continues from."""
    n = len(x.key)
    send_time, event_id = x.send_time, x.event_id
    if n == 0:
        return pa.nulls(0, send_time.type), pa.nulls(0, event_id.type), anchor
    eligible = ~np.asarray(pc.fill_null(x.decided, True).to_numpy(zero_copy_only=False), dtype=bool)
    w: int | np.ndarray = window
    if x.window is not None:
        w = pc.fill_null(x.window, 0).to_numpy(zero_copy_only=False)
    t = pc.fill_null(pc.cast(send_time, pa.int64()), 0).to_numpy(zero_copy_only=False)
    same = np.zeros(n, dtype=bool)
    if n > 1:
        same[1:] = (
            _same(x.key.slice(1), x.key.slice(0, n - 1))
            & _same(x.entity.slice(1), x.entity.slice(0, n - 1))
            & eligible[1:]
            & eligible[:-1]
        )
    continues = (
        anchor is not None
        and bool(eligible[0])
        and x.key[0].as_py() == anchor.key
        and x.entity[0].as_py() == anchor.entity
    )
    head_ref, head_t = _group_heads(same, t, anchor if continues else None)
    is_head = eligible & ~same
    if continues:
        is_head[0] = False
    duplicate = eligible & ~is_head & (t < head_t + w)
    orig_ref = np.where(duplicate, head_ref, -1)
    _walk_tails(
        np.flatnonzero(eligible & ~is_head & ~duplicate), head_ref, t, w, duplicate, orig_ref
    )
    next_anchor = _next_anchor(x, t, eligible, duplicate, orig_ref, anchor)
    if not duplicate.any():
        return pa.nulls(n, send_time.type), pa.nulls(n, event_id.type), next_anchor
    indices = pa.array(orig_ref, mask=orig_ref < 0)
    ext_time = _with_anchor(send_time, anchor.send_time if anchor else None)
    ext_id = _with_anchor(event_id, anchor.event_id if anchor else None)
    return pc.take(ext_time, indices), pc.take(ext_id, indices), next_anchor


def _group_heads(
    same: np.ndarray, t: np.ndarray, held: _Anchor | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per send, the reference of its group's first send and that send's time. Reference 0
    is the held anchor (``held``: the batch's first group continues it); reference i + 1 is
    row i of this batch."""
    start = np.maximum.accumulate(np.where(same, 0, np.arange(len(same))))
    head_ref = start + 1
    head_t = t[start]
    if held is not None:
        first_group = start == 0
        head_ref[first_group] = 0
        head_t[first_group] = held.micros
    return head_ref, head_t


def _walk_tails(
    tails: np.ndarray,
    head_ref: np.ndarray,
    t: np.ndarray,
    w: int | np.ndarray,
    duplicate: np.ndarray,
    orig_ref: np.ndarray,
) -> None:
    """The sends past their group's first window (``tails``), walked as keys of their own by
    :func:`~dedup_lib.replay.walk.walk_loop` (a group's first tail opens a window): each opens
    a window or falls in the one open (``duplicate`` and ``orig_ref`` updated in place). As
    Python lists: the loop runs interpreted here, and reads a list faster than an array."""
    if not tails.size:
        return
    group = head_ref[tails]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    accepted, anchor = [False] * len(tails), [-1] * len(tails)
    spans = np.broadcast_to(w, (len(t),))[tails].tolist()
    walk_loop(starts.tolist(), t[tails].tolist(), spans, accepted, [], anchor)
    caught = ~np.array(accepted, dtype=bool)
    duplicate[tails[caught]] = True
    orig_ref[tails[caught]] = tails[np.array(anchor, dtype=np.int64)[caught]] + 1


def _next_anchor(
    x: Inputs,
    t: np.ndarray,
    eligible: np.ndarray,
    duplicate: np.ndarray,
    orig_ref: np.ndarray,
    anchor: _Anchor | None,
) -> _Anchor | None:
    """What the next batch continues from: the last send's key and the window it is in."""
    last = len(t) - 1
    if not eligible[last]:
        return None
    ref = int(orig_ref[last]) if duplicate[last] else last + 1
    entity, key = x.entity[last].as_py(), x.key[last].as_py()
    if ref == 0:
        assert anchor is not None
        return _Anchor(entity, key, anchor.micros, anchor.send_time, anchor.event_id)
    return _Anchor(entity, key, int(t[ref - 1]), x.send_time[ref - 1], x.event_id[ref - 1])


def _with_anchor(values: pa.Array, held: pa.Scalar | None) -> pa.Array:
    head = pa.array([held.as_py() if held is not None else None], values.type)
    return pa.concat_arrays([head, values])


@dataclass
class _IdCache:
    """The last ``capacity`` accepted ids of one entity, each with its send's time and id, in
    the order they were accepted."""

    capacity: int
    held: dict[Any, tuple[int, Any]]
    order: deque[Any]

    def clear(self) -> None:
        self.held.clear()
        self.order.clear()


def count_caches(
    batches: Iterator[tuple[pa.Array, ...]], capacities: Sequence[int], has_entity: bool
) -> Iterator[pa.StructArray]:
    """Judge sends against a cache of the last N accepted ids per entity (as ActiveMQ Artemis
    does), not a time window, for every N in ``capacities`` at once; sends arrive sorted by
    (entity, time).

    Takes what :func:`find_originals` does; returns per send a struct with one field per
    capacity (``c0``, ``c1``, ... in the order given), each what :func:`find_originals`
    answers. A cache holds ids, not sends: memory is N entries whatever the traffic.
    """
    entity: Any = object()
    caches = [_IdCache(capacity, {}, deque()) for capacity in capacities]
    names = [f"c{i}" for i in range(len(caches))]
    for arrays in batches:
        x = Inputs.unpack(arrays, has_entity, has_window=False)
        keys = x.key.to_pylist()
        ents = x.entity.to_pylist()
        decided = pc.fill_null(x.decided, True).to_pylist()
        times = pc.cast(x.send_time, pa.int64()).to_pylist()
        ids = x.event_id.to_pylist()
        found: list[list[Any]] = [[None] * len(keys) for _ in caches]
        # The cache's steps inline: a method call per send and capacity slows the pass.
        walks = [(c.held, c.order, c.capacity, a) for c, a in zip(caches, found, strict=True)]
        for i, key in enumerate(keys):
            if ents[i] != entity:
                entity = ents[i]
                for cache in caches:
                    cache.clear()
            if decided[i]:
                continue
            for held, order, capacity, answers in walks:
                original = held.get(key)
                if original is not None:
                    answers[i] = original
                    continue
                held[key] = (times[i], ids[i])
                order.append(key)
                if len(order) > capacity:
                    del held[order.popleft()]
        yield pa.StructArray.from_arrays(
            [_answers(answers, x.send_time.type, x.event_id.type) for answers in found],
            names=names,
        )


def _answers(found: list[Any], time_type: pa.DataType, id_type: pa.DataType) -> pa.StructArray:
    original_time = [None if f is None else f[0] for f in found]
    original_id = [None if f is None else f[1] for f in found]
    return _originals(
        pa.array(original_time, pa.int64()).cast(time_type), pa.array(original_id, id_type)
    )
