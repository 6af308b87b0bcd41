"""The messages' table from a pass that counted every send, with the rejected sends taken off
on the driver: the table the pass gives when it judges each send."""

from __future__ import annotations

import pyarrow as pa

from dedup_lib.sweep.truth import less_rejected

COLUMNS = ["entity", "several", "logical_id", "messages", "messages_rejected", "unrejected"]


def _table(rows: list[tuple[object, ...]]) -> pa.Table:
    schema = pa.schema(
        [
            ("entity", pa.string()),
            ("several", pa.bool_()),
            ("logical_id", pa.int64()),
            ("messages", pa.int64()),
            ("messages_rejected", pa.int64()),
            ("unrejected", pa.int64()),
        ]
    )
    return pa.Table.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows], schema=schema)


def test_rejected_sends_are_taken_off_each_message_null_ids_included() -> None:
    big = 2**62 + 1  # exact only if the ids never pass through floats
    counted = _table(
        [
            ("a", True, big, 1, 0, 3),
            ("a", True, 2, 1, 0, 2),
            ("a", True, None, 1, 0, 2),
            ("a", False, None, 4, 0, 1),
            ("b", False, None, 2, 0, 1),
        ]
    )
    rejected = pa.table(
        {
            "entity": ["a", "a", "a", "a", "b"],
            "logical_id": pa.array([big, 2, None, 7, 9], pa.int64()),
            "rejected": [1, 2, 1, 1, 1],
        }
    )
    judged = less_rejected(counted, rejected).to_pylist()
    assert sorted(judged, key=lambda r: (r["entity"], r["several"])) == [
        # a: the null-id message keeps 1 send, id 2 none (rejected), id 7 was sent once.
        dict(zip(COLUMNS, ("a", False, None, 6, 2, 1), strict=True)),
        dict(zip(COLUMNS, ("a", True, big, 1, 0, 2), strict=True)),
        dict(zip(COLUMNS, ("b", False, None, 2, 1, 1), strict=True)),
    ]
    assert less_rejected(counted, rejected.slice(0, 0)) is counted
