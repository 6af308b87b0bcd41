"""json_lines: every row parses back (json.loads) as the value it was, whatever a text holds:
quotes, backslashes, control characters, markup, any script; times in ISO 8601, UTC."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from dedup_lib.live.output.jsonl import json_lines


@given(st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=20))
def test_any_text_comes_back_as_it_was(texts):
    table = pa.table({"why": pa.array(texts, pa.string()), "n": list(range(len(texts)))})
    text = json_lines(table)
    rows = [json.loads(line) for line in text.splitlines()]  # as a reader splitting lines would
    assert rows == [{"why": t, "n": i} for i, t in enumerate(texts)]


def test_each_type_as_json_says_it():
    at = datetime(2026, 12, 1, 19, 33, 1, 992_000, tzinfo=UTC)
    table = pa.table(
        {
            "kind": ["collision", None],
            "entity": ['<img src=x onerror="alert(1)">\\\n\x1b[2J', "pay&ments"],
            "send_time": pa.array([at, None], pa.timestamp("us", tz="UTC")),
            "event_id": pa.array([12345678901234, None], pa.int64()),
            "share": pa.array([0.5, float("nan")]),
            "late": [True, None],
        }
    )
    text = json_lines(table)
    assert text.endswith("\n")
    first, second = (json.loads(line) for line in text.splitlines())
    assert first == {
        "kind": "collision",
        "entity": '<img src=x onerror="alert(1)">\\\n\x1b[2J',
        "send_time": "2026-12-01T19:33:01.992000Z",
        "event_id": 12345678901234,
        "share": 0.5,
        "late": True,
    }
    assert second == {
        "kind": None,
        "entity": "pay&ments",
        "send_time": None,
        "event_id": None,
        "share": None,
        "late": None,
    }
    assert json_lines(table.slice(0, 0)) == ""
