"""live.lines: a micro-batch's line through a file and back, and the relay that reads them
(what carries the monitor's lines from a Spark Connect server to its caller). No Spark."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest

from dedup_lib.live.lines import BatchLine, Relay, record


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
    return BatchLine(batch, minutes, [alert])


def test_a_line_comes_back_from_its_file_as_it_was(tmp_path):
    line = _line(4)
    record(str(tmp_path), 4, line.to_json())
    (path,) = tmp_path.iterdir()
    assert path.name == "0000000004.json"
    taken: list[BatchLine] = []
    Relay(str(tmp_path), str(tmp_path / "loads"), taken.append, print).drain()
    (back,) = taken
    assert (back.batch, str(back), back.found) == (line.batch, str(line), line.found)
    pd.testing.assert_frame_equal(back.minutes, line.minutes)


def test_the_relay_hands_on_each_micro_batch_once_in_order_after_what_was_there(tmp_path):
    lines, loads = tmp_path / "lines", tmp_path / "loads"
    record(str(lines), 0, _line(0).to_json())  # an earlier run's
    taken: list[int] = []
    counts: list[dict[str, int]] = []
    relay = Relay(str(lines), str(loads), lambda line: taken.append(line.batch), counts.append)
    relay.skip_present()
    record(str(lines), 2, _line(2).to_json())
    record(str(lines), 1, _line(1).to_json())
    record(str(loads), 1, {"read": 5})
    relay.drain()
    relay.drain()
    assert taken == [1, 2]
    assert counts == [{"read": 5}]
    assert not list(lines.glob("*.part"))


def test_a_failure_while_relaying_is_raised_by_stop(tmp_path):
    def fail(line: BatchLine) -> None:
        raise RuntimeError(f"on_batch failed on batch {line.batch}")

    relay = Relay(str(tmp_path), str(tmp_path / "loads"), fail, print, every=0.01)
    relay.start()
    record(str(tmp_path), 0, _line(0).to_json())
    with pytest.raises(RuntimeError, match="on_batch failed on batch 0"):
        relay.stop()
