"""An index in memory from keys to their anchors, found and changed in time proportional to
the keys asked for, never to the keys held.

A key is 128 bits (two 64-bit hashes of the entity and the uniqueness key, Spark's
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
    """The table: ``keys`` (slots x 2), ``used``, and per slot ``anchor``, ``closes`` and
    ``ref``; ``count`` keys held. ``probes`` counts the slots every call has looked at,
    so a test can check that the work follows the keys asked for."""

    keys: np.ndarray
    used: np.ndarray
    anchor: np.ndarray
    closes: np.ndarray
    ref: np.ndarray
    count: int = 0
    probes: int = 0

    @classmethod
    def empty(cls, slots: int = INITIAL_SLOTS) -> Index:
        """A table of ``slots`` slots (rounded up to a power of two), none used."""
        size = 1 << max(4, int(slots - 1).bit_length())
        return cls(
            keys=np.zeros((size, 2), dtype=np.int64),
            used=np.zeros(size, dtype=np.bool_),
            anchor=np.zeros(size, dtype=np.int64),
            closes=np.zeros(size, dtype=np.int64),
            ref=np.full(size, NONE, dtype=np.int64),
        )

    @property
    def nbytes(self) -> int:
        """The memory the table takes."""
        arrays = (self.keys, self.used, self.anchor, self.closes, self.ref)
        return sum(a.nbytes for a in arrays)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each key (rows of ``keys``, n x 2 int64), -1 where it is not held."""
        slots = np.empty(len(keys), dtype=np.int64)
        self.probes += int(_kernels()["find"](self.keys, self.used, _rows(keys), slots))
        return slots

    def put(
        self, keys: np.ndarray, anchor: np.ndarray, closes: np.ndarray, ref: np.ndarray
    ) -> np.ndarray:
        """Set each key's anchor (distinct keys); the reference each replaced, -1 for a key
        not held before."""
        self._room(len(keys))
        replaced = np.empty(len(keys), dtype=np.int64)
        added, probes = _kernels()["put"](
            self.keys,
            self.used,
            self.anchor,
            self.closes,
            self.ref,
            _rows(keys),
            _longs(anchor),
            _longs(closes),
            _longs(ref),
            replaced,
        )
        self.count += int(added)
        self.probes += int(probes)
        return replaced

    def drop(self, keys: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Remove each key whose slot still holds the reference given (an anchor set since
        is kept); whether each was removed."""
        removed = np.zeros(len(keys), dtype=np.bool_)
        gone, probes = _kernels()["drop"](
            self.keys,
            self.used,
            self.anchor,
            self.closes,
            self.ref,
            _rows(keys),
            _longs(ref),
            removed,
        )
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
        self.keys, self.used, self.anchor = bigger.keys, bigger.used, bigger.anchor
        self.closes, self.ref = bigger.closes, bigger.ref


def _rows(keys: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(keys, dtype=np.int64).reshape(-1, 2)


def _longs(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


@cache
def compile_in_background() -> threading.Thread:
    """The loops compiled in a thread of their own, once per process: started when a monitor
    starts, so its first micro-batch finds them compiled."""
    thread = threading.Thread(target=_kernels, name="dedup-index-compile", daemon=True)
    thread.start()
    return thread


@cache
def _kernels() -> dict[str, Any]:
    """The table's loops, compiled once per process (numba is imported here: the library's
    other paths do without it)."""
    from numba import njit

    @njit(nogil=True, inline="always")
    def home(k0: int, mask: int) -> int:
        # The keys are hashes already: their low bits spread evenly.
        return k0 & mask

    @njit(nogil=True)
    def find(table: Any, used: Any, keys: Any, out: Any) -> int:
        mask = len(used) - 1
        probes = 0
        for i in range(len(keys)):
            slot = home(keys[i, 0], mask)
            out[i] = -1
            while used[slot]:
                probes += 1
                if table[slot, 0] == keys[i, 0] and table[slot, 1] == keys[i, 1]:
                    out[i] = slot
                    break
                slot = (slot + 1) & mask
        return probes

    @njit(nogil=True)
    def put(
        table: Any,
        used: Any,
        anchor: Any,
        closes: Any,
        ref: Any,
        keys: Any,
        new_anchor: Any,
        new_closes: Any,
        new_ref: Any,
        replaced: Any,
    ) -> Any:
        mask = len(used) - 1
        added = 0
        probes = 0
        for i in range(len(keys)):
            slot = home(keys[i, 0], mask)
            while used[slot] and not (
                table[slot, 0] == keys[i, 0] and table[slot, 1] == keys[i, 1]
            ):
                probes += 1
                slot = (slot + 1) & mask
            probes += 1
            if used[slot]:
                replaced[i] = ref[slot]
            else:
                replaced[i] = -1
                used[slot] = True
                table[slot, 0] = keys[i, 0]
                table[slot, 1] = keys[i, 1]
                added += 1
            anchor[slot] = new_anchor[i]
            closes[slot] = new_closes[i]
            ref[slot] = new_ref[i]
        return added, probes

    @njit(nogil=True)
    def drop(
        table: Any,
        used: Any,
        anchor: Any,
        closes: Any,
        ref: Any,
        keys: Any,
        expected: Any,
        removed: Any,
    ) -> Any:
        mask = len(used) - 1
        gone = 0
        probes = 0
        for i in range(len(keys)):
            slot = home(keys[i, 0], mask)
            while used[slot] and not (
                table[slot, 0] == keys[i, 0] and table[slot, 1] == keys[i, 1]
            ):
                probes += 1
                slot = (slot + 1) & mask
            probes += 1
            if not used[slot] or ref[slot] != expected[i]:
                continue
            removed[i] = True
            gone += 1
            # Backward shift: move later slots of the run into the hole, where their home
            # allows, so that every probe still finds its key before an empty slot.
            hole = slot
            nxt = (hole + 1) & mask
            while used[nxt]:
                probes += 1
                want = home(table[nxt, 0], mask)
                if (nxt - want) & mask >= (nxt - hole) & mask:
                    table[hole, 0] = table[nxt, 0]
                    table[hole, 1] = table[nxt, 1]
                    anchor[hole] = anchor[nxt]
                    closes[hole] = closes[nxt]
                    ref[hole] = ref[nxt]
                    hole = nxt
                nxt = (nxt + 1) & mask
            used[hole] = False
            ref[hole] = -1
        return gone, probes

    return {"find": find, "put": put, "drop": drop}
