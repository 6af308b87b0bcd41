"""The index's loops (:mod:`~dedup_lib.live.state.index`), compiled by numba: a module of their
own, imported on the index's first use, so that the library's other paths never import numba;
defined at module level, so that numba keeps their compiled code on disk (``cache=True``, where
``NUMBA_CACHE_DIR`` says, else beside this file or in the user's cache) and a process started
again loads it rather than compiling for about 1.5 s. Each holds no lock on Python objects.
"""

from __future__ import annotations

from typing import Any

from numba import njit


@njit(nogil=True, cache=True, inline="always")
def slot(table: Any, used: Any, k0: int, k1: int) -> Any:
    """Where a key is, or the empty slot where it would go; and the slots looked at."""
    mask = len(used) - 1
    at = k0 & mask  # the keys are hashes already: their low bits spread evenly
    probes = 1
    while used[at] and not (table[at, 0] == k0 and table[at, 1] == k1):
        probes += 1
        at = (at + 1) & mask
    return at, probes


@njit(nogil=True, cache=True)
def find(table: Any, used: Any, keys: Any, out: Any) -> int:
    """Each key's slot into ``out``, -1 where it is not held; the slots looked at."""
    probes = 0
    for i in range(len(keys)):
        at, looked = slot(table, used, keys[i, 0], keys[i, 1])
        out[i] = at if used[at] else -1
        probes += looked
    return probes


@njit(nogil=True, cache=True)
def put(table: Any, used: Any, values: Any, keys: Any, new: Any, replaced: Any) -> Any:
    """Each key's values set, the reference each replaced into ``replaced`` (-1: added); the
    keys added and the slots looked at."""
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


@njit(nogil=True, cache=True)
def drop(table: Any, used: Any, values: Any, keys: Any, expected: Any, removed: Any) -> Any:
    """Each key removed whose slot holds the reference ``expected`` gives, marked in
    ``removed``; the keys removed and the slots looked at."""
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
