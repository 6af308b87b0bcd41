"""Cells: sends per entity and bucket counted once; a window adds its duplicates per cell."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dedup_lib.sweep.cells import Cells

MINUTE = 60_000_000


def _cells(entity, bucket, fixed_rows=()) -> Cells:
    fixed = pd.DataFrame(list(fixed_rows), columns=["entity", "kind", "bucket_us", "sends"])
    codes = {"a": 0, "b": 1}
    return Cells.of(
        ["a", "b"],
        0,
        MINUTE,
        np.array(entity, dtype=np.int64),
        np.array(bucket, dtype=np.int64),
        fixed,
        np.array([codes[e] for e in fixed["entity"]], dtype=np.int64),
    )


def test_a_window_counts_its_duplicates_and_the_ids_it_holds():
    # Entity a: repeated sends in buckets 0, 0, 2 (the second a duplicate); entity b: one
    # single-send key in bucket 1 and 3 rejected sends without a time.
    cells = _cells([0, 0, 0], [0, 0, 2], [("b", "single", MINUTE, 1), ("b", "rejected", np.nan, 3)])
    duplicates = cells.duplicates(np.array([True, False, True]))
    table = cells.over_time(duplicates)  # cell by cell: entity, then time
    assert table.to_dict("list") == {
        "entity": ["a", "a", "b"],
        "time": list(pd.to_datetime([0, 2 * MINUTE, MINUTE], unit="us", utc=True)),
        "sends": [2, 1, 1],
        "duplicates": [1, 0, 0],
        "rejected": [0, 0, 0],
    }
    held, first = cells.held(duplicates, window_us=MINUTE + 1)
    # A window over one bucket holds each accepted id for two; the rows run to two buckets
    # past the last.
    assert held.tolist() == [[1, 1, 1, 1, 0], [0, 1, 1, 0, 0]]
    assert first.tolist() == [0, 1]


def test_no_sends_at_all():
    empty = Cells.of(
        [], 0, MINUTE, np.zeros(0, np.int64), np.zeros(0, np.int64),
        pd.DataFrame(columns=["entity", "kind", "bucket_us", "sends"]), np.zeros(0, np.int64),
    )  # fmt: skip
    duplicates = empty.duplicates(np.zeros(0, dtype=bool))
    assert empty.over_time(duplicates).empty
    held, first = empty.held(duplicates, window_us=3 * MINUTE)
    assert held.shape == (0, 0)
    assert first.tolist() == []
