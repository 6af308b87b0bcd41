from __future__ import annotations

import math
from datetime import timedelta

import pytest

from dedup_lib import format_window, parse_window
from dedup_lib.rules.durations import format_duration, parse_azure_window


def test_format_window_is_exact():
    assert format_window(timedelta(minutes=10)) == "10m"
    assert format_window(timedelta(days=1, hours=2)) == "1d2h"
    assert format_window(timedelta(milliseconds=1500)) == "1.5s"


def test_measured_durations_are_short():
    assert format_duration(0.25) == "250ms"
    assert format_duration(4.5) == "4.5s"
    assert format_duration(600) == "10m"
    assert format_duration(87.32) == "1m27s"
    assert format_duration(87.32, "up") == "1m28s"
    assert format_duration(math.nan) == "-"
    assert format_duration(0) == "0s"
    assert format_duration(59.9999) == "1m"
    assert format_duration(-90) == "-1m30s"


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("PT10M", timedelta(minutes=10)),
        ("p7d", timedelta(days=7)),
        (" 0:10:00 ", timedelta(minutes=10)),
        ("7.00:00:00", timedelta(days=7)),
        ("1 day, 2:30:00", timedelta(days=1, hours=2, minutes=30)),
        ("7 days, 0:00:00.5", timedelta(days=7, milliseconds=500)),
    ],
)
def test_azure_windows(text, window):
    assert parse_azure_window(text) == window


@pytest.mark.parametrize("text", ["10m", "600", "PT", "P", "T10M", "-PT10M", "-1 day, 23:00:00"])
def test_azure_windows_are_only_the_forms_azure_writes(text):
    with pytest.raises(ValueError, match="expected an ISO 8601 duration"):
        parse_azure_window(text)


def test_parse_window_reads_every_form():
    for text in ("PT10M", "0:10:00", "10m", "600"):
        assert parse_window(text) == timedelta(minutes=10)
