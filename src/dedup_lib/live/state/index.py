"""An index in memory from keys to their anchors, found and changed in time proportional to
the keys asked for, never to the keys held.

A key is 128 bits (two 64-bit hashes of the entity and the dedup key, Spark's
``xxhash64`` with two seeds): two distinct keys share one with a chance of about 10^-20 among
a billion keys. Each slot holds the key, its anchor's time, the time its window closes and
where the anchor's row lies (a reference the caller chooses). Open addressing with linear
probing and backward-shift deletion (no tombstones, so a probe never walks past deleted
slots); the table doubles when two thirds full. The loops are compiled by numba on first use
(:func:`compile_in_background` starts that early), and hold no lock on Python objects.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

#: Slots in a new table (a power of two), and the share of them that may be used.
INITIAL_SLOTS = 1 << 16
LOAD = 2 / 3
#: A reference that is none: a key not found.
NONE = -1


@dataclass
class Index:
    """The table: ``keys`` (slots x 2), ``used``, and per slot its ``values``: the anchor's
    time, the time its window closes and its reference (slots x 3); ``count`` keys held.
    ``probes`` counts the slots every call has looked at, so a test can check that the work
    follows the keys asked for."""

    keys: np.ndarray
    used: np.ndarray
    values: np.ndarray
    count: int = 0
    probes: int = 0

    @classmethod
    def empty(cls, slots: int = INITIAL_SLOTS) -> Index:
        """A table of ``slots`` slots (rounded up to a power of two), none used."""
        size = 1 << max(4, int(slots - 1).bit_length())
        values = np.zeros((size, 3), dtype=np.int64)
        values[:, 2] = NONE
        return cls(np.zeros((size, 2), dtype=np.int64), np.zeros(size, dtype=np.bool_), values)

    @property
    def anchor(self) -> np.ndarray:
        return self.values[:, 0]

    @property
    def closes(self) -> np.ndarray:
        return self.values[:, 1]

    @property
    def ref(self) -> np.ndarray:
        return self.values[:, 2]

    @property
    def nbytes(self) -> int:
        """The memory the table takes."""
        return self.keys.nbytes + self.used.nbytes + self.values.nbytes

    def needs(self, adding: int) -> int:
        """The most memory the table takes while ``adding`` more keys are put: when they make
        it double, the old table and the new one, side by side."""
        size = len(self.used)
        while self.count + adding > size * LOAD:
            size *= 2
        if size == len(self.used):
            return self.nbytes
        return self.nbytes + self.nbytes // len(self.used) * size

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each key (rows of ``keys``, n x 2 int64), -1 where it is not held."""
        slots = np.empty(len(keys), dtype=np.int64)
        self.probes += int(_find()(self.keys, self.used, _rows(keys), slots))
        return slots

    def put(
        self, keys: np.ndarray, anchor: np.ndarray, closes: np.ndarray, ref: np.ndarray
    ) -> np.ndarray:
        """Set each key's anchor (distinct keys); the reference each replaced, -1 for a key
        not held before."""
        self._room(len(keys))
        replaced = np.empty(len(keys), dtype=np.int64)
        new = np.column_stack([anchor, closes, ref]).astype(np.int64, copy=False)
        added, probes = _put()(self.keys, self.used, self.values, _rows(keys), new, replaced)
        self.count += int(added)
        self.probes += int(probes)
        return replaced

    def drop(self, keys: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Remove each key whose slot still holds the reference given (an anchor set since
        is kept); whether each was removed."""
        removed = np.zeros(len(keys), dtype=np.bool_)
        expected = np.ascontiguousarray(ref, dtype=np.int64)
        gone, probes = _drop()(self.keys, self.used, self.values, _rows(keys), expected, removed)
        self.count -= int(gone)
        self.probes += int(probes)
        return removed

    def _room(self, adding: int) -> None:
        """Double the table until ``adding`` more keys fit under :data:`LOAD`."""
        size = len(self.used)
        while self.count + adding > size * LOAD:
            size *= 2
        if size == len(self.used):
            return
        bigger = Index.empty(size)
        held = np.flatnonzero(self.used)
        bigger.put(self.keys[held], self.anchor[held], self.closes[held], self.ref[held])
        self.keys, self.used, self.values = bigger.keys, bigger.used, bigger.values


def _rows(keys: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(keys, dtype=np.int64).reshape(-1, 2)


@cache
def compile_in_background() -> threading.Thread:
    """The loops compiled in a thread of their own, once per process: started when a monitor
    starts, so its first micro-batch finds them compiled (about 1.5 s of compiling)."""
    thread = threading.Thread(target=_compile, name="dedup-index-compile", daemon=True)
    thread.start()
    return thread


def _compile() -> None:
    """Each loop run once on a small table of its own: numba compiles at a loop's first call,
    for the arrays' types, which are the ones every table passes (contiguous int64 and bool)."""
    index = Index.empty(16)
    keys, refs = np.arange(4, dtype=np.int64).reshape(-1, 2), np.arange(2, dtype=np.int64)
    index.put(keys, refs, refs, refs)
    index.find(keys)
    index.drop(keys, refs)


@cache
def _slot() -> Any:
    """Where a key is, or the empty slot where it would go; and the slots looked at."""
    from numba import njit

    @njit(nogil=True, inline="always")
    def slot(table: Any, used: Any, k0: int, k1: int) -> Any:
        mask = len(used) - 1
        at = k0 & mask  # the keys are hashes already: their low bits spread evenly
        probes = 1
        while used[at] and not (table[at, 0] == k0 and table[at, 1] == k1):
            probes += 1
            at = (at + 1) & mask
        return at, probes

    return slot


@cache
def _find() -> Any:
    from numba import njit

    slot = _slot()

    @njit(nogil=True)
    def find(table: Any, used: Any, keys: Any, out: Any) -> int:
        probes = 0
        for i in range(len(keys)):
            at, looked = slot(table, used, keys[i, 0], keys[i, 1])
            out[i] = at if used[at] else -1
            probes += looked
        return probes

    return find


@cache
def _put() -> Any:
    from numba import njit

    slot = _slot()

    @njit(nogil=True)
    def put(table: Any, used: Any, values: Any, keys: Any, new: Any, replaced: Any) -> Any:
        # values: the slots' anchor, closes and ref (slots x 3); new: the keys' (keys x 3).
        added = probes = 0
        for i in range(len(keys)):
            at, looked = slot(table, used, keys[i, 0], keys[i, 1])
            probes += looked
            replaced[i] = values[at, 2] if used[at] else -1
            if not used[at]:
                used[at] = True
                table[at, 0], table[at, 1] = keys[i, 0], keys[i, 1]
                added += 1
            for v in range(3):
                values[at, v] = new[i, v]
        return added, probes

    return put


@cache
def _drop() -> Any:
    from numba import njit

    slot = _slot()

    @njit(nogil=True)
    def drop(table: Any, used: Any, values: Any, keys: Any, expected: Any, removed: Any) -> Any:
        mask = len(used) - 1
        gone = probes = 0
        for i in range(len(keys)):
            hole, looked = slot(table, used, keys[i, 0], keys[i, 1])
            probes += looked
            if not used[hole] or values[hole, 2] != expected[i]:
                continue
            removed[i] = True
            gone += 1
            # Backward shift: later slots of the run move into the hole where their home
            # allows, so that every probe still meets its key before an empty slot.
            nxt = (hole + 1) & mask
            while used[nxt]:
                probes += 1
                if (nxt - (table[nxt, 0] & mask)) & mask >= (nxt - hole) & mask:
                    table[hole, 0], table[hole, 1] = table[nxt, 0], table[nxt, 1]
                    for v in range(3):
                        values[hole, v] = values[nxt, v]
                    hole = nxt
                nxt = (nxt + 1) & mask
            used[hole] = False
            values[hole, 2] = -1
        return gone, probes

    return drop
