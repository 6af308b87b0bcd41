"""Rounding a measured window up to one a person would configure."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dedup_lib.errors import InputError
from dedup_lib.rules.durations import format_window, parse_window
from dedup_lib.rules.policy import WINDOW_BOUNDS
from dedup_lib.sweep.grid import WINDOW_STEPS, configurable_window

LOW, HIGH, _ = WINDOW_BOUNDS["service"]
measured = st.floats(min_value=0, max_value=HIGH.total_seconds(), allow_nan=False)


@pytest.mark.parametrize(
    ("seconds", "iso"),
    [
        (48_342.204025, "PT13H30M"),
        (202.709866, "PT4M"),
        (5, "PT20S"),
        (20.2, "PT21S"),
        (600, "PT10M"),
        (601, "PT15M"),
        (3601, "PT1H15M"),
        (86_401, "P1DT1H"),
        (HIGH.total_seconds(), "P7D"),
    ],
)
def test_a_measured_window_rounds_up_to_a_configurable_one(seconds, iso):
    assert format_window(configurable_window(seconds), "iso") == iso


@given(measured)
def test_the_rounded_window_is_no_shorter_configurable_and_stable(seconds):
    rounded = configurable_window(seconds)
    assert rounded >= timedelta(seconds=seconds)
    assert LOW <= rounded <= HIGH
    step = next(step for bound, step in WINDOW_STEPS if rounded.total_seconds() < bound)
    assert rounded.total_seconds() % step == 0
    assert parse_window(format_window(rounded, "iso")) == rounded
    assert configurable_window(rounded) == rounded


def test_a_window_beyond_the_service_maximum_is_refused():
    with pytest.raises(InputError, match="longer than the 7 days"):
        configurable_window("P7DT1S")
