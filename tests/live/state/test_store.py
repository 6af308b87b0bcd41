"""KeyedState against a dictionary: anchors set, replaced, expired and restored from the
segments, over random micro-batches; and the work of a micro-batch follows the keys it
touches, not the keys held (docs/rules.md, section 8)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dedup_lib.live.state.store import ANCHOR, CLOSES, OWN, STORED_K0, STORED_K1, KeyedState

PAYLOAD = pa.schema([("event_id", pa.string()), ("content", pa.string())])


def anchors(keys: np.ndarray, at: np.ndarray, window: int | np.ndarray, batch: int) -> pa.Table:
    return pa.table(
        {
            STORED_K0: keys[:, 0],
            STORED_K1: keys[:, 1],
            ANCHOR: at,
            CLOSES: at + window,
            "event_id": [f"e{batch}-{i}" for i in range(len(keys))],
            "content": [f"c{k}" for k in keys[:, 1]],
        }
    )


def held(state: KeyedState, keys: np.ndarray) -> dict[tuple[int, int], tuple]:
    found = state.find(keys)
    refs = found.ref[found.held]
    rows = state.rows(refs, PAYLOAD).to_pylist()
    got = {}
    for key, anchor, closes, row in zip(
        keys[found.held], found.anchor[found.held], found.closes[found.held], rows, strict=True
    ):
        got[tuple(key)] = (int(anchor), int(closes), row["event_id"], row["content"])
    return got


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_anchors_set_replaced_expired_and_restored_as_a_dictionary_holds_them(tmp_path, seed):
    rng = np.random.default_rng(seed)
    pool = rng.integers(-(2**63), 2**63 - 1, size=(400, 2), dtype=np.int64)
    pool[:, 0] &= 0x3F  # many keys share a home slot: probes and backward shifts
    state = KeyedState(str(tmp_path))
    model: dict[tuple[int, int], tuple] = {}
    now = 0
    for batch in range(40):
        now += int(rng.integers(1, 50))
        chosen = pool[rng.choice(len(pool), 30, replace=False)]
        # A key's window is its entity's: the same at every anchor (a checkpoint keeps its
        # policy), so an anchor replaced never closed after the one replacing it.
        window = np.array([5, 40, 400])[chosen[:, 1] % 3]
        at = now + rng.integers(0, 10, len(chosen))
        table = anchors(chosen, at, window, batch)
        state.set_anchors(batch, table)
        for row in table.to_pylist():
            model[(row[STORED_K0], row[STORED_K1])] = (
                row[ANCHOR],
                row[CLOSES],
                row["event_id"],
                row["content"],
            )
        watermark = now - 20
        expired = state.expire(watermark)
        gone = [k for k, v in model.items() if v[1] <= watermark]
        assert expired == len(gone)
        for key in gone:
            del model[key]
        state.release()
        assert held(state, pool) == model
        assert state.keys == len(model)
        if batch % 7 == 6:
            state = KeyedState.restore(str(tmp_path), batch, watermark)
            assert held(state, pool) == model


def test_a_restart_forgets_a_segment_written_after_the_last_commit(tmp_path):
    keys = np.array([[1, 2], [3, 4]], dtype=np.int64)
    state = KeyedState(str(tmp_path))
    state.set_anchors(0, anchors(keys[:1], np.array([10]), 100, 0))
    state.set_anchors(1, anchors(keys, np.array([20, 20]), 100, 1))  # never committed
    again = KeyedState.restore(str(tmp_path), 0, 0)
    assert held(again, keys) == {(1, 2): (10, 110, "e0-0", "c2")}
    assert not (tmp_path / "segment-0000000001.arrow").exists()


def test_a_segment_written_before_its_columns_were_renamed_in_code_restores(tmp_path):
    """The segment files' column names are the checkpoint's, not the code's: an older
    checkpoint's segments (columns ``k0``, ``k1``, ``anchor``, ``closes``) are read back."""
    assert OWN == ("k0", "k1", "anchor", "closes")
    written = pa.table(
        {
            "k0": pa.array([1], pa.int64()),
            "k1": pa.array([2], pa.int64()),
            "anchor": pa.array([10], pa.int64()),
            "closes": pa.array([110], pa.int64()),
            "event_id": ["e0-0"],
            "content": ["c2"],
        }
    )
    KeyedState(str(tmp_path)).set_anchors(0, written)
    again = KeyedState.restore(str(tmp_path), 0, 0)
    assert held(again, np.array([[1, 2]], dtype=np.int64)) == {(1, 2): (10, 110, "e0-0", "c2")}


def test_a_segment_goes_once_every_anchor_in_it_is_replaced_or_expired(tmp_path):
    keys = np.array([[1, 2], [3, 4]], dtype=np.int64)
    state = KeyedState(str(tmp_path))
    state.set_anchors(0, anchors(keys, np.array([10, 10]), 100, 0))
    state.set_anchors(1, anchors(keys[:1], np.array([120]), 100, 1))
    state.release()
    assert (tmp_path / "segment-0000000000.arrow").exists()  # [3, 4] is still in it
    state.expire(110)
    state.release()
    assert not (tmp_path / "segment-0000000000.arrow").exists()
    assert held(state, keys) == {(1, 2): (120, 220, "e1-0", "c2")}


def test_a_micro_batch_costs_the_keys_it_touches_not_the_keys_held(tmp_path):
    """The slots looked at for a hundred keys are the same few hundred whether the state
    holds a thousand keys or a million (a whole scan would look at a million)."""
    rng = np.random.default_rng(3)

    def probes(held_keys: int) -> int:
        state = KeyedState(str(tmp_path / str(held_keys)))
        keys = rng.integers(-(2**63), 2**63 - 1, size=(held_keys, 2), dtype=np.int64)
        state.set_anchors(0, anchors(keys, np.zeros(held_keys, dtype=np.int64), 10**9, 0))
        state.index.probes = 0
        touched = np.concatenate([keys[:50], rng.integers(0, 2**62, size=(50, 2))])
        found = state.find(touched)
        state.set_anchors(1, anchors(touched, np.ones(100, dtype=np.int64), 10**9, 1))
        state.expire(0)
        assert found.held.sum() == 50
        return state.index.probes

    few, many = probes(1_000), probes(1_000_000)
    assert many < 600
    assert many < 3 * few + 100
