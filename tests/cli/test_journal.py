"""cli.journal: what ``dedup-lib watch`` prints as it runs: text for a terminal, or one JSON
object per line with the event's fields; a failure's line on stderr, with its traceback unless
it is the library's own answer. No Spark."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from dedup_lib.cli.journal import Journal
from dedup_lib.errors import InputError
from dedup_lib.live.output.lines import BatchLine, StateSize

HOSTILE = "\x1b]0;pwned\x07"


def _records(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_json_lines_carry_the_event_its_level_and_its_escaped_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    journal = Journal("json", quiet=False)
    journal.step("starting")
    journal.note(f"{HOSTILE}.csv is not read")
    journal.summary("read 3 files")
    out, err = capsys.readouterr()
    notes = _records(out)
    assert [(r["level"], r["event"]) for r in notes] == [("warning", "note"), ("info", "summary")]
    assert notes[0]["message"] == "\\x1b]0;pwned\\x07.csv is not read"
    (step,) = _records(err)
    assert (step["event"], step["message"]) == ("step", "starting")
    assert str(step["time"]).endswith("+00:00")


def test_a_warning_is_one_escaped_line_on_stderr_as_text_or_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = f"dedup-lib watch: warning: a start, tried again (2 of 5): {HOSTILE}"
    Journal("text", quiet=True).warning(said)
    Journal("json", quiet=True).warning(said)
    out, err = capsys.readouterr()
    text, record = err.splitlines()
    assert out == ""
    assert text == "dedup-lib watch: warning: a start, tried again (2 of 5): \\x1b]0;pwned\\x07"
    warned = json.loads(record)
    assert (warned["level"], warned["event"], warned["message"]) == ("warning", "warning", text)


def test_quiet_json_leaves_the_steps_out(capsys: pytest.CaptureFixture[str]) -> None:
    Journal("json", quiet=True).step("starting")
    assert capsys.readouterr() == ("", "")


def test_the_library_s_answer_is_its_line_alone(capsys: pytest.CaptureFixture[str]) -> None:
    line = "dedup-lib watch: error: the checkpoint <ck> was written with other policy"
    Journal("text", quiet=True).failed(line, InputError("other policy"))
    Journal("json", quiet=True).failed(line, InputError("other policy"))
    text, record = capsys.readouterr().err.splitlines()
    assert text == line
    assert json.loads(record)["message"] == line
    assert "traceback" not in json.loads(record)


def test_a_bug_s_traceback_goes_to_stderr_before_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        raise ZeroDivisionError(f"division by zero {HOSTILE}")
    except ZeroDivisionError as exc:
        Journal("text", quiet=True).failed("dedup-lib watch: error: internal error", exc)
        Journal("json", quiet=True).failed("dedup-lib watch: error: internal error", exc)
    err = capsys.readouterr().err
    assert "\x1b" not in err
    text, record = err.split("dedup-lib watch: error: internal error\n", 1)
    assert text.startswith("Traceback (most recent call last)")
    failed = json.loads(record)
    assert (failed["level"], failed["event"]) == ("error", "failed")
    assert str(failed["traceback"]).endswith("division by zero \\x1b]0;pwned\\x07")


def test_a_micro_batch_s_json_names_its_stream(capsys: pytest.CaptureFixture[str]) -> None:
    sent = pa.array([datetime(2026, 11, 3, 21, 4, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))
    resent = pa.table({"kind": ["resend"], "entity": [HOSTILE], "send_time": sent})
    Journal("json", quiet=True).batch(BatchLine.of_resends(5, resent, StateSize(executors=True)))
    (record,) = _records(capsys.readouterr().out)
    assert (record["event"], record["stream"], record["batch"]) == ("micro_batch", "resends", 5)
    assert (record["judged"], record["alerts"]) == (0, 1)
    assert (
        record["message"] == "resends 5: 1 resends reached consumers again; state on the executors"
    )
