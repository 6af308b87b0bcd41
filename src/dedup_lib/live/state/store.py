"""The keys the live monitor holds, each with its anchor: the accepted send whose window is
open. Reading, setting and expiring anchors costs what a micro-batch touches, never what the
state holds (docs/rules.md, section 8; the reasons: docs/decisions/live-state.md).

An :class:`~dedup_lib.live.state.index.Index` in memory finds a key's anchor time, the time its
window closes, and its row. The rows themselves (the anchor's event id and content, whatever
their types) lie in **segments**: one Arrow file per micro-batch, holding the anchors that
micro-batch set, sorted by the time their windows close, and read (memory-mapped) only for
the anchors a later micro-batch needs. A segment is removed once every anchor in it has
been replaced or has expired. Expiring walks each segment from the front while windows have
closed, so it costs the anchors that expire.

The segments are the state's record on disk: a monitor restarting after micro-batch N sets
each segment's anchors up to N, in order, then expires them at N's watermark, which gives
the same index as the one it had.
"""

from __future__ import annotations

import heapq
import os
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dedup_lib.live.durable import numbered, read_arrow, remove, write_arrow
from dedup_lib.live.state.index import NONE, Index

#: A segment's own columns, before the caller's: the key's two halves as stored (the
#: micro-batch's :data:`~dedup_lib.columns.K0` and :data:`~dedup_lib.columns.K1`), the
#: anchor's time and the time its window closes (microseconds since the epoch). These strings
#: are the column names in the segment files on disk: a restart reads older checkpoints by them.
STORED_K0, STORED_K1, ANCHOR, CLOSES = "k0", "k1", "anchor", "closes"
OWN = (STORED_K0, STORED_K1, ANCHOR, CLOSES)
_PREFIX, _SUFFIX = "segment-", ".arrow"
#: Segments kept mapped at once.
_MAPPED = 256


def ref_of(batch: int, row: np.ndarray) -> np.ndarray:
    """The reference of rows of micro-batch ``batch``'s segment: batch and row in one int64."""
    return (np.int64(batch) << np.int64(32)) | row.astype(np.int64)


@dataclass
class _Segment:
    """What the state keeps in memory of one segment."""

    batch: int
    path: str
    rows: int
    nbytes: int
    live: int
    #: The first row whose window has not closed yet.
    front: int = 0


@dataclass(frozen=True)
class Found:
    """Each key's anchor as the index has it: ``held`` whether there is one, its ``anchor``
    time, when its window ``closes``, and its ``ref`` (-1 where none)."""

    held: np.ndarray
    anchor: np.ndarray
    closes: np.ndarray
    ref: np.ndarray


