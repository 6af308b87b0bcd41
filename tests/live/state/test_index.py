"""live.state.index: the index from 128-bit keys to their anchors: found, set, replaced and
dropped as a dictionary would, through the table's doublings. No Spark."""

from __future__ import annotations

import numpy as np

from dedup_lib.live.state.index import NONE, Index


def test_the_index_doubles_and_keeps_every_key() -> None:
    index = Index.empty(16)
    keys = np.arange(2000, dtype=np.int64).reshape(-1, 2) * 7919
    index.put(keys, keys[:, 0], keys[:, 0] + 1, keys[:, 1])
    assert index.count == 1000
    slots = index.find(keys)
    assert (slots >= 0).all()
    assert (index.ref[slots] == keys[:, 1]).all()
    assert len(index.used) >= 1000 / (2 / 3)


def test_a_key_is_replaced_and_dropped_only_while_it_holds_the_reference_given() -> None:
    index = Index.empty(16)
    keys = np.array([[1, 2], [1, 3], [-(2**63), 2**63 - 1]], dtype=np.int64)
    replaced = index.put(keys, np.array([10, 20, 30]), np.array([11, 21, 31]), np.array([0, 1, 2]))
    assert replaced.tolist() == [NONE] * 3
    replaced = index.put(keys[:1], np.array([40]), np.array([41]), np.array([5]))
    assert replaced.tolist() == [0]
    slot = index.find(keys[:1])[0]
    assert (index.anchor[slot], index.closes[slot], index.ref[slot]) == (40, 41, 5)
    removed = index.drop(keys, np.array([0, 1, 2]))  # the first key's anchor was set since
    assert removed.tolist() == [False, True, True]
    assert index.count == 1
    assert index.find(keys).tolist()[1:] == [NONE, NONE]
    assert index.find(np.array([[7, 7]], dtype=np.int64)).tolist() == [NONE]
