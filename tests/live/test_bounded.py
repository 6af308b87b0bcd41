"""What the monitor's driver keeps does not grow with the files landed or the micro-batches run
(issue 70, "runs for weeks"): a steady feed, with files rotated away and windows closing,
leaves the ledger, the state's index, segments and bookkeeping at a steady size. The whole
monitor over an hour: benchmarks/bench_soak.py."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_lib.live.landing.ledger import Reading, plan
from dedup_lib.live.state.store import ANCHOR, CLOSES, STORED_K0, STORED_K1, KeyedState


def test_the_ledger_forgets_files_rotated_away_once_read(tmp_path):
    """A writer that keeps its last 5 files: the ledger holds those, not every file landed."""
    landing = tmp_path / "landing"
    landing.mkdir()
    reading = Reading("parquet", 5.0)
    known: dict = {}
    table = pa.table({"a": [1, 2, 3]})
    sizes = []
    for i in range(200):
        pq.write_table(table, landing / f".f-{i:04d}.parquet")
        os.replace(landing / f".f-{i:04d}.parquet", landing / f"f-{i:04d}.parquet")
        if i >= 5:
            (landing / f"f-{i - 5:04d}.parquet").unlink()
        planned = plan(str(landing), known, reading, 2e9)
        assert not planned.notes
        known = planned.files
        sizes.append(len(known))
    assert max(sizes[10:]) <= 5


def test_the_state_keeps_a_steady_size_under_a_steady_feed(tmp_path):
    """New keys every micro-batch, windows of 10 micro-batches: the keys, the index's table,
    the segments (in memory and on disk) and the queue of their fronts stop growing."""
    rng = np.random.default_rng(0)
    state = KeyedState(str(tmp_path))
    window = 10_000
    seen = []
    for batch in range(300):
        keys = rng.integers(-(2**62), 2**62, size=(500, 2), dtype=np.int64)
        at = np.full(len(keys), batch * 1_000, dtype=np.int64)
        state.set_anchors(
            batch,
            pa.table(
                {
                    STORED_K0: keys[:, 0],
                    STORED_K1: keys[:, 1],
                    ANCHOR: at,
                    CLOSES: at + window,
                    "e": keys[:, 0],
                }
            ),
        )
        state.expire(batch * 1_000)
        state.release()
        seen.append(
            (
                state.keys,
                state.index.nbytes,
                len(state._segments),
                len(state._mapped),
                len(state._fronts),
                len(os.listdir(tmp_path)),
            )
        )
    steady = np.array(seen[50:])
    assert (steady.max(axis=0) == steady[:50].max(axis=0)).all(), steady.max(axis=0)
    assert steady[:, 0].max() <= 500 * 11
    assert steady[:, 2].max() <= 11
    assert steady[:, 5].max() <= 11
