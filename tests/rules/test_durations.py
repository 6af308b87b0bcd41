from __future__ import annotations

import math
from datetime import timedelta

from dedup_lib import format_window
from dedup_lib.rules.durations import format_duration


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
