"""An index in memory from keys to their anchors, found and changed in time proportional to
the keys asked for, never to the keys held.

A key is 128 bits (two 64-bit hashes of the entity and the dedup key, Spark's
``xxhash64`` with two seeds): two distinct keys share one with a chance of about 10^-20 among
a billion keys. Each slot holds the key, its anchor's time, the time its window closes and
where the anchor's row lies (a reference the caller chooses). Open addressing with linear
probing and backward-shift deletion (no tombstones, so a probe never walks past deleted
slots); the table doubles when two thirds full. The loops are numba's
(:mod:`~dedup_lib.live.state.loops`), compiled on first use or loaded from numba's cache
(:func:`compile_in_background` starts that early), and hold no lock on Python objects.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from types import ModuleType

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
        self.probes += int(_loops().find(self.keys, self.used, _rows(keys), slots))
        return slots

    def put(
        self, keys: np.ndarray, anchor: np.ndarray, closes: np.ndarray, ref: np.ndarray
    ) -> np.ndarray:
        """Set each key's anchor (distinct keys); the reference each replaced, -1 for a key
        not held before."""
        self._room(len(keys))
        replaced = np.empty(len(keys), dtype=np.int64)
        new = np.column_stack([anchor, closes, ref]).astype(np.int64, copy=False)
        added, probes = _loops().put(self.keys, self.used, self.values, _rows(keys), new, replaced)
        self.count += int(added)
        self.probes += int(probes)
        return replaced

    def drop(self, keys: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Remove each key whose slot still holds the reference given (an anchor set since
        is kept); whether each was removed."""
        removed = np.zeros(len(keys), dtype=np.bool_)
        expected = np.ascontiguousarray(ref, dtype=np.int64)
        gone, probes = _loops().drop(
            self.keys, self.used, self.values, _rows(keys), expected, removed
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
        self.keys, self.used, self.values = bigger.keys, bigger.used, bigger.values


def _rows(keys: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(keys, dtype=np.int64).reshape(-1, 2)


@cache
def compile_in_background() -> threading.Thread:
    """The loops compiled (or loaded from numba's cache) in a thread of their own, once per
    process: started when a monitor starts, so its first micro-batch finds them ready (about
    1.5 s of compiling)."""
    thread = threading.Thread(target=_compile, name="dedup-index-compile", daemon=True)
    thread.start()
    return thread


def _compile() -> None:
    """Each loop run once on a small table of its own: numba compiles (or loads) a loop at its
    first call, for the arrays' types, which are the ones every table passes (contiguous int64
    and bool)."""
    index = Index.empty(16)
    keys, refs = np.arange(4, dtype=np.int64).reshape(-1, 2), np.arange(2, dtype=np.int64)
    index.put(keys, refs, refs, refs)
    index.find(keys)
    index.drop(keys, refs)


def _loops() -> ModuleType:
    """The compiled loops, their module imported (and numba with it) on the first call."""
    from dedup_lib.live.state import loops

    return loops
