"""live.lines: a micro-batch's line as its commit keeps it (JSON) and back, with the state's
size said in the line; a line of the resends' query. No Spark."""

from __future__ import annotations

import json
from datetime import datetime

import pandas as pd
import pyarrow as pa

from dedup_lib.live.output.lines import RESENDS, VERDICTS, BatchLine, StateSize


def _line(batch: int, judged: int = 3) -> BatchLine:
    minutes = pd.DataFrame(
        {
            "minute": pd.to_datetime(["2026-11-03 21:00", "2026-11-03 21:01"]),
            "sends": [judged, 1],
            "duplicates": [1, 0],
            "late": [0, 1],
        }
    )
    alert = {
        "kind": "collision",
        "entity": "<img src=x>",
        "send_time": datetime(2026, 11, 3, 21, 0, 1, 250_000),
        "original_send_time": None,
        "event_id": 7,
        "why": "a different message",
    }
    alerted = pd.DataFrame(
        {"minute": pd.to_datetime(["2026-11-03 21:00"]), "kind": ["collision"], "alerts": [1]}
    )
    return BatchLine(batch, minutes, [alert], StateSize(1_698, 3 << 20, 90_000, 12), alerted)


def test_a_line_comes_back_from_its_json_as_it_was():
    line = _line(4)
    back = BatchLine.from_json(json.loads(json.dumps(line.to_json(), default=str)))
    assert (back.batch, str(back), back.found, back.state) == (
        line.batch,
        str(line),
        line.found,
        line.state,
    )
    pd.testing.assert_frame_equal(back.minutes, line.minutes)
    pd.testing.assert_frame_equal(back.alerted, line.alerted)


def test_a_line_says_the_counts_and_how_large_the_state_is():
    assert str(_line(4)) == (
        "batch 4: 4 sends judged, 1 duplicates, 1 late, 1 alerts; state 1,698 keys, "
        "3.0 MiB in memory, 87.9 KiB on disk; 12 waiting"
    )


def _resends(batch: int) -> BatchLine:
    sent = datetime(2026, 11, 3, 21, 4, 2, 500_000)
    alerts = pa.table(
        {
            "kind": ["resend", "resend"],
            "entity": ["orders", "<img src=x>"],
            "send_time": pa.array([sent, sent], pa.timestamp("us", tz="UTC")),
            "event_id": [8, 9],
        }
    )
    return BatchLine.of_resends(batch, alerts, StateSize(memory=1 << 20, executors=True))


def test_a_line_of_the_resends_query_says_its_resends_and_judges_nothing():
    line = _resends(2)
    assert (line.stream, line.judged, line.alerts) == (RESENDS, 0, 2)
    assert str(line) == (
        "resends 2: 2 resends reached consumers again; state on the executors, 1.0 MiB in "
        "memory, 0 B on disk"
    )
    assert line.alerted["kind"].tolist() == ["resend"]
    back = BatchLine.from_json(json.loads(json.dumps(line.to_json(), default=str)))
    assert (back.stream, str(back)) == (RESENDS, str(line))


def test_a_line_kept_before_lines_had_a_stream_is_one_of_verdicts():
    kept = json.loads(json.dumps(_line(4).to_json(), default=str))
    del kept["stream"]
    assert BatchLine.from_json(kept).stream == VERDICTS
