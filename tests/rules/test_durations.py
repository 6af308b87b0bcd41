from __future__ import annotations

import math
from datetime import timedelta

import pytest

from dedup_lib.errors import InputError, InputTypeError, excerpt
from dedup_lib.rules.durations import (
    MAX_WINDOW,
    format_duration,
    format_window,
    parse_azure_window,
    parse_window,
)


def test_format_window_is_exact():
    assert format_window(timedelta(minutes=10)) == "10m"
    assert format_window(timedelta(days=1, hours=2)) == "1d2h"
    assert format_window(timedelta(milliseconds=1500)) == "1.5s"


@pytest.mark.parametrize(
    ("window", "iso", "words"),
    [
        (timedelta(hours=13, minutes=30), "PT13H30M", "13 hours 30 minutes"),
        (timedelta(days=1, hours=2), "P1DT2H", "1 day 2 hours"),
        (timedelta(days=7), "P7D", "7 days"),
        (timedelta(minutes=1, seconds=30.25), "PT1M30.25S", "1 minute 30.25 seconds"),
        (timedelta(seconds=20), "PT20S", "20 seconds"),
        (timedelta(0), "PT0S", "0 seconds"),
    ],
)
def test_format_window_as_azure_writes_it_and_in_words(window, iso, words):
    assert format_window(window, "iso") == iso
    assert parse_window(iso) == window
    assert format_window(window, "words") == words


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


HOSTILE_WINDOWS = [
    pytest.param("inf", "not a finite number", id="inf-text"),
    pytest.param("-inf", "not a finite number", id="minus-inf-text"),
    pytest.param("nan", "not a finite number", id="nan-text"),
    pytest.param("1e400", "not a finite number", id="1e400"),
    pytest.param(float("inf"), "not a finite number", id="inf"),
    pytest.param(float("-inf"), "not a finite number", id="minus-inf"),
    pytest.param(float("nan"), "not a finite number", id="nan"),
    pytest.param(10**30, "too long", id="10**30"),
    pytest.param(10**5000, "too long", id="10**5000"),
    pytest.param(-(10**5000), "negative", id="minus-10**5000"),
    pytest.param("P1000000000D", "too long", id="P1000000000D"),
    pytest.param("P99999999999D", "too long", id="P99999999999D"),
    pytest.param("P" + "9" * 90 + "W", "too long", id="P-90-digits-W"),
    pytest.param("PT1e400S", "cannot read", id="PT1e400S"),
    pytest.param("99999999999.00:00:00", "days must be 0-10675199", id="timespan-days"),
    pytest.param("99999999999999w", "too long", id="shorthand-weeks"),
    pytest.param("-5", "negative", id="minus-5-text"),
    pytest.param(-5, "negative", id="minus-5"),
    pytest.param(-0.001, "negative", id="minus-1ms"),
    pytest.param("-PT5M", "cannot read", id="minus-PT5M"),
    pytest.param(timedelta.max, "too long", id="timedelta.max"),
    pytest.param(timedelta(days=10675200), "too long", id="just-past-TimeSpan.MaxValue"),
    pytest.param(timedelta.min, "negative", id="timedelta.min"),
    pytest.param(-timedelta(seconds=1), "negative", id="minus-1s"),
    pytest.param("9" * 20_000, "longer than any window", id="20k-digits"),
    pytest.param("1h" * 60, "longer than any window", id="long-shorthand"),
    pytest.param("\x1b[2J10m", "cannot read", id="escape"),
]


@pytest.mark.parametrize(("value", "why"), HOSTILE_WINDOWS)
def test_hostile_windows_are_one_clear_input_error(value, why):
    with pytest.raises(InputError) as caught:
        parse_window(value)
    message = str(caught.value)
    assert why in message
    assert message.startswith("window: ")
    assert len(message) < 300
    assert "\x1b" not in message
    if isinstance(value, str) and len(value) < 60:
        assert excerpt(value.strip()) in message or excerpt(value) in message


def test_too_long_windows_name_the_longest_service_bus_allows():
    with pytest.raises(InputError, match=r"'P99999999999D' is too long.*7 days \(P7D\)"):
        parse_window("P99999999999D")
    assert parse_window(MAX_WINDOW) == MAX_WINDOW
    assert parse_window(f"P{MAX_WINDOW.days}D") == timedelta(days=MAX_WINDOW.days)


def test_huge_integers_are_described_not_printed():
    with pytest.raises(InputError, match=r"an integer of ~5,001 digits' is too long") as caught:
        parse_window(10**5000)
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("0:99:99", "'0:99:99'"),
        ("0:60:00", "'0:60:00'"),
        ("0:00:60", "'0:00:60'"),
        ("25:00:00", "'25:00:00'"),
        ("24:00:00", "'24:00:00'"),
        ("1.24:00:00", "'1.24:00:00'"),
        ("1 day, 25:00:00", "'1 day, 25:00:00'"),
        ("99999999999 days, 0:00:00", "'99999999999 days, 0:00:00'"),
        ("10675200.00:00:00", "'10675200.00:00:00'"),
    ],
)
def test_timespan_parts_out_of_range_are_refused(text, shown):
    readers = (parse_azure_window,) if "day" in text else (parse_window, parse_azure_window)
    for parse in readers:
        with pytest.raises(
            InputError, match=r"not a TimeSpan: .*hours 0-23, minutes 0-59, seconds 0-59"
        ) as caught:
            parse(text)
        assert shown in str(caught.value)
        assert len(str(caught.value)) < 300


def test_timespan_fraction_has_at_most_seven_digits():
    assert parse_azure_window("0:00:20.1234567") == timedelta(seconds=20, microseconds=123457)
    assert parse_window("0:00:00.5") == timedelta(milliseconds=500)
    assert parse_window("23:59:59") == timedelta(hours=23, minutes=59, seconds=59)
    assert parse_window("10675199.02:48:05") == timedelta(days=10675199, seconds=10085)
    with pytest.raises(InputError, match=r"'0:00:20\.12345678' is not a TimeSpan.*7 digits"):
        parse_azure_window("0:00:20.12345678")


@pytest.mark.parametrize(
    "text", ["P99999999999D", "inf", "0:99:99", "x" * 5_000_000, "\x00\ufeff\u202e"]
)
def test_azure_windows_refuse_hostile_text_clearly(text):
    with pytest.raises(InputError) as caught:
        parse_azure_window(text)
    assert len(str(caught.value)) < 300
    assert excerpt(text.strip()) in str(caught.value)


def test_azure_windows_refuse_other_types():
    with pytest.raises(InputTypeError, match="window: expected text, got int '600'"):
        parse_azure_window(600)  # type: ignore[arg-type]


def test_format_window_keeps_the_sign():
    assert format_window(timedelta(seconds=-5)) == "-5s"
