"""live.options: the monitor's options as frozen records by concern, each field with its
default, built whole and never changed. No Spark."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from dedup_lib.live.options import (
    JudgeOptions,
    ReadOptions,
    ServeOptions,
    StateOptions,
    WatchOptions,
    WriteOptions,
)


def test_every_option_has_its_default() -> None:
    options = WatchOptions()
    assert options.reading == ReadOptions(None, None, None, "5 seconds", "PT5S", ())
    assert options.judging == JudgeOptions(None, "PT1H")
    assert options.writing == WriteOptions(None, None)
    assert options.serving == ServeOptions(None)
    assert options.state == StateOptions("driver")


def test_a_concern_given_leaves_the_others_at_their_defaults() -> None:
    options = WatchOptions(judging=JudgeOptions(content="body", resend_horizon=timedelta(0)))
    assert options.judging.content == "body"
    assert options.reading == ReadOptions()
    assert WatchOptions().judging == JudgeOptions()


@pytest.mark.parametrize(
    ("record", "name"),
    [(WatchOptions(), "reading"), (ReadOptions(), "trigger"), (WriteOptions(), "alerts")],
)
def test_options_are_read_never_changed(record: object, name: str) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, name, None)


def test_the_records_are_the_concerns_of_watch_options() -> None:
    fields = {f.name: f.type for f in dataclasses.fields(WatchOptions)}
    assert fields == {
        "reading": "ReadOptions",
        "judging": "JudgeOptions",
        "writing": "WriteOptions",
        "serving": "ServeOptions",
        "state": "StateOptions",
    }