class KeyedState:
    """The anchors held in ``folder``; :meth:`restore` opens it as a micro-batch left it."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.index = Index.empty()
        self._segments: dict[int, _Segment] = {}
        self._fronts: list[tuple[int, int]] = []
        self._mapped: OrderedDict[int, pa.Table] = OrderedDict()
        self._dead: list[str] = []

    @classmethod
    def restore(cls, folder: str, upto: int, watermark: int | None) -> KeyedState:
        """The state as micro-batch ``upto`` committed it (-1: none yet), at its watermark;
        segments of later micro-batches (written before a crash, never committed) go."""
        state = cls(folder)
        for batch, path in numbered(folder, _PREFIX, _SUFFIX):
            if batch > upto:
                remove(path)
                continue
            table = read_arrow(path, mapped=True)
            state._track(batch, path, table)
        if watermark is not None:
            state.expire(watermark)
        state.release()
        return state

    @property
    def keys(self) -> int:
        """The keys held."""
        return self.index.count

    @property
    def memory_bytes(self) -> int:
        return self.index.nbytes

    def memory_needed(self, adding: int) -> int:
        """The most memory the index takes while ``adding`` more keys are held."""
        return self.index.needs(adding)

    @property
    def disk_bytes(self) -> int:
        return sum(s.nbytes for s in self._segments.values())

    def find(self, keys: np.ndarray) -> Found:
        """The anchors of ``keys`` (n x 2 int64)."""
        slots = self.index.find(keys)
        held = slots >= 0
        at = np.where(held, slots, 0)
        return Found(
            held=held,
            anchor=np.where(held, self.index.anchor[at], 0),
            closes=np.where(held, self.index.closes[at], 0),
            ref=np.where(held, self.index.ref[at], NONE),
        )

    def rows(self, refs: np.ndarray, schema: pa.Schema) -> pa.Table:
        """The columns of ``schema`` of the anchors at ``refs`` (each held), in the order
        given."""
        refs = np.asarray(refs, dtype=np.int64)
        batches = refs >> 32
        parts, places = [], []
        for batch in np.unique(batches):
            where = np.flatnonzero(batches == batch)
            table = self._table(int(batch)).select(schema.names)
            parts.append(table.take(pa.array(refs[where] & 0xFFFFFFFF)))
            places.append(where)
        if not parts:
            return schema.empty_table()
        order = np.argsort(np.concatenate(places), kind="stable")
        return pa.concat_tables(parts).take(pa.array(order))

    def set_anchors(self, batch: int, anchors: pa.Table) -> None:
        """Make the rows of ``anchors`` (the :data:`OWN` columns, then the caller's; one row
        per key) the anchors of their keys, written as micro-batch ``batch``'s segment."""
        if anchors.num_rows == 0:
            return
        order = np.argsort(anchors[CLOSES].to_numpy(), kind="stable")
        table = anchors.take(pa.array(order))
        path = os.path.join(self.folder, f"{_PREFIX}{batch:010d}{_SUFFIX}")
        write_arrow(path, table)
        # Kept as the file's mapping, not the table built here: the system pages it in and
        # out, where a table of a burst's anchors would stay in the process's memory.
        self._track(batch, path, read_arrow(path, mapped=True))

    def expire(self, watermark: int) -> int:
        """Remove the anchors whose window closed at or before ``watermark``; how many."""
        removed = 0
        while self._fronts and self._fronts[0][0] <= watermark:
            _, batch = heapq.heappop(self._fronts)
            segment = self._segments.get(batch)
            if segment is None:
                continue
            table = self._table(batch)
            closes = table[CLOSES].to_numpy()
            end = int(np.searchsorted(closes, watermark, side="right"))
            rows = np.arange(segment.front, end)
            keys = np.column_stack(
                [table[STORED_K0].to_numpy()[rows], table[STORED_K1].to_numpy()[rows]]
            )
            gone = int(self.index.drop(keys, ref_of(batch, rows)).sum())
            removed += gone
            segment.front = end
            self._lose(segment, gone)
            if segment.live and end < segment.rows:
                heapq.heappush(self._fronts, (int(closes[end]), batch))
        return removed

    def release(self) -> None:
        """Remove the files of segments no anchor is left in: call once the micro-batch that
        emptied them is committed (until then, a restart still reads them)."""
        for path in self._dead:
            remove(path)
        self._dead = []

    def _track(self, batch: int, path: str, table: pa.Table) -> None:
        """Put a segment's anchors into the index, and count what they replaced."""
        keys = np.column_stack([table[STORED_K0].to_numpy(), table[STORED_K1].to_numpy()])
        refs = ref_of(batch, np.arange(table.num_rows))
        replaced = self.index.put(keys, table[ANCHOR].to_numpy(), table[CLOSES].to_numpy(), refs)
        size = os.path.getsize(path)
        self._segments[batch] = _Segment(batch, path, table.num_rows, size, table.num_rows)
        self._mapped[batch] = table
        old = replaced[replaced != NONE] >> 32
        for earlier, count in zip(*np.unique(old, return_counts=True), strict=True):
            self._lose(self._segments[int(earlier)], int(count))
        if table.num_rows:
            heapq.heappush(self._fronts, (int(table[CLOSES][0].as_py()), batch))

    def _lose(self, segment: _Segment, count: int) -> None:
        segment.live -= count
        if segment.live == 0:
            self._dead.append(segment.path)
            del self._segments[segment.batch]
            self._mapped.pop(segment.batch, None)

    def _table(self, batch: int) -> pa.Table:
        table = self._mapped.get(batch)
        if table is None:
            table = read_arrow(self._segments[batch].path, mapped=True)
            self._mapped[batch] = table
        self._mapped.move_to_end(batch)
        while len(self._mapped) > _MAPPED:
            self._mapped.popitem(last=False)
        return table
