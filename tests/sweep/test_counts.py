"""The counts the driver derives: entities numbered once, and the sends outside repeated keys."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dedup_lib.sweep.counts import entity_codes, fixed

MINUTE = 60_000_000


def test_a_null_entity_is_numbered_as_spark_names_it() -> None:
    codes, names = entity_codes(pd.Series(["a", None, "(none)", "a", "b"], dtype=object))
    assert list(names) == ["a", "(none)", "b"]
    assert list(codes) == [0, 1, 1, 0, 2]
    empty_codes, empty_names = entity_codes(pd.Series([], dtype=object))
    assert len(empty_codes) == len(empty_names) == 0


def test_the_repeated_sends_are_taken_off_their_bucket_and_entity() -> None:
    counted = pd.DataFrame(
        {
            "entity": ["a", "a", "a", "(none)"],
            "kind": ["eligible", "eligible", "without_message_id", "eligible"],
            "bucket_us": [0, MINUTE, 0, 0],
            "sends": [5, 2, 3, 2],
            "resends": [1, 1, 0, 1],
        }
    )
    rows = pd.DataFrame(
        {
            "entity": ["a", "a", None, None],
            "time_us": [5, MINUTE + 7, 9, 10],
            "attempt": [1, 2, 1, 2],
        }
    )
    codes, names = entity_codes(rows["entity"])
    table = fixed(counted, rows, codes, names, MINUTE, truth=True)
    # (none)'s only minute holds nothing but repeated sends (a null entity is "(none)"): left out.
    assert table.to_dict("records") == [
        {"entity": "a", "kind": "single", "bucket_us": 0, "sends": 4, "resends": 1},
        {"entity": "a", "kind": "single", "bucket_us": MINUTE, "sends": 1, "resends": 0},
        {"entity": "a", "kind": "without_message_id", "bucket_us": 0, "sends": 3, "resends": 0},
    ]
    assert np.issubdtype(table["sends"].dtype, np.integer)
